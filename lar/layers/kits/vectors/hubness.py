"""Local hubness of vector-space hits: how close a hit's vector sits to everything else.

In high-dimensional embedding spaces some vectors are *hubs*: near many queries whatever the
query says (generic boilerplate, short chunks, licence headers). A hub's cosine is high for the
wrong reason. Its hubness ``h(d)`` is the mean cosine of ``d`` to its ``k`` nearest neighbours
in a reference sample of the index's own chunk vectors (the CSLS / local-scaling correction of
cross-lingual retrieval); ``cosine - weight * h(d)`` discounts units that are near everything.

The reference is a seeded sample of at most ``size`` chunk vectors of the searched units, so
the cost per query is ``hits x size`` dot products, whatever the index size; it is rebuilt
when the set of searched units changes. A hit's own vector (or an exact duplicate: cosine
above :data:`SELF_COSINE`) is not its own neighbour.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from lar.core.errors import ConfigError

SELF_COSINE = 0.9999
DEFAULT_K = 5
DEFAULT_SIZE = 4096


@dataclass(frozen=True)
class Reference:
    """A sample of chunk vectors (rows L2-normalised) of one set of units."""

    vectors: np.ndarray
    n_units: int

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2:
            raise ConfigError(f"a hubness reference is a 2-d matrix, got shape {self.vectors.shape}")


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def hubness(vectors: np.ndarray, reference: Reference, k: int = DEFAULT_K) -> np.ndarray:
    """Mean cosine of each row of ``vectors`` to its ``k`` nearest reference rows (itself and
    exact duplicates excluded); 0 where the reference is empty."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"hubness k must be an integer >= 1, got {k!r}")
    v = _unit_rows(np.asarray(vectors).reshape(len(vectors), -1))
    ref = reference.vectors
    if not len(v) or not len(ref):
        return np.zeros(len(v), dtype=np.float64)
    if v.shape[1] != ref.shape[1]:
        raise ConfigError(f"hubness: vectors have {v.shape[1]} dims, the reference {ref.shape[1]}")
    sims = v @ ref.T
    sims[sims >= SELF_COSINE] = -np.inf
    kk = min(k, ref.shape[0])
    top = -np.partition(-sims, kk - 1, axis=1)[:, :kk]
    top = np.where(np.isfinite(top), top, np.nan)
    with np.errstate(invalid="ignore"):
        out = np.nanmean(top, axis=1)
    return np.nan_to_num(out.astype(np.float64), nan=0.0)


class ReferenceCache:
    """One reference per set of searched units, built from a chunk store on first use."""

    def __init__(self, size: int = DEFAULT_SIZE, seed: int = 0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"hubness reference size must be an integer >= 1, got {size!r}")
        self.size, self.seed = size, seed
        self._key: int | None = None
        self._ref: Reference | None = None
        self._lock = threading.Lock()

    def size_of_last(self) -> int:
        """Rows in the reference built last (0 before the first)."""
        ref = self._ref
        return 0 if ref is None else int(len(ref.vectors))

    def get(self, store, hashes: Iterable[str]) -> Reference:
        units = frozenset(hashes)
        key = hash(units)
        with self._lock:
            if self._ref is not None and self._key == key:
                return self._ref
        order = sorted(units)
        random.Random(self.seed).shuffle(order)
        rows: list[np.ndarray] = []
        n = 0
        step = max(1, min(len(order), self.size))
        pos = 0
        while n < self.size and pos < len(order):  # whole units until the sample is full
            m = store.matrix(order[pos:pos + step])
            pos += step
            if len(m.vectors):
                rows.append(np.asarray(m.vectors[: self.size - n], dtype=np.float32))
                n += len(rows[-1])
        vecs = _unit_rows(np.concatenate(rows)) if rows else np.zeros((0, store.dim), np.float32)
        ref = Reference(vecs, len(units))
        with self._lock:
            self._key, self._ref = key, ref
        return ref


def result_hubness(store, ref_cache: ReferenceCache, results, ok, dim: int, k: int) -> np.ndarray:
    """Each result chunk ``(hash, start, end, score)``'s hubness against a sample of the
    searched units ``ok``' chunks in ``store`` (0 for a chunk no longer stored)."""
    if not results:
        return np.zeros(0)
    ref = ref_cache.get(store, ok)
    m = store.matrix(sorted({h for h, *_ in results}))
    row = {(m.owners[int(u)], int(a), int(b)): i
           for i, (u, (a, b)) in enumerate(zip(m.unit_index, m.spans.tolist()))}
    idx = [row.get((h, int(s), int(e)), -1) for h, s, e, _ in results]
    vecs = np.zeros((len(results), dim), dtype=np.float32)
    have = [i for i, j in enumerate(idx) if j >= 0]
    if have:
        vecs[have] = np.asarray(m.vectors, dtype=np.float32)[[idx[i] for i in have]]
    out = hubness(vecs, ref, k)
    out[[i for i, j in enumerate(idx) if j < 0]] = 0.0
    return out


__all__ = ["DEFAULT_K", "DEFAULT_SIZE", "Reference", "ReferenceCache", "SELF_COSINE", "hubness",
           "result_hubness"]
