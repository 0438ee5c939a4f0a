"""Exact late-interaction (MaxSim) scoring with torch (CUDA when available, else CPU).

Same semantics as ``numpy_backend``. torch is imported lazily through
``lar.core.errors.require("torch", "models")``; this module itself only needs numpy.

Token blocks that live on the host (numpy arrays / memory maps, usually float16) are
copied to the device one block at a time, in their storage dtype, through two pinned
staging buffers (so the host copy of block k+1 overlaps the device work on block k), and
converted to the compute dtype on the device.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

import numpy as np

from lar.core.errors import ConfigError, require
from lar.maxsim.common import check_block_tokens, check_doc_tokens, check_query, check_weights
from lar.maxsim.common import is_torch_tensor, plan_blocks, validate
from lar.maxsim.numpy_backend import Explanation

__all__ = [
    "COMPUTE_DTYPES",
    "SEGMENT_METHODS",
    "default_device",
    "iter_maxsim_torch",
    "maxsim_torch",
    "maxsim_explain_torch",
]

#: "tf32" = float32 storage with TensorFloat-32 matmuls (CUDA only; plain float32 on CPU)
COMPUTE_DTYPES = ("float32", "tf32", "bfloat16", "float16")
#: how the per-document max over a block's token similarities is taken
SEGMENT_METHODS = ("auto", "segment_reduce", "index_reduce", "scatter", "pad", "numpy")

DEFAULT_BLOCK_TOKENS_CPU = 65536
DEFAULT_BLOCK_TOKENS_CUDA = 1 << 20  # fastest on an H200 (benchmarks/results/2026-11-29-gpu-maxsim)
INNER_TOKENS_CPU = 4096


def _torch():
    return require("torch", "models")


def default_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu"."""
    torch = _torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve_device(torch, device, doc_tokens):
    if device is None:
        if is_torch_tensor(doc_tokens) and doc_tokens.device.type != "cpu":
            return doc_tokens.device
        return torch.device(default_device())
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ConfigError(f"invalid torch device {device!r}: {exc}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} was requested but torch sees no CUDA device")
    return dev


def _check_compute_dtype(compute_dtype) -> str:
    if compute_dtype not in COMPUTE_DTYPES:
        raise ConfigError(
            f"unknown compute_dtype {compute_dtype!r}; choose one of {', '.join(COMPUTE_DTYPES)}"
        )
    return compute_dtype


def _check_segment(segment, dev) -> str:
    if segment not in SEGMENT_METHODS:
        raise ConfigError(
            f"unknown segment method {segment!r}; choose one of {', '.join(SEGMENT_METHODS)}"
        )
    if segment == "auto":
        # CPU: scatter_reduce measured fastest (2-core x86: scatter 4.1, segment_reduce 3.1,
        # numpy reduceat 2.6 M tokens/s). CUDA: segment_reduce, a dedicated kernel without
        # atomics (benchmarks/gpu_maxsim_check.py times all of them on the GPU).
        return "scatter" if dev.type == "cpu" else "segment_reduce"
    if segment == "numpy" and dev.type != "cpu":
        raise ConfigError("segment='numpy' only works with device='cpu'")
    return segment


def _torch_dtype(torch, name: str):
    return {
        "float32": torch.float32,
        "tf32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
    }[name]


@contextlib.contextmanager
def _matmul_precision(torch, compute_dtype: str, dev):
    """TF32 is switched on only around our own matmuls and restored afterwards."""
    if compute_dtype != "tf32" or dev.type != "cuda":
        yield
        return
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _from_numpy(torch, x: np.ndarray):
    """Zero-copy tensor over a (possibly read-only, memory-mapped) array; never written."""
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if x.flags.writeable:
        return torch.from_numpy(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "array is not writable": we only read
        return torch.from_numpy(x)


class _PinnedStager:
    """Two pinned host buffers used in turn to ship host blocks to a CUDA device."""

    def __init__(self, torch, rows: int, dim: int, np_dtype, dev):
        tdtype = _from_numpy(torch, np.empty(0, dtype=np_dtype)).dtype
        self.torch = torch
        self.dev = dev
        self.bufs = [torch.empty((rows, dim), dtype=tdtype, pin_memory=True) for _ in range(2)]
        self.views = [b.numpy() for b in self.bufs]
        self.events = [None, None]
        self.i = 0

    def put(self, x: np.ndarray):
        i = self.i
        self.i ^= 1
        if self.events[i] is not None:
            self.events[i].synchronize()  # the previous copy out of this buffer is done
        n = x.shape[0]
        np.copyto(self.views[i][:n], x)
        out = self.bufs[i][:n].to(self.dev, non_blocking=True)
        ev = self.torch.cuda.Event()
        ev.record()
        self.events[i] = ev
        return out


def _block_rows(s: np.ndarray, n_tokens: int, a: int, b: int) -> tuple[int, int]:
    return int(s[a]), (int(s[b]) if b < s.shape[0] else n_tokens)


def _segment_max(torch, sim, local_starts: np.ndarray, n_rows: int, method: str):
    """Per-document max over rows of ``sim`` (T, nq) -> (n_docs_in_block, nq)."""
    nb = local_starts.shape[0]
    if method == "numpy":  # CPU only: reduceat over a (nq, T) copy is the fastest there
        simT = np.ascontiguousarray(sim.float().numpy().T)
        return torch.from_numpy(np.maximum.reduceat(simT, local_starts, axis=1).T)
    dev = sim.device
    lengths_np = np.diff(np.append(local_starts, n_rows))
    lengths = torch.from_numpy(lengths_np).to(dev, non_blocking=True)
    if method == "segment_reduce":
        return torch.segment_reduce(sim, "max", lengths=lengths, axis=0, unsafe=True)
    if method in ("index_reduce", "scatter"):
        idx = torch.repeat_interleave(
            torch.arange(nb, device=dev), lengths, output_size=n_rows
        )
        if method == "index_reduce":
            out = torch.full((nb, sim.shape[1]), float("-inf"), dtype=sim.dtype, device=dev)
            return out.index_reduce_(0, idx, sim, "amax", include_self=True)
        out = torch.empty((nb, sim.shape[1]), dtype=sim.dtype, device=dev)
        return out.scatter_reduce_(
            0, idx[:, None].expand(-1, sim.shape[1]), sim, "amax", include_self=False
        )
    # "pad": gather every document's rows into (nb, longest, nq), mask the padding, amax
    longest = int(lengths_np.max())
    st = torch.from_numpy(local_starts).to(dev, non_blocking=True)
    ar = torch.arange(longest, device=dev)
    rows = (st[:, None] + ar[None, :]).clamp_(max=n_rows - 1)
    v = sim[rows]  # (nb, longest, nq)
    v.masked_fill_((ar[None, :] >= lengths[:, None])[:, :, None], float("-inf"))
    return v.amax(dim=1)


def _prepare(q, doc_tokens, starts, weights, device, block_tokens, compute_dtype, segment):
    torch = _torch()
    q32, x, s, w = validate(q, doc_tokens, starts, weights)
    dev = _resolve_device(torch, device, x)
    cd = _check_compute_dtype(compute_dtype)
    seg = _check_segment(segment, dev)
    default_bt = DEFAULT_BLOCK_TOKENS_CUDA if dev.type == "cuda" else DEFAULT_BLOCK_TOKENS_CPU
    bt = check_block_tokens(block_tokens, default_bt)
    return torch, q32, x, s, w, dev, cd, seg, bt


def _iter_device(torch, q32, x, s, w, dev, cd, seg, bt):
    """Yields ``(a, b, scores)`` with ``scores`` a float32 tensor on ``dev``."""
    n_tokens = int(x.shape[0])
    blocks = plan_blocks(s, n_tokens, bt)
    if w is not None:
        keep = w != 0
        q32, w = q32[keep], w[keep]
    if q32.shape[0] == 0:  # every weight is 0
        for a, b in blocks:
            yield a, b, torch.zeros(b - a, dtype=torch.float32, device=dev)
        return
    tdtype = _torch_dtype(torch, cd)
    qT = torch.from_numpy(np.ascontiguousarray(q32.T)).to(dev).to(tdtype)  # (d, nq)
    w_dev = None if w is None else torch.from_numpy(np.ascontiguousarray(w)).to(dev)
    host = not is_torch_tensor(x)
    stager = None
    if host and dev.type == "cuda":
        biggest = max(_block_rows(s, n_tokens, a, b)[1] - int(s[a]) for a, b in blocks)
        stager = _PinnedStager(torch, biggest, int(x.shape[1]), x.dtype, dev)
    # on CPU, work through each block in cache-sized steps (measured ~1.5-2x faster)
    inner = min(bt, INNER_TOKENS_CPU) if dev.type == "cpu" else None
    for a, b in blocks:
        t0, t1 = _block_rows(s, n_tokens, a, b)
        if stager is not None:
            xb = stager.put(x[t0:t1])
        elif host:
            xb = _from_numpy(torch, x[t0:t1])
        else:
            xb = x[t0:t1].to(dev, non_blocking=True)
        local = s[a:b] - t0
        with torch.no_grad(), _matmul_precision(torch, cd, dev):
            if inner is None or t1 - t0 <= inner:
                sc = _score(torch, xb, local, t1 - t0, qT, w_dev, tdtype, seg)
            else:
                parts = []
                for sa, sb in plan_blocks(local, t1 - t0, inner):
                    r0, r1 = _block_rows(local, t1 - t0, sa, sb)
                    parts.append(
                        _score(torch, xb[r0:r1], local[sa:sb] - r0, r1 - r0, qT, w_dev, tdtype, seg)
                    )
                sc = torch.cat(parts)
        yield a, b, sc


def _score(torch, xb, local, n_rows, qT, w_dev, tdtype, seg):
    sim = xb.to(tdtype) @ qT  # (T, nq)
    m = _segment_max(torch, sim, local, n_rows, seg).float()
    return m.sum(dim=1) if w_dev is None else m @ w_dev


def iter_maxsim_torch(
    q,
    doc_tokens,
    starts,
    weights=None,
    device=None,
    block_tokens: int | None = None,
    compute_dtype: str = "float32",
    segment: str = "auto",
) -> Iterator[tuple[range, np.ndarray]]:
    """Like ``iter_maxsim_numpy``: yields ``(range(doc_a, doc_b), float32 numpy scores)``.
    Validation happens at call time."""
    args = _prepare(q, doc_tokens, starts, weights, device, block_tokens, compute_dtype, segment)

    def gen():
        for a, b, sc in _iter_device(*args):
            yield range(a, b), sc.cpu().numpy()

    return gen()


def maxsim_torch(
    q,
    doc_tokens,
    starts,
    weights=None,
    device=None,
    block_tokens: int | None = None,
    compute_dtype: str = "float32",
    segment: str = "auto",
) -> np.ndarray:
    """MaxSim score of every document as float32 numpy (n_docs,).

    ``doc_tokens`` may be a numpy array / memmap (shipped to ``device`` block by block) or a
    torch tensor (used where it lives, e.g. already on the GPU). ``device`` defaults to the
    tensor's device, else "cuda" when available, else "cpu". ``block_tokens`` defaults to
    1048576 on CUDA and 65536 on CPU. ``compute_dtype`` is the matmul dtype ("float32",
    "tf32", "bfloat16", "float16"); maxima and the weighted sum are always float32."""
    torch, q32, x, s, w, dev, cd, seg, bt = _prepare(
        q, doc_tokens, starts, weights, device, block_tokens, compute_dtype, segment
    )
    out = torch.empty(s.shape[0], dtype=torch.float32, device=dev)
    for a, b, sc in _iter_device(torch, q32, x, s, w, dev, cd, seg, bt):
        out[a:b] = sc
    return out.cpu().numpy()


def maxsim_explain_torch(
    q, doc_tokens_of_one_doc, weights=None, device=None, compute_dtype: str = "float32"
) -> Explanation:
    """Per-query-token breakdown of one document's score, like ``maxsim_explain_numpy``."""
    torch = _torch()
    q32 = check_query(q)
    x = check_doc_tokens(doc_tokens_of_one_doc, q32.shape[1])
    w = check_weights(weights, q32.shape[0])
    dev = _resolve_device(torch, device, x)
    cd = _check_compute_dtype(compute_dtype)
    tdtype = _torch_dtype(torch, cd)
    xt = x if is_torch_tensor(x) else _from_numpy(torch, np.asarray(x))
    with torch.no_grad(), _matmul_precision(torch, cd, dev):
        qd = torch.from_numpy(q32).to(dev).to(tdtype)
        sim = (qd @ xt.to(dev).to(tdtype).T).float()  # (nq, T)
        smax, arg = sim.max(dim=1)
    smax = smax.cpu().numpy().astype(np.float32)
    arg = arg.cpu().numpy().astype(np.int64)
    contrib = smax.copy() if w is None else (w * smax).astype(np.float32)
    return Explanation(contrib, arg, smax)
