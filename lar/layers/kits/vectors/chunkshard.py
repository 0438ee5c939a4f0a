"""What a shard of a chunk-vector layer (``dense``, ``static``) holds and how it scans it.

A :class:`StoreSource` is handed to each shard actor (``lar.distributed.ray_scan``); it pickles
as its settings only (the vector store's folder, dim and dtype), so a restarted actor starts
empty and reloads its units from the store. It reads units in bulk (one
``ChunkVectorStore.matrix`` call per batch, every unit's checksum verified as in the driver) and
copies their float16 rows back to back into its own :class:`~lar.layers.kits.vectors.arena.TokenArena`,
so a block of units loaded together is one view. The folder must be readable from every node
(the same path; on one machine it simply is).

:func:`scan_chunk_units` is the shard's scan: its units in the order given (the layer's: pack
order, as the single-process scan), blocks of about ``block_rows`` rows, the same float16 to
float32 cast and cosine product as ``ChunkVectorStore.search``, ``should_stop`` asked between
blocks; :func:`merge_chunk_results` merges the shards' results exactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from lar.core.background import ScoreMoments
from lar.distributed.shards import merge_top
from lar.layers.kits.vectors.arena import TokenArena, adjacent_view
from lar.layers.kits.vectors.chunkrows import iter_f32

__all__ = ["StoreSource", "ChunkScanResult", "scan_chunk_units", "merge_chunk_results",
           "BLOCK_ROWS", "LOAD_UNITS"]

BLOCK_ROWS = 65536  # rows scored between two should_stop checks (as ChunkVectorStore.search)
LOAD_UNITS = 512  # units read from the store per call when they are not in memory yet


class StoreSource:
    """A shard's chunk vectors, read from the ``ChunkVectorStore`` at ``folder``."""

    def __init__(self, folder: str | Path, dim: int, dtype: str = "float16"):
        self.folder, self.dim, self.dtype = str(folder), int(dim), dtype
        self._store = None
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # hash -> (spans, rows)
        self._arena = TokenArena()

    def __getstate__(self) -> dict:
        return {"folder": self.folder, "dim": self.dim, "dtype": self.dtype}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["folder"], state["dim"], state["dtype"])

    def store(self):
        if self._store is None:
            from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

            self._store = ChunkVectorStore(Path(self.folder), self.dim, self.dtype)
        return self._store

    def load(self, h: str):
        """``((spans, rows), read_now)``; ``LookupError`` when the unit is not readable."""
        got, fresh, bad = self.load_many([h])
        if h not in got:
            raise LookupError(bad[0][1] if bad else f"unit {h[:12]} is not in the vector store")
        return got[h], bool(fresh)

    def load_many(self, hashes: Sequence[str]):
        """``({hash: (spans, rows)}, units read now, [(hash, why)])`` for ``hashes``: the units in
        memory, the others read from the store in one call. A unit the store does not hold (or
        found corrupt: it drops it, and the layer rebuilds it) is listed with the reason."""
        missing = [h for h in dict.fromkeys(hashes) if h not in self._cache]
        fresh, bad = 0, []
        if missing:
            store = self.store()
            m = store.matrix(missing, float32=False)
            counts = np.bincount(m.unit_index, minlength=len(m.owners)) if m.owners else []
            a = 0
            for h, n in zip(m.owners, np.asarray(counts).tolist()):
                rows = self._arena.add(np.asarray(m.vectors[a:a + n]))
                self._cache[h] = (np.array(m.spans[a:a + n]), rows)
                a += n
            fresh = len(m.owners)
            empty = np.zeros((0, self.dim), dtype=np.float16)
            why = dict(store.problems())
            for h in missing:
                if h in self._cache:
                    continue
                if h not in why and store.has(h):  # a unit with no chunks
                    self._cache[h] = (np.zeros((0, 2), dtype=np.int64), empty)
                else:
                    bad.append((h, why.get(h, f"unit {h[:12]} is not in the vector store")))
        return {h: self._cache[h] for h in hashes if h in self._cache}, fresh, bad

    def retain(self, hashes: Iterable[str]) -> None:
        """Forget the units not in ``hashes`` (no longer live, or no longer this shard's)."""
        keep = set(hashes)
        for h in [h for h in self._cache if h not in keep]:
            self._arena.forget(self._cache.pop(h)[1].shape[0])
        if self._arena.mostly_dead:
            self._cache.clear()
            self._arena = TokenArena()

    def __len__(self) -> int:
        return len(self._cache)


@dataclass
class ChunkScanResult:
    """One shard's scan (or the merge of several): top ``(score, hash, start, end)``, best first."""

    top: list[tuple[float, str, int, int]] = field(default_factory=list)
    scanned: list[str] = field(default_factory=list)
    rows: int = 0
    blocks: int = 0
    aborted: bool = False
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (hash, why)
    moments: ScoreMoments = field(default_factory=ScoreMoments)  # every chunk score computed


def scan_chunk_units(q: np.ndarray, weights: Any, hashes: Sequence[str], load: Any, k: int, *,
                     should_stop: Callable[[], bool] = lambda: False,
                     block_rows: int = BLOCK_ROWS) -> ChunkScanResult:
    """Cosine of the unit query ``q`` with every chunk of ``hashes`` (in order), the ``k`` best
    kept; ``load.many(hashes)`` gives ``({hash: (spans, rows)}, [(hash, why)])`` (a
    ``lar.distributed.ray_scan.ShardLoader``); ``weights`` is unused (the late layer's slot).
    Like ``ChunkVectorStore.search``, the first block is always scored and ``should_stop`` is
    asked before each further one."""
    res = ChunkScanResult()
    q = np.ascontiguousarray(q, dtype=np.float32).reshape(-1)
    best_s = np.zeros(0, dtype=np.float32)
    best_i = best_r = np.zeros(0, dtype=np.int64)  # index into `units`, row within the unit
    units: list[tuple[str, np.ndarray]] = []  # (hash, spans) of the units scored
    pending: list[tuple[str, np.ndarray, np.ndarray]] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal best_s, best_i, best_r, pending, pending_rows
        mats = [r for _, _, r in pending]
        x = (mats[0] if len(mats) == 1 else adjacent_view(mats)) if mats else None
        if x is None:
            x = np.concatenate(mats, axis=0)
        scores = np.empty(x.shape[0], dtype=np.float32)
        for o, xb in iter_f32(x, np.arange(x.shape[0])):
            np.matmul(xb, q, out=scores[o:o + xb.shape[0]])
        res.moments.add(scores)
        counts = np.array([r.shape[0] for r in mats], dtype=np.int64)
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        ends = np.cumsum(counts)
        owner = np.searchsorted(ends, top, side="right")
        best_s = np.concatenate([best_s, scores[top]])
        best_i = np.concatenate([best_i, owner + len(units)])
        best_r = np.concatenate([best_r, top - (ends[owner] - counts[owner])])
        if len(best_s) > k:
            keep = np.argpartition(-best_s, k - 1)[:k]
            best_s, best_i, best_r = best_s[keep], best_i[keep], best_r[keep]
        units.extend((h, s) for h, s, _ in pending)
        res.scanned.extend(h for h, _, _ in pending)
        res.rows += int(x.shape[0])
        res.blocks += 1
        pending, pending_rows = [], 0

    hashes = list(hashes)
    pos, stopped = 0, False
    while pos < len(hashes) and not stopped:
        if res.blocks and not pending and should_stop():
            stopped = True
            break
        batch = hashes[pos:pos + LOAD_UNITS]
        pos += len(batch)
        got, bad = load.many(batch)
        res.unreadable.extend(bad)
        for h in batch:
            unit = got.get(h)
            if unit is None:
                continue
            if unit[1].shape[0] == 0:  # no chunks: nothing to score, covered
                res.scanned.append(h)
                continue
            pending.append((h, unit[0], unit[1]))
            pending_rows += unit[1].shape[0]
            if pending_rows >= block_rows:
                if res.blocks and should_stop():
                    stopped = True
                    break
                flush()
    if pending and not stopped:
        if res.blocks and should_stop():
            stopped = True
        else:
            flush()
    res.aborted = stopped
    order = np.lexsort((best_r, best_i, -best_s)) if len(best_s) else []
    for j in np.asarray(order).tolist():
        h, spans = units[int(best_i[j])]
        a, b = spans[int(best_r[j])].tolist()
        res.top.append((float(best_s[j]), h, int(a), int(b)))
    res.top.sort(key=lambda t: (-t[0], t[1], t[2]))
    return res


def merge_chunk_results(results: Sequence[ChunkScanResult], k: int) -> ChunkScanResult:
    """One result from the shards' (each over its own units): the exact top ``k``."""
    out = ChunkScanResult()
    out.top = merge_top((r.top for r in results), k)
    for r in results:
        out.scanned.extend(r.scanned)
        out.unreadable.extend(r.unreadable)
        out.rows += r.rows
        out.blocks += r.blocks
        out.aborted = out.aborted or r.aborted
        out.moments.n += r.moments.n
        out.moments.s1 += r.moments.s1
        out.moments.s2 += r.moments.s2
    return out
