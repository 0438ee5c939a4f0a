"""The value types of the chunk vector store (``lar.layers.kits.vectors.chunkstore``): a unit's
rows, the row table in array form, what a read returns, and the float16 -> float32 block cast
that every read and scan goes through."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from lar.core.background import ScoreBackground
from lar.maxsim.common import f16_to_f32

SUB_ROWS = 512  # rows converted at a time (stays in cache)
DTYPES = {"float16": ("<f2", "f16"), "float32": ("<f4", "f32")}
TRUNCATED = "pack truncated: rows [{a}, {b}) lie past the end of the {n}-row pack"
MISMATCH = "checksum mismatch: the pack bytes changed after they were written"


@dataclass(frozen=True)
class UnitRows:
    """Where one unit's chunk vectors lie: pack rows ``[first, first + n)``."""

    first: int
    n: int
    spans: np.ndarray  # (n, 2) int64
    checksum: str


@dataclass(frozen=True, eq=False)
class RowTable:
    """The row table as arrays (rebuilt after writes) plus per-unit bad/verified flags (the
    two flag arrays are the only mutable parts: reads mark what they checked)."""

    gen: int
    hashes: list[str]
    index: dict[str, int]
    first: np.ndarray
    n: np.ndarray
    spans: list[np.ndarray]
    checksum: list[str]
    bad: np.ndarray
    verified: np.ndarray

    def rows_of(self, sel: np.ndarray) -> np.ndarray:
        """Pack row numbers of the units ``sel``, unit after unit."""
        counts = self.n[sel]
        total = int(counts.sum())
        shift = np.repeat(self.first[sel] - (np.cumsum(counts) - counts), counts)
        return shift + np.arange(total, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class ChunkMatrix:
    """Selected chunk vectors: row ``i`` is chunk ``spans[i]`` of ``owners[unit_index[i]]``.
    ``vectors`` is float32, or float16 (a memmap slice when the rows are contiguous)."""

    vectors: np.ndarray  # (N, d)
    owners: list[str]
    spans: np.ndarray  # (N, 2) int64
    unit_index: np.ndarray  # (N,) int32 into owners

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def row(self, i: int) -> tuple[str, int, int]:
        """(hash, start, end) of row ``i``."""
        return self.owners[int(self.unit_index[i])], int(self.spans[i, 0]), int(self.spans[i, 1])


@dataclass(frozen=True)
class ChunkHits:
    """Top-k ``(hash, start, end, score)``, best first; ``fraction`` of the selected rows was
    scored (below 1 when ``should_stop`` ended the scan early)."""

    hits: list[tuple[str, int, int, float]]
    fraction: float
    n_scored: int
    n_total: int
    # mean and spread of every score the scan computed (lar.core.background); None when too few
    background: ScoreBackground | None = None
    # the device arena's part in the scan ({"hit_rate", "copied_rows", "host_rows"}), or None
    resident: dict | None = None

    def __iter__(self) -> Iterator[tuple[str, int, int, float]]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def checksum(raw: np.ndarray) -> str:
    """blake2b-128 of the rows' bytes."""
    return hashlib.blake2b(np.ascontiguousarray(raw), digest_size=16).hexdigest()


def iter_f32(pack: np.ndarray, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(offset, float32 block)`` covering ``pack[rows]`` in order, ``SUB_ROWS`` rows at
    a time through reused buffers: use each block before asking for the next."""
    d = pack.shape[1]
    if pack.dtype.itemsize == 4:
        buf = np.empty((SUB_ROWS, d), dtype=np.float32)
        for o in range(0, len(rows), SUB_ROWS):
            idx = rows[o:o + SUB_ROWS]
            yield o, np.take(pack, idx, axis=0, out=buf[:len(idx)])
        return
    h16 = np.empty((SUB_ROWS, d), dtype=np.float16)
    out = np.empty((SUB_ROWS, d), dtype=np.float32)
    for o in range(0, len(rows), SUB_ROWS):
        idx = rows[o:o + SUB_ROWS]
        n = len(idx)
        np.take(pack, idx, axis=0, out=h16[:n])
        yield o, f16_to_f32(h16[:n], out[:n])  # the MaxSim kernels' exact vectorised cast
