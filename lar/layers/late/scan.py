"""Exact MaxSim over many units' sidecars, block by block, abortable between blocks.

Units come in the caller's priority order; their token matrices are gathered into blocks of about
``block_tokens`` rows (each chunk is one "document" of the kernel), scored exactly with
``lar.maxsim`` (numpy, or torch on CUDA), and the best ``k`` chunks are kept. ``should_stop`` is
checked before each block: the scan then returns what it scored, and which units that was.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from lar.core.background import ScoreMoments
from lar.core.errors import ConfigError
from lar.maxsim import maxsim
from lar.layers.kits.vectors.arena import adjacent_view
from lar.encoders.encoding import UnitEncoding

__all__ = ["ScanResult", "scan_units", "DEFAULT_BLOCK_TOKENS"]

DEFAULT_BLOCK_TOKENS = 1 << 16


@dataclass
class ScanResult:
    top: list[tuple[float, str, int]] = field(default_factory=list)  # (score, hash, chunk), best first
    scanned: list[str] = field(default_factory=list)
    tokens: int = 0
    blocks: int = 0
    aborted: bool = False
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (hash, why)
    moments: ScoreMoments = field(default_factory=ScoreMoments)  # every chunk score computed
    gathered: int = 0  # tokens copied into a block (0 when every block was a view of the arena)


def _adjacent_view(encs: list[UnitEncoding]) -> np.ndarray | None:
    """When the units' token matrices lie back to back in one buffer (the layer's in-memory
    arena keeps units in scan order), the block is a view of that buffer: no copy."""
    return adjacent_view([e.tokens for e in encs])


def _continues(prev: UnitEncoding, enc: UnitEncoding) -> bool:
    """Whether ``enc``'s tokens lie right after ``prev``'s in the same buffer (float tokens)."""
    a, b = prev.tokens, enc.tokens
    return (prev.token_scales is None and enc.token_scales is None and a.base is not None
            and b.base is a.base and a.flags.c_contiguous and b.flags.c_contiguous
            and b.ctypes.data == a.ctypes.data + a.shape[0] * a.strides[0])


def _block_matrix(encs: list[UnitEncoding]) -> tuple[np.ndarray, bool]:
    """The block's token rows, and whether they had to be copied together (a gather)."""
    if all(e.token_scales is None for e in encs):
        if len(encs) == 1:
            return encs[0].tokens, False
        view = _adjacent_view(encs)
        if view is not None:
            return view, False
        return np.concatenate([e.tokens for e in encs], axis=0), True
    return np.concatenate([e.tokens_f32() for e in encs], axis=0), True


def scan_units(
    q: np.ndarray,
    weights: np.ndarray,
    hashes: Iterable[str],
    load: Callable[[str], UnitEncoding | None],
    k: int,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    backend: str = "auto",
    device=None,
    min_score: float | None = None,
) -> ScanResult:
    """Score every chunk of the units ``hashes`` (in order); keep the ``k`` best.

    ``load(h)`` returns the unit's encoding or None (skipped: absent, corrupt, or empty); it may
    raise ``LookupError``/``OSError`` with the reason, recorded in ``unreadable``."""
    res = ScanResult()
    heap: list[tuple[float, str, int]] = []  # min-heap of the k best (score, hash, chunk)
    pending: list[tuple[str, UnitEncoding]] = []
    pending_tokens = 0
    run = True  # the pending units so far lie back to back in one buffer

    def flush() -> None:
        nonlocal pending, pending_tokens
        if not pending:
            return
        encs = [e for _, e in pending]
        x, copied = _block_matrix(encs)
        if copied:
            res.gathered += int(x.shape[0])
        offsets = np.cumsum([0] + [e.n_tokens for e in encs[:-1]])
        starts = np.concatenate([e.chunk_starts.astype(np.int64) + o for e, o in zip(encs, offsets)])
        try:
            scores = maxsim(q, x, starts, weights, backend=backend, device=device)
        except (MemoryError, RuntimeError) as exc:  # torch reports CUDA OOM as a RuntimeError
            if isinstance(exc, RuntimeError) and "out of memory" not in str(exc).lower():
                raise
            raise ConfigError(
                f"scoring a block of {x.shape[0]} tokens x {x.shape[1]} dims ran out of memory "
                f"on {device or backend}: lower the layer's block_tokens (now {block_tokens}) "
                "or free memory") from None
        res.moments.add(scores)
        counts = [e.n_chunks for e in encs]
        owner = np.repeat(np.arange(len(encs)), counts)
        chunk_of = np.arange(scores.shape[0]) - np.repeat(np.cumsum([0] + counts[:-1]), counts)
        cand = np.arange(scores.shape[0])
        if min_score is not None:
            cand = cand[scores >= min_score]
        if cand.shape[0] > k:
            cand = cand[np.argpartition(-scores[cand], k - 1)[:k]]
        for i in cand.tolist():
            item = (float(scores[i]), pending[owner[i]][0], int(chunk_of[i]))
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        res.scanned.extend(h for h, _ in pending)
        res.tokens += int(x.shape[0])
        res.blocks += 1
        pending, pending_tokens = [], 0

    for h in hashes:
        if pending_tokens == 0 and should_stop():
            res.aborted = True
            break
        try:
            enc = load(h)
        except (LookupError, OSError) as exc:
            res.unreadable.append((h, str(exc)))
            continue
        if enc is None or enc.n_tokens == 0:
            res.scanned.append(h)
            continue
        if pending and run and not _continues(pending[-1][1], enc):
            # the arena's run ends here (a segment boundary, or a unit from elsewhere): score the
            # run as a view now rather than copy it into a block with what follows
            if pending_tokens >= block_tokens // 16:
                if should_stop():
                    pending, pending_tokens = [], 0
                    res.aborted = True
                    break
                flush()
            run = False
        if not pending:
            run = True
        pending.append((h, enc))
        pending_tokens += enc.n_tokens
        if pending_tokens >= block_tokens:
            if should_stop():
                pending, pending_tokens = [], 0
                res.aborted = True
                break
            flush()
    else:
        if pending and should_stop():
            res.aborted = True
        else:
            flush()
    res.top = sorted(heap, key=lambda t: (-t[0], t[1], t[2]))
    return res
