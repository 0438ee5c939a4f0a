"""``TokenArena``: an in-memory copy of vector matrices, back to back (the late layer's token
matrices, the dense shards' chunk vectors).

Units read from their sidecars are appended to large float16 buffers in the order they were first
scanned; a unit's ``tokens`` becomes a view into the buffer. Scans visit units in (mostly) the
same order each time, so a block of consecutive units is one view of a buffer and the kernel reads
it without the gather copy (:func:`adjacent_view`). Buffers grow by doubling up to
``MAX_SEGMENT_ROWS`` rows; rows of forgotten units are not reused (the owner clears the arena when
too much of it is dead).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

__all__ = ["TokenArena", "MAX_SEGMENT_ROWS", "in_memory", "adjacent_view"]

MAX_SEGMENT_ROWS = 1 << 20
MIN_SEGMENT_ROWS = 1 << 14


class TokenArena:
    def __init__(self) -> None:
        self.segments: list[np.ndarray] = []
        self._used = 0  # rows used in the last segment
        self.rows = 0
        self.dead_rows = 0

    def add(self, tokens: np.ndarray) -> np.ndarray:
        """Copy ``tokens`` (n, d) into the arena and return the view holding them."""
        n = int(tokens.shape[0])
        seg = self.segments[-1] if self.segments else None
        if (seg is None or seg.shape[1] != tokens.shape[1] or seg.dtype != tokens.dtype
                or self._used + n > seg.shape[0]):
            cap = MIN_SEGMENT_ROWS if seg is None else min(2 * seg.shape[0], MAX_SEGMENT_ROWS)
            seg = np.empty((max(cap, n), tokens.shape[1]), dtype=tokens.dtype)
            self.segments.append(seg)
            self._used = 0
        view = seg[self._used:self._used + n]
        view[...] = tokens
        self._used += n
        self.rows += n
        return view

    def forget(self, n_rows: int) -> None:
        self.dead_rows += n_rows

    @property
    def mostly_dead(self) -> bool:
        return self.rows > 0 and self.dead_rows > self.rows // 2

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.segments)


def in_memory(enc, arena: TokenArena):
    """A copy of ``enc`` in RAM (a sidecar's memory maps closed); float tokens go to ``arena``,
    back to back with the units copied before them."""
    if enc.token_scales is None:
        tokens, scales = arena.add(enc.tokens), None
    else:
        tokens, scales = np.array(enc.tokens), np.array(enc.token_scales)
    return replace(enc, tokens=tokens, token_spans=np.array(enc.token_spans),
                   chunk_starts=np.array(enc.chunk_starts), chunk_spans=np.array(enc.chunk_spans),
                   pooled=None, token_scales=scales)


def adjacent_view(arrays: list[np.ndarray]) -> np.ndarray | None:
    """When the 2-D ``arrays`` lie back to back in one buffer (as units copied into an arena in
    scan order do), the one view of that buffer holding them all (no copy); else None."""
    first = arrays[0]
    base = first.base
    if base is None or not isinstance(base, np.ndarray) or base.ndim != 2 or not first.flags.c_contiguous:
        return None
    row = first.strides[0]
    ptr = first.ctypes.data
    for t in arrays:
        if t.base is not base or t.ctypes.data != ptr:
            return None
        ptr += t.shape[0] * row
    r0 = (first.ctypes.data - base.ctypes.data) // row
    return base[r0:r0 + (ptr - first.ctypes.data) // row]
