"""``derived``: a layer of origin ``derived`` over derived texts (seed 5.6, catalogue 13).

Each unit's derived texts (summaries, generated questions, descriptions, docstrings, headings
with their first sentence; see ``lar.layers.derived``) come from the central cache under
``<state>/derived``, keyed by (unit hash, generator name, model, prompt version), so a text is
produced once per key however often the layer is rebuilt and whichever layer reads it. The
layer indexes the texts with BM25 (bm25s segments, lar's tokenizers; ``pip install
'lar[lexical]'``) and answers free-text queries. A hit's span is the most specific source span
of the matched derived text, and ``evidence["derived"].details`` carries the text itself::

    {"derived_text", "kind", "generator", "model", "prompt_version", "extractive",
     "source_spans": [[start, end], ...]}

so the caller can verify it against the source (``engine.fetch(hit.id)``). A span found only by
this layer reads as "abstraction or paraphrase, not stated literally: a pointer for where
reading pays off"; the layer status names the generator and says whether it is extractive.

Config keys: ``derived_generator`` ("extractive", the default: offline, no model; a
"module:attribute" string; or an object: a generator, a generator class, or a callable
``fn(text, path) -> list[str | dict]``, see ``lar.layers.derived.plug``), ``derived_prompt_version``
(overrides the generator's prompt version in the cache key: bump it when a callable's prompt
changes) and ``derived_sync_units`` (built units a search adds to a segment itself, 2000).

``DerivedLayer.use_generator(generator, prompt_version=None)`` swaps the generator at run time
(e.g. to the MCP client's model, see ``lar.apps.mcp``); ``use_generator(None)`` goes back to the
configured one. Each generator key keeps its own built state (manifest, stored texts, BM25
segments): the configured generator's in the layer folder, any other under
``<layer dir>/generators/<key slug>/``, so texts of different generators are never mixed and
swapping back needs no rebuild. A generator whose ``available`` attribute is false (a model that
is reachable only during some calls) builds nothing: its units stay pending, none is marked
failed (a unit that fails because the generator became unreachable meanwhile is not
recorded). Swap between calls, not while a search or build of this layer runs.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from lar.core.building import BuildingLayer, Manifest, SkipUnit
from lar.layers.derived import DerivedCache, DerivedStore, DerivedText, GeneratorKey, resolve_generator
from lar.core.errors import ConfigError, QueryError
from lar.core.layer import Budget, LayerContext, ScopeView, Unit
from lar.layers.kits.lexical.chunks import Highlighter
from lar.layers.kits.lexical.index import SegmentedIndex, missing_dependency
from lar.layers.kits.lexical.segmented import SegmentedLayer
from lar.layers.kits.lexical.segments import SegmentParams
from lar.layers.kits.lexical.tokenize import Tokenizer
from lar.core.types import Hit, LayerStatus, Span

MAX_BYTES = 4 * 1024 * 1024
SUBSPAN_HITS = 100
SCORE_KIND = "bm25 over derived texts (global idf)"


def parse_query(query: Any) -> str:
    if isinstance(query, str) and query.strip():
        return query
    raise QueryError("derived", f"give free text (words; matched against derived texts); got {query!r}")


class DerivedLayer(SegmentedLayer):
    name = "derived"
    version = "1"
    roles = frozenset({"generate"})
    origin = "derived"
    granularity = "derived text (summary, question, docstring, heading, ...) -> its source span"
    query_format = ("free text, matched against derived texts (not the text itself); English "
                    "stemming, identifiers split")
    cost_rank = 35

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset({"derived_prompt_version", "derived_sync_units", "derived_generator"})

    def __init__(self, ctx: LayerContext):
        cfg = dict(ctx.config or {})
        pv = cfg.get("derived_prompt_version")
        if pv is not None and (not isinstance(pv, str) or not pv.strip()):
            raise ConfigError(f"config 'derived_prompt_version' must be a non-empty string, got {pv!r}")
        sync = cfg.get("derived_sync_units", 2000)
        if isinstance(sync, bool) or not isinstance(sync, int) or sync < 0:
            raise ConfigError(f"config 'derived_sync_units' must be an integer >= 0, got {sync!r}")
        self.sync_units = sync
        self.generator = resolve_generator(cfg.get("derived_generator"), pv)
        self.key = GeneratorKey.of(self.generator, pv)
        self._configured = (self.generator, pv)
        self.tokenizer = Tokenizer("auto-v1", stem=True)
        self.missing = missing_dependency(stem=True)  # bm25s + PyStemmer, as the bm25 layer
        self.cost = self._cost(self.key)
        super().__init__(ctx)
        self.cache = DerivedCache(ctx.state_dir / "derived")
        self.store = DerivedStore(self.dir / "texts.sqlite")
        self.index = SegmentedIndex(self.dir, SegmentParams(self.build_version), self.store,
                                    self.build_version, idf="global", on_lost=self.manifest.forget,
                                    built_now=self._built_in(self.manifest))
        # built state per generator key (slug): (manifest, store, index); see use_generator
        self._states = {self.key.slug: (self.manifest, self.store, self.index)}

    def _built_in(self, manifest: Manifest):
        """The units ``manifest`` says are built ('ok') now: what a merge of that key's segments
        rewrites them from (``SegmentedIndex.built_now``)."""
        return lambda: {h for h, st in manifest.states(self.build_version).items() if st == "ok"}

    @staticmethod
    def _cost(key: GeneratorKey) -> str:
        if key.extractive:
            return "built lazily: extractive rules per unit (~ms), query ~1-10 ms"
        return ("built lazily: one generator (model) call per unit or chunk, cached centrally; "
                "query ~1-10 ms")

    # -- the generator ----------------------------------------------------------------------------
    def use_generator(self, generator: Any = None,
                      prompt_version: str | None = None) -> GeneratorKey:
        """Derive texts with ``generator`` from now on (anything ``derived_generator`` accepts:
        a generator, a class, a callable, "module:attribute" or "extractive"); None goes back
        to the configured generator. ``prompt_version`` overrides the generator's own in the
        cache key. Returns the new key. The built state of each key is kept apart (see the
        module docstring): units already built with the new key are not rebuilt, and searches
        read only the new key's texts. Raises ``GeneratorError``/``ConfigError`` for a bad
        generator (the layer keeps its current one then)."""
        if prompt_version is not None and (not isinstance(prompt_version, str)
                                           or not prompt_version.strip()):
            raise ConfigError(f"prompt_version must be a non-empty string, got {prompt_version!r}")
        if generator is None:
            gen, pv = self._configured
        else:
            gen, pv = resolve_generator(generator, prompt_version), prompt_version
        key = GeneratorKey.of(gen, pv)
        with self._build_lock, self._maint_lock:
            self.index.wait()  # no merge of the old key's segments runs on after the swap
            self.generator, self.key = gen, key
            self.cost = self._cost(key)
            self.__dict__.pop("_build_version", None)
            state = self._states.get(key.slug)
            if state is None:
                folder = self.dir / "generators" / key.slug
                manifest = Manifest(folder / "manifest.sqlite")
                store = DerivedStore(folder / "texts.sqlite")
                index = SegmentedIndex(folder, SegmentParams(self.build_version), store,
                                       self.build_version, idf="global", on_lost=manifest.forget,
                                       built_now=self._built_in(manifest))
                state = self._states[key.slug] = (manifest, store, index)
            self.manifest, self.store, self.index = state
        return key

    @property
    def generator_available(self) -> bool:
        """False while the generator says it cannot be reached (its ``available`` attribute)."""
        return bool(getattr(self.generator, "available", True))

    def pending(self, units: Sequence[Unit]) -> list[Unit]:
        if not self.generator_available:
            return []  # nothing to build now; the units stay pending, none is marked failed
        return super().pending(units)

    def build_stamp(self):
        return (super().build_stamp(), self.generator_available)

    def build_one(self, unit: Unit) -> str:
        if not self.generator_available:
            return "failed"  # not recorded: the unit stays pending
        state = super().build_one(unit)
        if state == "failed" and not self.generator_available:
            self.manifest.forget([unit.hash])  # the model went away during this unit: retry later
        return state

    @property
    def build_version(self) -> str:
        bv = self.__dict__.get("_build_version")
        if bv is None:
            bv = (f"{BuildingLayer.build_version.fget(self)}+g{self.key.slug}"  # type: ignore[attr-defined]
                  f"+t{self.tokenizer.key}")
            if self.missing:
                bv += f"+missing-{self.missing}"
            self.__dict__["_build_version"] = bv
        return bv

    # -- building -------------------------------------------------------------------------------
    def skip_reason(self, unit: Unit) -> str | None:
        if self.missing:
            return f"needs the optional package {self.missing!r}: pip install 'lar[lexical]'"
        return None

    def _terms(self, t: DerivedText, doc_kind: str) -> list[str]:
        mode = "code" if t.kind == "signature" else "latex" if doc_kind == "latex" else "prose"
        return self.tokenizer.by_mode(t.text, mode)

    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        if not doc.text or not doc.text.strip():
            raise SkipUnit("no text")
        if len(doc.text) > MAX_BYTES:
            raise SkipUnit(f"too large for derived texts ({len(doc.text)} bytes > {MAX_BYTES})")
        texts, generated = self.cache.get_or_create(unit.hash, doc, unit.path, self.generator, self.key)
        terms = [self._terms(t, doc.kind) for t in texts]
        self.store.put(unit.hash, self.build_version, texts, terms)
        return {"texts": len(texts), "generated": generated}

    def drop(self, hashes: set[str]) -> None:
        self.store.drop(hashes)  # the central cache keeps them: other layers and versions reuse

    def status(self, scope: ScopeView) -> LayerStatus:
        st = super().status(scope)
        parts = [self.key.describe(), st.notes]
        if not self.generator_available:
            parts.append("the generator is not reachable now: unbuilt units stay pending")
        if not self.missing:
            parts.append(self.index.describe())
        parts += [self.cache.describe()] + self.cache.events[-1:] + self.index.notes[-1:]
        return replace(st, notes="; ".join(p for p in parts if p))

    # -- searching ------------------------------------------------------------------------------
    def read_query(self, query: Any) -> str:
        return parse_query(query)

    def score(self, text: str, terms: list[str], allowed: set[str], paths: dict[str, str],
              budget: Budget, live: frozenset[str] | None = None) -> list[Hit]:
        results, partial = self.index.search(terms, budget.pool * 2, allowed, budget.expired,
                                             live=live)
        if partial:
            budget.mark_partial()
        return self._hits(text, results, budget, paths)

    def _hits(self, text: str, results: list, budget: Budget, paths: dict[str, str]) -> list[Hit]:
        marker = Highlighter(*self.tokenizer.surface(text))
        units: dict[str, tuple[list[DerivedText] | None, bytes | None]] = {}
        seen: set[tuple[str, int, int]] = set()
        hits: list[Hit] = []
        for score, h, i, _ in results:
            if len(hits) >= budget.pool:
                break
            if budget.expired():
                budget.mark_partial()
                break
            if h not in units:
                try:
                    data = self.ctx.reader.unit_text(h, paths.get(h))
                except Exception:
                    data = None
                units[h] = (self.store.texts(h, self.build_version), data)
            texts, data = units[h]
            if texts is None or data is None or not 0 <= i < len(texts):
                continue
            t = texts[i]
            s, e = t.span
            if e > len(data) or (h, s, e) in seen:
                continue
            seen.add((h, s, e))
            subs = marker.find(data, s, e) if len(hits) < SUBSPAN_HITS else []
            details = {"derived_text": t.text, "kind": t.kind, "generator": self.key.name,
                       "model": self.key.model, "prompt_version": self.key.prompt_version,
                       "extractive": self.key.extractive,
                       "source_spans": [[a, b] for a, b in t.source_spans]}
            hits.append(Hit.single(self.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                                   score_kind=SCORE_KIND, query=text, sub_spans=subs, details=details))
        budget.offer(hits)
        return hits
