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

__all__ = ["StoreSource", "ChunkScanResult", "ChunkPlan", "scan_chunk_units",
           "merge_chunk_results", "BLOCK_ROWS", "LOAD_UNITS"]

BLOCK_ROWS = 65536  # rows scored between two should_stop checks (as ChunkVectorStore.search)
LOAD_UNITS = 512  # units read from the store per call when they are not in memory yet


class StoreSource:
    """A shard's chunk vectors, read from the ``ChunkVectorStore`` at ``folder``."""

    def __init__(self, folder: str | Path, dim: int, dtype: str = "float16"):
        self.folder, self.dim, self.dtype = str(folder), int(dim), dtype
        self._store = None
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # hash -> (spans, rows)
        self._arena = TokenArena()
        self.plan = None  # ((block_rows, hashes), ChunkPlan) of the last complete scan

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
        gone = [h for h in self._cache if h not in keep]
        if gone:
            self.plan = None
        for h in gone:
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


class _TopK:
    """The best ``k`` rows seen so far: (score, unit index, row within the unit)."""

    def __init__(self, k: int):
        self.k = k
        self.s = np.zeros(0, dtype=np.float32)
        self.u = self.r = np.zeros(0, dtype=np.int64)

    def add(self, scores: np.ndarray, counts: np.ndarray, u0: int) -> None:
        k = self.k
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        ends = np.cumsum(counts)
        owner = np.searchsorted(ends, top, side="right")
        self.s = np.concatenate([self.s, scores[top]])
        self.u = np.concatenate([self.u, owner + u0])
        self.r = np.concatenate([self.r, top - (ends[owner] - counts[owner])])
        if len(self.s) > k:
            keep = np.argpartition(-self.s, k - 1)[:k]
            self.s, self.u, self.r = self.s[keep], self.u[keep], self.r[keep]

    def result(self, units: Sequence[tuple[str, np.ndarray]]) -> list[tuple[float, str, int, int]]:
        top = []
        for j in range(len(self.s)):
            h, spans = units[int(self.u[j])]
            a, b = spans[int(self.r[j])].tolist()
            top.append((float(self.s[j]), h, int(a), int(b)))
        return sorted(top, key=lambda t: (-t[0], t[1], t[2]))


def _cosines(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = np.empty(x.shape[0], dtype=np.float32)
    for o, xb in iter_f32(x, np.arange(x.shape[0])):
        np.matmul(xb, q, out=scores[o:o + xb.shape[0]])
    return scores


@dataclass(frozen=True, eq=False)
class ChunkPlan:
    """A complete scan's blocks, kept by the source for the next query over the same units
    (so a warm shard does no per-unit work): each block ``(rows, counts, first unit, hashes)``,
    its rows one view of the arena."""

    units: tuple[tuple[str, np.ndarray], ...]
    blocks: tuple[tuple[np.ndarray, np.ndarray, int, tuple[str, ...]], ...]
    empty: tuple[str, ...]


def _scan_plan(q, plan: ChunkPlan, k: int, should_stop) -> ChunkScanResult:
    res, best = ChunkScanResult(), _TopK(k)
    res.scanned.extend(plan.empty)
    for x, counts, u0, hs in plan.blocks:
        if res.blocks and should_stop():
            res.aborted = True
            break
        scores = _cosines(x, q)
        res.moments.add(scores)
        best.add(scores, counts, u0)
        res.scanned.extend(hs)
        res.rows += int(x.shape[0])
        res.blocks += 1
    res.top = best.result(plan.units)
    return res


def _continues(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether rows ``b`` lie right after rows ``a`` in the same arena buffer."""
    return (a.base is not None and b.base is a.base
            and b.ctypes.data == a.ctypes.data + a.shape[0] * a.strides[0])


def scan_chunk_units(q: np.ndarray, weights: Any, hashes: Sequence[str], load: Any, k: int, *,
                     should_stop: Callable[[], bool] = lambda: False,
                     block_rows: int = BLOCK_ROWS) -> ChunkScanResult:
    """Cosine of the unit query ``q`` with every chunk of ``hashes`` (in order), the ``k`` best
    kept; ``load.many(hashes)`` gives ``({hash: (spans, rows)}, [(hash, why)])`` (a
    ``lar.distributed.ray_scan.ShardLoader``); ``weights`` is unused (the late layer's slot).
    Like ``ChunkVectorStore.search``, the first block is always scored and ``should_stop`` is
    asked before each further one. A block ends at ``block_rows`` rows or where the units' rows
    stop being back to back in the arena, so every block is one view; a complete scan's blocks
    are kept by the source (:class:`ChunkPlan`) and the next query over the same units reuses them."""
    q = np.ascontiguousarray(q, dtype=np.float32).reshape(-1)
    hashes = list(hashes)
    source = getattr(load, "source", None)
    key = (block_rows, hashes)
    plan = getattr(source, "plan", None)
    if plan is not None and plan[0] == key:
        return _scan_plan(q, plan[1], k, should_stop)
    res, best = ChunkScanResult(), _TopK(k)
    units: list[tuple[str, np.ndarray]] = []  # (hash, spans) of the units scored
    blocks, empty = [], []
    pending: list[tuple[str, np.ndarray, np.ndarray]] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal pending, pending_rows
        mats = [r for _, _, r in pending]
        x = mats[0] if len(mats) == 1 else adjacent_view(mats)
        if x is None:  # not back to back (never in the arena's order): copied together
            x = np.concatenate(mats, axis=0)
        scores = _cosines(x, q)
        res.moments.add(scores)
        counts = np.array([r.shape[0] for r in mats], dtype=np.int64)
        best.add(scores, counts, len(units))
        blocks.append((x, counts, len(units), tuple(h for h, _, _ in pending)))
        units.extend((h, sp) for h, sp, _ in pending)
        res.scanned.extend(h for h, _, _ in pending)
        res.rows += int(x.shape[0])
        res.blocks += 1
        pending, pending_rows = [], 0

    def block_ends() -> bool:
        """Score the pending block now, unless the deadline has passed (then stop)."""
        if res.blocks and should_stop():
            return True
        flush()
        return False

    pos = 0
    stopped = False
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
            spans, rows = unit
            if rows.shape[0] == 0:  # no chunks: nothing to score, covered
                res.scanned.append(h)
                empty.append(h)
                continue
            if pending and not _continues(pending[-1][2], rows) and block_ends():
                stopped = True
                break
            pending.append((h, spans, rows))
            pending_rows += rows.shape[0]
            if pending_rows >= block_rows and block_ends():
                stopped = True
                break
    if pending and not stopped:
        stopped = block_ends()
    res.aborted = stopped
    res.top = best.result(units)
    if source is not None and not stopped and not res.unreadable:
        source.plan = (key, ChunkPlan(tuple(units), tuple(blocks), tuple(empty)))
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
