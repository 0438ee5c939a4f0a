"""Enrichment: a fused hit gets its paths, lines, excerpt and context from the current state.

Run on the hits a search returns (never on the candidate pool): a hit whose unit is gone,
changed or out of scope is left out. ``context_for`` asks the layers that describe structure
(e.g. the enclosing symbol) and, for extracted formats, the source map (page, cell, line).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from lar.core.errors import HitNotFoundError, StaleSpanError
from lar.core.layer import BaseLayer
from lar.core.scope import Scope
from lar.core.types import Hit, Span
from lar.engine.excerpts import EXCERPT_CHARS, make_excerpt
from lar.store import FileIndex, UnitReader
from lar.store.extract import DERIVED_KINDS, kind_for
from lar.store.reader import line_range


class Enricher:
    def __init__(self, reader: UnitReader, index: FileIndex, layers: Callable[[], Mapping[str, BaseLayer]]):
        self.reader = reader
        self.index = index
        self._layers = layers

    def enrich(self, hits: Sequence[Hit], scope: Any = None) -> list[Hit]:
        """``hits`` with paths, lines and excerpt filled; those no longer current are left out."""
        sc = scope if isinstance(scope, Scope) or scope is None else Scope.parse(scope)
        known = self.index.paths_for_hashes(h.hash for h in hits)  # one query, not two a hit
        out = (self.enrich_one(h, sc, known[h.hash]) for h in hits)
        return [h for h in out if h is not None]

    def enrich_one(self, hit: Hit, scope: Scope | None = None,
                   current: list[str] | None = None) -> Hit | None:
        """One hit filled from the current state of its unit, or None when it is not current
        (``current``: its live paths, when the caller looked them up)."""
        if current is None:
            current = self.index.paths_for_hash(hit.hash)
        try:
            data = self.reader.unit_text(hit.hash, current[0] if current else None)
        except (HitNotFoundError, StaleSpanError):
            return None
        if hit.span.end > len(data):
            return None
        paths = tuple(current) or hit.paths
        if scope is not None and not scope.is_everything:
            paths = tuple(p for p in paths if scope.matches(p, hit.hash))
            if not paths:
                return None  # the unit is no longer in scope (e.g. moved since the layer ran)
        subs = [s for ev in hit.evidence.values() for s in ev.sub_spans]
        excerpt = hit.excerpt or make_excerpt(data, hit.span, subs)
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[: EXCERPT_CHARS - 1] + "…"
        context = dict(hit.context)
        context.update(self.context_for(hit.hash, hit.span, paths[0] if paths else None))
        return replace(hit, paths=paths, lines=line_range(data, hit.span.start, hit.span.end),
                       excerpt=excerpt, context=context)

    def context_for(self, h: str, span: Span, path: str | None) -> dict[str, Any]:
        """Match-time metadata: where the span sits in its source (page, cell, line of an
        extracted format) and what layers that describe structure say (e.g. the enclosing
        symbol). Layers opt in by defining ``context_for(hash, span, path) -> dict``."""
        out: dict[str, Any] = {}
        if path and kind_for(path) in DERIVED_KINDS:
            try:
                loc = self.reader.document(h, path).locate(span.start, span.end)
            except (HitNotFoundError, StaleSpanError):
                loc = {}
            if loc:
                out["source"] = loc
        for layer in self._layers().values():
            try:
                extra = layer.context_for(h, span, path)
            except Exception:  # context is a courtesy; never fail a call on it
                extra = None
            if extra:
                out.update(extra)
        return out

    def after_search(self, hashes: Sequence[str]) -> None:
        """Keep the returned units' text (their ids stay fetchable after edits) and count their
        use (a hint for build priority)."""
        for h in dict.fromkeys(hashes):
            self.reader.snapshot(h)
        try:
            self.index.touch_usage(list(dict.fromkeys(hashes)))
        except Exception:  # usage is a hint for build priority; never fail a call on it
            pass
