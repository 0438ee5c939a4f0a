"""``SegmentedLayer``: the part of a lazily built layer served from immutable term segments
(``SegmentedIndex``) that ``bm25`` and ``derived`` share: which built units a search may score,
how much of the scope that covers, keeping the segments in step with the manifest, and the
search entry point (off the event loop)."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

from lar.core.building import BuildingLayer
from lar.core.errors import MissingExtraError
from lar.core.layer import Budget, Candidate, LayerContext, ScopeView, Unit
from lar.core.types import Hit
from lar.layers.kits.lexical.index import SegmentedIndex


class SegmentedLayer(BuildingLayer):
    """Subclasses set ``index`` (a :class:`SegmentedIndex`), ``missing`` (the package the
    layer lacks, or None), ``sync_units`` and ``tokenizer``, and implement ``read_query`` and
    ``score(text, terms, allowed, scope_paths, budget, live=...)`` (``live``: the built hashes
    of every live unit, for corpus-wide statistics)."""

    missing: str | None = None
    sync_units: int = 2000
    index: SegmentedIndex

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self._maint_lock = threading.Lock()
        self._ok: tuple[dict[str, str], set[str]] | None = None  # (states it was made from, ok)
        self._live: tuple[list[Unit], set[str], frozenset[str]] | None = None
        self._scoped: tuple | None = None  # (units, states, scope, (paths, processed, allowed))

    # -- built state ----------------------------------------------------------------------
    def ok_hashes(self) -> set[str]:
        """Hashes built with state 'ok' (shared set: do not change it); recomputed only when
        the manifest's states change (the manifest caches them per change)."""
        states = self.built()
        cached = self._ok
        if cached is None or cached[0] is not states:
            cached = self._ok = (states, {h for h, st in states.items() if st == "ok"})
        return cached[1]

    def live_built(self, scope: ScopeView) -> frozenset[str]:
        """The built ('ok') hashes of every live unit, whatever the scope: the docs that
        corpus-wide statistics count (kept while the units and the built states stay put)."""
        units, ok = scope.all_units(), self.ok_hashes()
        cached = self._live
        if cached is not None and cached[0] is units and cached[1] is ok:
            return cached[2]
        live = frozenset(u.hash for u in units if u.hash in ok)
        self._live = (units, ok, live)
        return live

    def scoped(self, scope: ScopeView, done: dict[str, str]
               ) -> tuple[dict[str, str], int, frozenset[str]]:
        """Of the scope's applicable units: ``{hash: path}``, how many are processed (any
        state) and the built ('ok') hashes; kept while the live units (the same list), the
        built states (the same mapping, ``built()`` caches it per change) and the scope stay
        put, so a search with nothing changed does not pass over every unit (issue 26)."""
        units = scope.all_units()
        cached = self._scoped
        if (cached is not None and cached[0] is units and cached[1] is done
                and cached[2] == (scope.scope, len(units))):
            return cached[3]
        paths = {u.hash: u.path for u in self.applicable(scope)}
        processed = sum(1 for h in paths if h in done)
        allowed = frozenset(h for h in paths if done.get(h) == "ok")
        out = (paths, processed, allowed)
        self._scoped = (units, done, (scope.scope, len(units)), out)
        return out

    def maintain(self) -> None:
        """Bring the segments up to date with every built unit now (add, then merge/compact)."""
        with self._maint_lock:
            self.index.wait()
            self.index.maintain(self.ok_hashes())

    def merge(self) -> None:
        """Force a full merge: one main segment from every built unit, no deltas."""
        with self._maint_lock:
            self.index.wait()
            self.index.merge(self.ok_hashes())

    def collect_garbage(self, live_hashes: set[str]) -> int:
        n = super().collect_garbage(live_hashes)
        if not self.missing:
            try:
                self.maintain()
            except Exception as exc:  # segments are rebuilt at the next search; never fail a build
                self.index.note(f"segment maintenance failed: {type(exc).__name__}: {exc}")
        return n

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        await super().build(units, cancel)
        if not cancel.is_set() and not self.missing:
            await asyncio.to_thread(self.maintain)

    # -- searching ------------------------------------------------------------------------
    def read_query(self, query: Any) -> str:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    async def search(self, query: Any, scope: ScopeView, budget: Budget,
                     candidates: Sequence[Candidate] | None = None) -> list[Hit]:
        text = self.read_query(query)
        if self.missing:
            raise MissingExtraError(self.missing, "lexical")
        return await asyncio.to_thread(self.search_now, text, scope, budget)

    def search_now(self, text: str, scope: ScopeView, budget: Budget) -> list[Hit]:
        """The scope's built units that are in a segment, the coverage that gives, then the
        subclass's ``score``."""
        paths, processed, allowed = self.scoped(scope, self.built())
        if not paths:
            budget.set_coverage(1.0)
            return []
        terms = self.tokenizer.query(text)
        if not allowed or not terms:
            budget.set_coverage(processed / len(paths))
            return []
        waiting = self.index.prepare(allowed, self.ok_hashes(), self.sync_units)
        budget.set_coverage((processed - len(waiting)) / len(paths))
        if waiting:
            budget.note(f"{len(waiting)} built units are being added to a segment")
        return self.score(text, terms, allowed - waiting, paths, budget, live=self.live_built(scope))

    def score(self, text: str, terms: list[str], allowed: set[str], paths: dict[str, str],
              budget: Budget, live: frozenset[str] | None = None
              ) -> list[Hit]:  # pragma: no cover - every subclass has its own
        raise NotImplementedError
