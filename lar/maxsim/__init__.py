"""Exact late-interaction (ColBERT-style MaxSim) scoring kernels, without any index.

A query is ``q`` (nq, d); a *block* is many documents' token vectors stored back to back,
``doc_tokens`` (N, d) (usually a float16 memory map), with ``starts`` (n_docs,) the row of
each document's first token (strictly increasing, ``starts[0] == 0``, no empty document).

    score(doc j) = sum_i weights[i] * max_{t in doc j} q[i] . doc_tokens[t]

``weights`` (nq,) defaults to all ones; 0 removes a query token, > 1 boosts it.

Backends: ``numpy`` (always available) and ``torch`` (optional extra ``models``; CUDA
when available). This package imports only numpy at module level.
"""
from __future__ import annotations

import importlib.util

import numpy as np

from lar.core.errors import ConfigError
from lar.maxsim.common import check_doc_tokens, check_starts, is_torch_tensor
from lar.maxsim.numpy_backend import (
    DEFAULT_BLOCK_TOKENS,
    Explanation,
    iter_maxsim_numpy,
    maxsim_explain_numpy,
    maxsim_numpy,
)

__all__ = [
    "BACKENDS",
    "Explanation",
    "explain",
    "iter_maxsim",
    "maxsim",
    "resolve_backend",
    "maxsim_numpy",
    "iter_maxsim_numpy",
    "maxsim_explain_numpy",
]

BACKENDS = ("auto", "numpy", "torch")


def _torch_cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    try:
        import torch
    except ImportError:  # pragma: no cover - broken install
        return False
    return bool(torch.cuda.is_available())


def resolve_backend(backend: str = "auto", device=None, doc_tokens=None) -> str:
    """Return "numpy" or "torch" for the requested backend/device.

    "auto" picks torch when ``device`` is given and is not "cpu", when ``doc_tokens`` is a
    torch tensor, or when torch is importable and sees a CUDA device; otherwise numpy."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown maxsim backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "numpy":
        if device is not None and str(device) != "cpu":
            raise ConfigError(f"the numpy backend runs on the CPU only; got device={device!r}")
        return "numpy"
    if backend == "torch":
        return "torch"
    if device is not None:
        return "numpy" if str(device) == "cpu" and not is_torch_tensor(doc_tokens) else "torch"
    if doc_tokens is not None and is_torch_tensor(doc_tokens):
        return "torch"
    return "torch" if _torch_cuda_available() else "numpy"


def _numpy_only_options(backend, compute_dtype, segment):
    if compute_dtype != "float32":
        raise ConfigError(f"compute_dtype={compute_dtype!r} needs backend='torch' (numpy computes in float32)")
    if segment != "auto":
        raise ConfigError(f"segment={segment!r} needs backend='torch'")


def maxsim(
    q,
    doc_tokens,
    starts,
    weights=None,
    backend: str = "auto",
    device=None,
    block_tokens: int | None = None,
    compute_dtype: str = "float32",
    segment: str = "auto",
) -> np.ndarray:
    """MaxSim score of every document in the block: float32 numpy array (n_docs,).

    Raises ``ConfigError`` on invalid input (dimension mismatch, bad ``starts``, wrong
    ``weights`` shape, empty query or block, unknown backend/device/dtype) and
    ``MissingExtraError`` when backend="torch" is asked for without torch installed."""
    which = resolve_backend(backend, device, doc_tokens)
    if which == "numpy":
        _numpy_only_options(backend, compute_dtype, segment)
        return maxsim_numpy(q, doc_tokens, starts, weights, DEFAULT_BLOCK_TOKENS if block_tokens is None else block_tokens)
    from lar.maxsim.torch_backend import maxsim_torch

    return maxsim_torch(
        q, doc_tokens, starts, weights, device=device, block_tokens=block_tokens,
        compute_dtype=compute_dtype, segment=segment,
    )


def iter_maxsim(
    q,
    doc_tokens,
    starts,
    weights=None,
    backend: str = "auto",
    device=None,
    block_tokens: int | None = None,
    compute_dtype: str = "float32",
    segment: str = "auto",
):
    """Block-wise form of ``maxsim``: an iterator of ``(range(doc_a, doc_b), scores)``;
    stop iterating to abort between blocks. Input is validated at call time."""
    which = resolve_backend(backend, device, doc_tokens)
    if which == "numpy":
        _numpy_only_options(backend, compute_dtype, segment)
        return iter_maxsim_numpy(q, doc_tokens, starts, weights, DEFAULT_BLOCK_TOKENS if block_tokens is None else block_tokens)
    from lar.maxsim.torch_backend import iter_maxsim_torch

    return iter_maxsim_torch(
        q, doc_tokens, starts, weights, device=device, block_tokens=block_tokens,
        compute_dtype=compute_dtype, segment=segment,
    )


def explain(
    q,
    doc_tokens,
    weights=None,
    *,
    starts=None,
    doc: int | None = None,
    backend: str = "auto",
    device=None,
) -> Explanation:
    """Per-query-token breakdown of one document's score.

    Either ``doc_tokens`` holds exactly one document's tokens, or pass the whole block with
    ``starts`` and the document index ``doc``. Returns ``Explanation(contrib, argmax,
    sim_max)`` (a tuple): ``contrib[i] = weights[i] * sim_max[i]`` sums to the document's
    score; ``argmax[i]`` is the matched token's row *within the document*.
    "auto" uses torch only when ``doc_tokens`` is a torch tensor or a non-CPU device is named
    (one document is too small to be worth a trip to the GPU)."""
    if (starts is None) != (doc is None):
        raise ConfigError("explain(): pass both starts= and doc= to pick a document, or neither")
    if starts is not None:
        x = check_doc_tokens(doc_tokens)
        s = check_starts(starts, int(x.shape[0]))
        if isinstance(doc, bool) or not isinstance(doc, (int, np.integer)):
            raise ConfigError(f"doc must be an integer document index, got {doc!r}")
        if not -s.shape[0] <= doc < s.shape[0]:
            raise ConfigError(f"doc={doc} is out of range for a block of {s.shape[0]} documents")
        doc = int(doc) % s.shape[0]
        t0 = int(s[doc])
        t1 = int(s[doc + 1]) if doc + 1 < s.shape[0] else int(x.shape[0])
        doc_tokens = x[t0:t1]
    if backend == "auto":
        which = "torch" if (is_torch_tensor(doc_tokens) or (device is not None and str(device) != "cpu")) else "numpy"
    else:
        which = resolve_backend(backend, device, doc_tokens)
    if which == "numpy":
        return maxsim_explain_numpy(q, doc_tokens, weights)
    from lar.maxsim.torch_backend import maxsim_explain_torch

    return maxsim_explain_torch(q, doc_tokens, weights, device=device)
