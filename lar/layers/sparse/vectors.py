"""Sparse term vectors: one chunk's (or query's) weights over a model's vocabulary.

A ``SparseVec`` holds the non-zero entries only: vocabulary ids (int32, ascending) and their
weights (float32, > 0). ``top_terms`` prunes a dense vocabulary row to its largest entries (the
per-chunk pruning of learned sparse retrieval); ``dot`` is the exact score of a query against a
document; ``pack`` / ``unpack`` store many vectors in three flat arrays (CSR rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["SparseVec", "dot", "pack", "top_terms", "unpack"]


@dataclass(frozen=True, eq=False)
class SparseVec:
    """Non-zero entries of one vector: ``ids`` ascending, no repeats, ``weights`` positive."""

    ids: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, dtype=np.int32).reshape(-1)
        w = np.asarray(self.weights, dtype=np.float32).reshape(-1)
        if ids.shape != w.shape:
            raise ValueError(f"ids and weights differ in length ({ids.size} vs {w.size})")
        if ids.size > 1 and not (np.diff(ids) > 0).all():
            order = np.argsort(ids, kind="stable")
            ids, w = ids[order], w[order]
            if not (np.diff(ids) > 0).all():
                raise ValueError("a sparse vector lists a term id twice")
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "weights", w)

    @property
    def nnz(self) -> int:
        return int(self.ids.size)

    def get(self, term_id: int) -> float:
        """The weight of ``term_id`` (0.0 when absent)."""
        i = int(np.searchsorted(self.ids, term_id))
        return float(self.weights[i]) if i < self.ids.size and self.ids[i] == term_id else 0.0

    def as_dict(self) -> dict[int, float]:
        return {int(i): float(w) for i, w in zip(self.ids, self.weights)}


def top_terms(row: np.ndarray, k: int | None) -> SparseVec:
    """The positive entries of a dense vocabulary row, at most ``k`` of them (the largest; ties
    broken by the lower id, so pruning is deterministic). ``k=None`` keeps every positive one."""
    row = np.asarray(row, dtype=np.float32).reshape(-1)
    nz = np.flatnonzero(row > 0)
    if k is not None and nz.size > k:
        # stable sort on -weight over ascending ids: equal weights keep the lower id first
        order = np.argsort(-row[nz], kind="stable")[:k]
        nz = np.sort(nz[order])
    return SparseVec(nz.astype(np.int32), row[nz])


def dot(q: SparseVec, d: SparseVec) -> float:
    """The exact inner product of two sparse vectors."""
    common, qi, di = np.intersect1d(q.ids, d.ids, assume_unique=True, return_indices=True)
    if not common.size:
        return 0.0
    return float(np.dot(q.weights[qi].astype(np.float64), d.weights[di].astype(np.float64)))


def pack(vecs: Sequence[SparseVec]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr int64 (n + 1), ids int32, weights float32)``: the vectors as CSR rows."""
    indptr = np.zeros(len(vecs) + 1, dtype=np.int64)
    if vecs:
        indptr[1:] = np.cumsum([v.nnz for v in vecs])
        ids = np.concatenate([v.ids for v in vecs]).astype(np.int32, copy=False)
        w = np.concatenate([v.weights for v in vecs]).astype(np.float32, copy=False)
    else:
        ids, w = np.zeros(0, np.int32), np.zeros(0, np.float32)
    return indptr, ids, w


def unpack(indptr: np.ndarray, ids: np.ndarray, weights: np.ndarray) -> list[SparseVec]:
    """The vectors of ``pack``'s arrays."""
    return [SparseVec(ids[a:b], weights[a:b]) for a, b in zip(indptr[:-1], indptr[1:])]
