"""A segmented BM25 index: one main segment plus small delta segments, tombstones by filtering,
and merges, over the per-unit artefacts of a ``UnitStore`` (seed section 10).

* **Add**: units built since the last segment change go into a new *delta* segment, built from
  their stored term lists (no re-tokenising). The first segment becomes the main one.
* **Tombstones**: a search passes the set of hashes it may return; docs of other units (deleted,
  changed, out of scope) get weight 0 in every segment, so they never appear, before any merge.
* **Merges** (``plan``): a *full merge* rebuilds the main segment from every built unit when the
  deltas hold more than ``delta_fraction`` of the main segment's docs, or when more than
  ``dead_fraction`` of all docs are tombstoned; otherwise more than ``max_deltas`` deltas are
  *compacted* into one delta (cost proportional to the deltas, not the corpus).
* **Corruption**: a segment that fails its checks is dropped from the layout and its folder
  removed; its units count as not covered and are re-added from the stored terms.
* **Scores**: each segment scores with its own IDF (``idf="segment"``, bm25s ``retrieve``), or
  (``idf="global"``) with the live docs' statistics over all segments (doc count, document
  frequencies, average length; tombstones count nowhere): a clean build's scores, whatever the
  history (``lar.layers.kits.lexical.corpus_stats``). Segments written without raw term
  frequencies (other stores) fall back to rescaling each term to the IDF over all segments.

Searches and segment builds run in several threads: the layout is swapped under a lock and
replaced atomically on disk; a merge started at search time runs in a daemon thread.
"""
from __future__ import annotations

import importlib.util
import threading
import time
from typing import Callable, Iterable

import numpy as np

from lar.layers.kits.lexical.chunks import UnitStore
from lar.layers.kits.lexical.corpus_stats import CorpusStats, corpus_stats, live_scores, query_idfs
from lar.layers.kits.lexical.segments import CorruptSegment, Layout, Segment, SegmentParams, SegmentStore, global_weights

Result = tuple[float, str, int, int]  # score, hash, start, end


def missing_dependency(stem: bool) -> str | None:
    """The optional package the layer needs and cannot import (bm25s, or PyStemmer when
    stemming), else None."""
    needed = ["bm25s"] + (["Stemmer"] if stem else [])
    for mod in needed:
        if importlib.util.find_spec(mod) is None:
            return mod
    return None


class SegmentedIndex:
    """The live segments of one layer and the policy that adds, compacts and merges them.

    ``units`` holds the per-unit terms (stored with ``unit_version``); ``on_lost`` is told the
    hashes whose terms are missing, so the layer can rebuild them. Segments are loaded (and
    verified) once per process and cached; the layout changes under a lock. ``store`` replaces
    the bm25s segment store by another with the same methods (the ``sparse`` layer's, whose
    segments score a ``SparseVec`` passed as ``terms``; use ``idf="segment"`` with it)."""

    def __init__(self, directory, params: SegmentParams, units: UnitStore, unit_version: str, *,
                 max_deltas: int = 3, delta_fraction: float = 0.1, dead_fraction: float = 0.2,
                 idf: str = "segment", on_lost: Callable[[set[str]], None] | None = None,
                 store: SegmentStore | None = None,
                 built_now: Callable[[], set[str]] | None = None):
        self.store = store if store is not None else SegmentStore(directory, params)
        self.params = params
        self.units = units
        self.unit_version = unit_version
        self.max_deltas = max_deltas
        self.delta_fraction = delta_fraction
        self.dead_fraction = dead_fraction
        self.idf = idf
        self.on_lost = on_lost
        self.built_now = built_now  # the built units as the manifest says now (see _fresh)
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self._lock = threading.RLock()
        self._add_lock = threading.Lock()
        self._cache: dict[str, Segment] = {}
        self._inflight: set[str] = set()
        self._layout = self.store.read_layout()
        self._stamp = self.store.layout_stamp()
        self._worker: threading.Thread | None = None
        self._stats: tuple[tuple[str, ...], frozenset[str], CorpusStats] | None = None
        self._plan: tuple | None = None  # (layout key, ok set, plan): see plan()
        self.store.collect()

    # -- layout ---------------------------------------------------------------------------------
    def note(self, msg: str) -> None:
        """Remember an event for the status line (the last ten are kept)."""
        self.notes = (self.notes + [msg])[-10:]

    @property
    def layout(self) -> Layout:
        self._refresh()
        return self._layout

    def _refresh(self) -> None:
        """Follow the layout on disk when another writer (process or index) replaced it."""
        with self._lock:
            stamp = self.store.layout_stamp()
            if stamp != self._stamp:
                self._stamp = stamp
                self._adopt(self.store.read_layout())

    def _adopt(self, layout: Layout) -> None:
        self._layout = layout
        for sid in list(self._cache):
            if sid not in layout.ids and sid not in self._inflight:
                del self._cache[sid]

    def _update(self, make: Callable[[Layout], Layout], discard: Iterable[str] = ()) -> Layout:
        """Change the layout on disk (read-modify-write under the store's lock) and follow it."""
        with self._lock:
            layout = self.store.update(make, spare=set(self._inflight), discard=discard)
            self._stamp = self.store.layout_stamp()
            self._adopt(layout)
            return layout

    def segments(self) -> list[Segment]:
        """The live segments, main first; corrupt ones are dropped from the layout. A segment
        another writer replaced meanwhile (its folder gone) is not corrupt: the new layout is
        followed instead."""
        with self._lock:
            for _ in range(5):
                self._refresh()
                layout = self._layout
                good, bad, moved = [], [], False
                for sid in layout.ids:
                    seg = self._cache.get(sid)
                    if seg is None:
                        try:
                            seg = self.store.load(sid)
                        except CorruptSegment as exc:
                            if sid not in self.store.read_layout().ids:
                                moved = True  # superseded by another writer: not corruption
                                break
                            bad.append((sid, exc))
                            continue
                        self._cache[sid] = seg
                    good.append(seg)
                if moved:
                    self._stamp = None  # re-read the layout and try again
                    continue
                if bad:
                    ids = {sid for sid, _ in bad}
                    for sid, exc in bad:
                        self.note(f"segment {sid} failed its checks ({exc}); dropped, its "
                                  "units are re-added from the stored terms")
                    self._update(lambda lay: Layout(lay.key, None if lay.main in ids else lay.main,
                                                    tuple(d for d in lay.deltas if d not in ids)),
                                 discard=ids)
                return good
            return [s for s in (self._cache.get(sid) for sid in self._layout.ids) if s is not None]

    def covered(self) -> set[str]:
        out: set[str] = set()
        for seg in self.segments():
            out |= seg.unit_set
        return out

    # -- building -------------------------------------------------------------------------------
    def _build(self, hashes: Iterable[str]) -> Segment | None:
        hashes = set(hashes)
        rows = list(self.units.get_many(hashes, self.unit_version))
        lost = hashes - {r[0] for r in rows}
        if lost and self.on_lost is not None:
            self.on_lost(lost)
        if not rows:
            return None
        seg_id = self.store.new_id()
        with self._lock:
            self._inflight.add(seg_id)
            self.store.claim(seg_id)  # private to this writer until committed
        try:
            seg = self.store.build(rows, seg_id)
        except BaseException:
            with self._lock:
                self._inflight.discard(seg_id)
                self.store.release(seg_id)
            raise
        with self._lock:
            self._cache[seg.id] = seg
        return seg

    def _commit(self, seg: Segment, make: Callable[[Layout], Layout]) -> None:
        with self._lock:
            try:
                self._update(make)
            finally:
                self._inflight.discard(seg.id)
                self.store.release(seg.id)

    def add(self, hashes: Iterable[str]) -> Segment | None:
        """Index ``hashes`` into a new delta (the main segment if there is none yet)."""
        t0 = time.monotonic()
        seg = self._build(hashes)
        if seg is not None:
            self._commit(seg, lambda lay: Layout(lay.key, seg.id, lay.deltas) if lay.main is None
                         else Layout(lay.key, lay.main, lay.deltas + (seg.id,)))
        self.timings["last_add_s"] = time.monotonic() - t0
        return seg

    def _fresh(self, ok: set[str]) -> set[str]:
        """The built units to rewrite segments from, read after the segments to replace were
        taken: ``ok`` was read earlier (at a search's start), and another writer (thread or
        process) may have built units and committed them in a delta since; rewriting from the
        older set would drop them from the index while the manifest says they are built."""
        return self.built_now() if self.built_now is not None else ok

    def merge(self, ok: set[str]) -> Segment | None:
        """Full merge: a new main segment from every unit in ``ok``; replaces the main segment
        and every delta that existed when the merge started."""
        t0 = time.monotonic()
        before = set(self.layout.ids)
        seg = self._build(self._fresh(ok))
        with self._lock:
            if seg is None:
                self._update(lambda lay: Layout(lay.key, None,
                                                tuple(d for d in lay.deltas if d not in before)))
            else:
                self._commit(seg, lambda lay: Layout(lay.key, seg.id,
                                                     tuple(d for d in lay.deltas if d not in before)))
        self.timings["last_merge_s"] = time.monotonic() - t0
        self.note(f"full merge: {seg.n_docs if seg else 0} docs in "
                   f"{self.timings['last_merge_s']:.2f} s")
        return seg

    def compact(self, ok: set[str]) -> Segment | None:
        """Fold the current deltas into one delta (the live units among them)."""
        t0 = time.monotonic()
        deltas = [s for s in self.segments() if s.id in self._layout.deltas]
        old = {s.id for s in deltas}
        units = set().union(*(s.unit_set for s in deltas)) & self._fresh(ok) if deltas else set()
        seg = self._build(units)
        with self._lock:
            if seg is None:
                self._update(lambda lay: Layout(lay.key, lay.main,
                                                tuple(d for d in lay.deltas if d not in old)))
            else:
                self._commit(seg, lambda lay: Layout(lay.key, lay.main, (seg.id,) + tuple(
                    d for d in lay.deltas if d not in old)))
        self.timings["last_compact_s"] = time.monotonic() - t0
        return seg

    def plan(self, ok: set[str]) -> str | None:
        """'merge', 'compact' or None, from the live layout and the built units ``ok``: kept
        while the segments and ``ok`` (the same set: the layer shares one per manifest change)
        stay put, so a search with nothing changed does not count dead docs again."""
        segs = self.segments()
        key = (tuple(s.id for s in segs), self._layout.main, tuple(self._layout.deltas), len(ok))
        cached = self._plan
        if cached is not None and cached[0] == key and cached[1] is ok:
            return cached[2]
        out = self._plan_for(segs, ok)
        self._plan = (key, ok, out)
        return out

    def _plan_for(self, segs: list[Segment], ok: set[str]) -> str | None:
        main = [s for s in segs if s.id == self._layout.main]
        deltas = [s for s in segs if s.id in self._layout.deltas]
        if not deltas:
            main_docs = main[0].n_docs if main else 0
            dead = self._dead_docs(main, ok)
            return "merge" if main_docs and dead > self.dead_fraction * main_docs else None
        main_docs = main[0].n_docs if main else 0
        delta_docs = sum(s.n_docs for s in deltas)
        total = main_docs + delta_docs
        if not main or delta_docs > self.delta_fraction * main_docs or (
                total and self._dead_docs(segs, ok) > self.dead_fraction * total):
            return "merge"
        if len(deltas) > self.max_deltas:
            return "compact"
        return None

    @staticmethod
    def _dead_docs(segs: list[Segment], ok: set[str]) -> int:
        dead = 0
        for s in segs:
            alive = np.fromiter((h in ok for h in s.units), dtype=bool, count=len(s.units))
            dead += int(s.docs_per_unit[~alive].sum())
        return dead

    def run_plan(self, ok: set[str], plan: str | None) -> None:
        if plan == "merge":
            self.merge(ok)
        elif plan == "compact":
            self.compact(ok)

    def maintain(self, ok: set[str]) -> None:
        """Synchronously: add the built units no segment holds, then merge or compact."""
        missing = ok - self.covered()
        if missing:
            self.add(missing)
        self.run_plan(ok, self.plan(ok))

    def _spawn(self, fn: Callable[[], None]) -> bool:
        with self._lock:
            if self._worker is not None and self._worker.is_alive():
                return False

            def run() -> None:
                try:
                    fn()
                except Exception as exc:  # a failed background build is retried next search
                    self.note(f"background segment build failed: {type(exc).__name__}: {exc}")

            self._worker = threading.Thread(target=run, name="lar-bm25-segments", daemon=True)
            self._worker.start()
            return True

    def busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background segment build (tests, benchmarks)."""
        w = self._worker
        if w is not None:
            w.join(timeout)

    def prepare(self, needed: set[str], ok: set[str], sync_limit: int) -> set[str]:
        """Before a search: make ``needed`` searchable. Up to ``sync_limit`` missing units are
        indexed now (a delta); more are indexed in a background thread. A due merge or
        compaction runs in the background. Returns the needed units still not searchable."""
        missing = needed - self.covered()
        if missing and len(missing) <= sync_limit:
            with self._add_lock:  # concurrent searches: one builds the delta, the rest reuse it
                missing = needed - self.covered()
                if missing:
                    self.add(missing)
            missing = set()
        elif missing:
            self._spawn(lambda: self.maintain(ok))
            return missing
        plan = self.plan(ok)
        if plan:
            self._spawn(lambda: self.run_plan(ok, plan))
        return missing

    # -- searching ------------------------------------------------------------------------------
    def corpus_stats(self, segs: list[Segment], live: frozenset[str]) -> CorpusStats:
        """The statistics of the ``live`` units' docs in ``segs`` (kept while both stay put)."""
        key = tuple(s.id for s in segs)
        cached = self._stats
        if cached is not None and cached[0] == key and cached[1] is live:
            return cached[2]
        stats = corpus_stats(segs, live)
        self._stats = (key, live, stats)
        return stats

    def search(self, terms: list[str], k: int, allowed: set[str],
               expired: Callable[[], bool] = lambda: False, moments=None,
               live: frozenset[str] | None = None) -> tuple[list[Result], bool]:
        """The top ``k`` chunks of ``allowed`` units over all segments (best score first,
        duplicates removed) and whether the deadline cut the search short. ``moments`` (a
        :class:`lar.core.background.ScoreMoments`) collects every searched chunk's score.
        With ``idf="global"`` and ``live`` (the built hashes of every live unit) the scores use
        the live docs' statistics over all segments: those of a clean build, whatever the
        history of edits, deltas and tombstones (``lar.layers.kits.lexical.corpus_stats``)."""
        segs = [s for s in self.segments() if s.n_docs]
        weights: list = [None] * len(segs)
        scored: list = [None] * len(segs)
        p = self.params
        if self.idf == "global" and live is not None and all(s.tf is not None for s in segs):
            stats = self.corpus_stats(segs, live)
            idfs = query_idfs(segs, terms, stats, p.method)
            scored = [live_scores(s, terms, idfs, stats.avgdl, p.k1, p.b, p.method)
                      if not s.unit_set.isdisjoint(allowed) else None for s in segs]
        elif self.idf == "global" and len(segs) > 1:
            weights = global_weights(segs, terms, self.params.method)
        out: list[Result] = []
        partial = False
        for seg, w, pre in zip(segs, weights, scored):
            if expired():
                partial = True
                break
            if seg.unit_set.isdisjoint(allowed):
                continue
            found = seg.search(terms, k, allowed, w, moments) if pre is None else \
                seg.search(terms, k, allowed, w, moments, scored=pre)
            for score, i in found:
                h, s, e = seg.doc(i)
                out.append((score, h, s, e))
        out.sort(key=lambda r: (-r[0], r[1], r[2]))
        seen: set[tuple[str, int, int]] = set()
        best: list[Result] = []
        for r in out:
            key = (r[1], r[2], r[3])
            if key not in seen:
                seen.add(key)
                best.append(r)
                if len(best) >= k:
                    break
        return best, partial

    def describe(self) -> str:
        segs = self.segments()
        main = [s for s in segs if s.id == self._layout.main]
        deltas = [s for s in segs if s.id != self._layout.main]
        return (f"segments: main {main[0].n_docs if main else 0} chunks, {len(deltas)} deltas "
                f"({sum(s.n_docs for s in deltas)} chunks); idf {self.idf}")
