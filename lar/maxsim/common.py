"""Input validation, block planning and a fast float16 -> float32 conversion shared by the
MaxSim backends. numpy only; never imports torch (torch tensors are recognised by duck typing)."""
from __future__ import annotations

import numbers

import numpy as np

from lar.core.errors import ConfigError

__all__ = [
    "is_torch_tensor",
    "check_query",
    "check_doc_tokens",
    "check_starts",
    "check_weights",
    "check_block_tokens",
    "validate",
    "plan_blocks",
    "f16_to_f32",
    "to_f32",
]


def is_torch_tensor(x) -> bool:
    """True for a ``torch.Tensor`` without importing torch."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _small_to_numpy(x, what: str) -> np.ndarray:
    """Small arrays (query, starts, weights) may come as lists, numpy arrays or tensors."""
    if is_torch_tensor(x):
        x = x.detach()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} could not be read as an array: {exc}") from exc


def check_query(q) -> np.ndarray:
    """Return the query as a C-contiguous float32 array (nq, d) or raise ``ConfigError``."""
    a = _small_to_numpy(q, "query q")
    if a.dtype.kind not in "fiu":
        raise ConfigError(f"query q must hold real numbers, got dtype {a.dtype}")
    if a.ndim != 2:
        raise ConfigError(
            f"query q must be 2-D (n_query_tokens, dim), got shape {a.shape}; "
            "wrap a single vector as q[None, :]"
        )
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ConfigError(f"query q is empty: shape {a.shape}; it needs at least one token of dim >= 1")
    a = np.ascontiguousarray(a, dtype=np.float32)
    if not np.isfinite(a).all():
        raise ConfigError("query q contains NaN or infinite values")
    return a


_TORCH_FLOATS = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")


def check_doc_tokens(doc_tokens, dim: int | None = None):
    """Check shape/dtype of the token matrix (N, d) without reading its data.

    Returns ``doc_tokens`` itself (numpy arrays and memmaps are passed through untouched,
    torch tensors too; anything else is converted with ``np.asarray``)."""
    x = doc_tokens
    if not (isinstance(x, np.ndarray) or is_torch_tensor(x)):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"doc_tokens could not be read as an array: {exc}") from exc
    if is_torch_tensor(x):
        if str(x.dtype) not in _TORCH_FLOATS:
            raise ConfigError(f"doc_tokens must be a floating tensor, got dtype {x.dtype}")
    elif x.dtype.kind != "f":
        raise ConfigError(
            f"doc_tokens must be a floating array (float16/float32/float64), got dtype {x.dtype}"
        )
    shape = tuple(x.shape)
    if len(shape) != 2:
        raise ConfigError(f"doc_tokens must be 2-D (n_tokens, dim), got shape {shape}")
    if shape[0] == 0:
        raise ConfigError("doc_tokens is empty (0 token rows); there is nothing to score")
    if dim is not None and shape[1] != dim:
        raise ConfigError(
            f"dimension mismatch: query tokens have dim {dim} but doc_tokens have dim {shape[1]}"
        )
    return x


def check_starts(starts, n_tokens: int) -> np.ndarray:
    """Validate document start offsets into ``n_tokens`` rows; return them as int64."""
    s = _small_to_numpy(starts, "starts")
    if s.ndim != 1:
        raise ConfigError(f"starts must be 1-D (n_docs,), got shape {s.shape}")
    if s.size == 0:
        raise ConfigError("starts is empty: there are no documents to score")
    if s.dtype.kind not in "iu":
        raise ConfigError(f"starts must hold integers (token offsets), got dtype {s.dtype}")
    s = s.astype(np.int64, copy=False)
    if s[0] != 0:
        raise ConfigError(f"starts[0] must be 0 (the first document starts at row 0), got {int(s[0])}")
    if s.size > 1:
        bad = np.flatnonzero(np.diff(s) <= 0)
        if bad.size:
            i = int(bad[0])
            raise ConfigError(
                f"starts must be strictly increasing (every document needs >= 1 token): "
                f"starts[{i}]={int(s[i])} but starts[{i + 1}]={int(s[i + 1])}"
            )
    if s[-1] >= n_tokens:
        raise ConfigError(
            f"the last document starts at row {int(s[-1])} but doc_tokens has only {n_tokens} rows "
            "(every document needs >= 1 token)"
        )
    return s


def check_weights(weights, nq: int) -> np.ndarray | None:
    """Validate per-query-token weights; return float32 (nq,) or None for all-ones."""
    if weights is None:
        return None
    w = _small_to_numpy(weights, "weights")
    if w.dtype.kind not in "fiub":
        raise ConfigError(f"weights must hold real numbers, got dtype {w.dtype}")
    if w.ndim != 1 or w.shape[0] != nq:
        raise ConfigError(
            f"weights must have shape ({nq},) (one per query token), got shape {w.shape}"
        )
    w = np.ascontiguousarray(w, dtype=np.float32)
    if not np.isfinite(w).all():
        raise ConfigError("weights contain NaN or infinite values")
    if (w < 0).any():
        raise ConfigError(
            f"weights must be >= 0 (0 removes a query token, >1 boosts it); "
            f"got a negative weight at index {int(np.flatnonzero(w < 0)[0])}"
        )
    return w


def check_block_tokens(block_tokens, default: int) -> int:
    if block_tokens is None:
        return default
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, numbers.Integral):
        raise ConfigError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    if block_tokens < 1:
        raise ConfigError(f"block_tokens must be >= 1, got {block_tokens}")
    return int(block_tokens)


def validate(q, doc_tokens, starts, weights):
    """Validate everything; return ``(q32, doc_tokens, starts64, weights32_or_None)``."""
    q32 = check_query(q)
    x = check_doc_tokens(doc_tokens, q32.shape[1])
    s = check_starts(starts, int(x.shape[0]))
    w = check_weights(weights, q32.shape[0])
    return q32, x, s, w


def plan_blocks(starts: np.ndarray, n_tokens: int, block_tokens: int) -> list[tuple[int, int]]:
    """Split documents into consecutive groups ``(doc_a, doc_b)`` holding about
    ``block_tokens`` tokens each. A block never splits a document; a document longer than
    ``block_tokens`` forms a block of its own."""
    n = int(starts.shape[0])
    ends = np.empty(n, dtype=np.int64)
    ends[:-1] = starts[1:]
    ends[-1] = n_tokens
    out = []
    a = 0
    while a < n:
        b = int(np.searchsorted(ends, int(starts[a]) + block_tokens, side="right"))
        if b <= a:
            b = a + 1
        out.append((a, b))
        a = b
    return out


_TWO_POW_112 = np.float32(2.0**112)
_CHUNK = 1 << 17  # elements converted at a time (input + output stay in L2)


def f16_to_f32(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Convert a float16 array into the float32 array ``out`` (same shape), exactly.

    numpy's own half->single cast is scalar code on many builds (~0.6 G elements/s); this
    does the conversion with integer ufuncs that are vectorised: move sign/exponent/mantissa
    into float32 position and rescale the exponent bias by multiplying with 2**112 (which also
    normalises half subnormals exactly). Chunks holding inf/NaN are redone with ``np.copyto``.
    """
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        np.copyto(out, x, casting="unsafe")
        return out
    h = x.reshape(-1).view(np.uint16)
    u = out.reshape(-1).view(np.uint32)
    n = h.shape[0]
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        us = u[s:e]
        np.copyto(us, h[s:e], casting="unsafe")  # zero-extend to 32 bits
        np.left_shift(us, 16, out=us)  # half bits now in the top 16 bits
        iv = us.view(np.int32)
        np.right_shift(iv, 3, out=iv)  # exponent/mantissa into float32 slots; sign smeared
        np.bitwise_and(us, np.uint32(0x8FFFFFFF), out=us)  # keep only the real sign bit
        f = us.view(np.float32)
        np.multiply(f, _TWO_POW_112, out=f)
        # half inf/NaN (exponent 31) come out as |v| >= 2**16 > 65504 (largest finite half)
        if f.max() >= 65536.0 or f.min() <= -65536.0:
            np.copyto(f, x.reshape(-1)[s:e], casting="unsafe")
    return out


def to_f32(x: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """Return ``x`` (2-D) as a C-contiguous float32 array, reusing ``buf`` where possible."""
    if x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    out = buf[: x.shape[0]] if buf is not None and buf.shape[0] >= x.shape[0] else None
    if out is None:
        out = np.empty(x.shape, dtype=np.float32)
    if x.dtype == np.float16:
        return f16_to_f32(x, out)
    np.copyto(out, x, casting="unsafe")
    return out
