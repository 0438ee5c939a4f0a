"""``bm25``: word-level BM25 over chunks, with lar's own tokenizers, built lazily per unit.

Each unit is chunked (``lar.layers.kits.lexical.chunks.chunk_spans``: the shared chunker for prose and
LaTeX, top-level blocks for code) and every chunk is tokenised by the tokenizer its path calls
for (``lar.layers.kits.lexical.tokenize``; the setting is ``config["bm25_tokenizer"]``, default
``"auto-v1"``). The spans and term lists are stored per content hash (``index_unit``: the
expensive part); searchable bm25s segments are built from them (``lar.layers.kits.lexical.index``: one
main segment, small deltas, tombstones by filtering, merges). A hit is one chunk: its span is
the chunk's byte range and its sub-spans are the query's words found in it.

Config keys (``lar.open(..., config={...})``): ``bm25_tokenizer`` ("auto-v1", "code-v1",
"prose-v1", "plain-v1"), ``bm25_stem`` (True), ``bm25_k1`` (1.5), ``bm25_b`` (0.75),
``bm25_method`` ("lucene"), ``bm25_chunk_bytes`` (prose/LaTeX chunk target), ``bm25_code_chunk_bytes``,
``bm25_idf`` ("global", the default: scores use the statistics of the live docs over all
segments, IDF, doc count and average length, so they equal a clean build's whatever the edit
history, ``lar.layers.kits.lexical.corpus_stats``; "segment": each segment's own statistics,
which bury a just-edited file in a one-unit delta),
``bm25_max_deltas`` (3), ``bm25_delta_fraction`` (0.1), ``bm25_dead_fraction`` (0.2) and
``bm25_sync_units`` (units a search indexes itself before leaving the rest to a thread).
Without the optional packages (``pip install 'lar[lexical]'``: bm25s, PyStemmer) the layer
still loads: units are skipped with that hint and searches fail with ``MissingExtraError``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from lar.core.background import ScoreMoments
from lar.core.building import BuildingLayer, SkipUnit
from lar.layers.kits.chunking import CHUNKER_VERSION
from lar.core.errors import ConfigError, QueryError
from lar.core.fasthit import layer_hit
from lar.core.layer import Budget, LayerContext, ScopeView, Unit
from lar.layers.kits.lexical.chunks import CODE_CHUNKER_VERSION, Highlighter, UnitStore, chunk_spans
from lar.layers.kits.lexical.index import missing_dependency, SegmentedIndex
from lar.layers.kits.lexical.segmented import SegmentedLayer
from lar.layers.kits.lexical.segments import SegmentParams
from lar.layers.kits.lexical.tokenize import Tokenizer
from lar.core.types import Hit, LayerStatus, Span

DEFAULTS: dict[str, Any] = {
    "bm25_tokenizer": "auto-v1", "bm25_stem": True, "bm25_k1": 1.5, "bm25_b": 0.75,
    "bm25_method": "lucene", "bm25_chunk_bytes": 1200, "bm25_code_chunk_bytes": 1200,
    "bm25_idf": "global", "bm25_max_deltas": 3, "bm25_delta_fraction": 0.1,
    "bm25_dead_fraction": 0.2, "bm25_sync_units": 2000,
}
SUBSPAN_HITS = 100  # hits past this rank carry no sub-spans (marking costs ~0.05 ms a chunk)
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


def parse_query(query: Any) -> str:
    """A bm25 query is non-empty free text."""
    if isinstance(query, str) and query.strip():
        return query
    raise QueryError("bm25", f"give free text (words, identifiers, LaTeX macros); got {query!r}")


def _number(cfg: dict[str, Any], key: str, kind: type, low: float, high: float) -> Any:
    val = cfg.get(key, DEFAULTS[key])
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not low <= val <= high:
        raise ConfigError(f"config {key!r} must be a number in [{low}, {high}], got {val!r}")
    return kind(val)


def read_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """The layer's settings from the engine config, checked (``ConfigError`` when invalid)."""
    s = {
        "tokenizer": cfg.get("bm25_tokenizer", DEFAULTS["bm25_tokenizer"]),
        "stem": cfg.get("bm25_stem", DEFAULTS["bm25_stem"]),
        "k1": _number(cfg, "bm25_k1", float, 0.0, 100.0),
        "b": _number(cfg, "bm25_b", float, 0.0, 1.0),
        "method": cfg.get("bm25_method", DEFAULTS["bm25_method"]),
        "chunk": _number(cfg, "bm25_chunk_bytes", int, 64, 1 << 24),
        "code_chunk": _number(cfg, "bm25_code_chunk_bytes", int, 64, 1 << 24),
        "idf": cfg.get("bm25_idf", DEFAULTS["bm25_idf"]),
        "max_deltas": _number(cfg, "bm25_max_deltas", int, 0, 1 << 20),
        "delta_fraction": _number(cfg, "bm25_delta_fraction", float, 0.0, 1e9),
        "dead_fraction": _number(cfg, "bm25_dead_fraction", float, 0.0, 1e9),
        "sync_units": _number(cfg, "bm25_sync_units", int, 0, 1 << 30),
    }
    if not isinstance(s["stem"], bool):
        raise ConfigError(f"config 'bm25_stem' must be True or False, got {s['stem']!r}")
    if s["method"] not in METHODS:
        raise ConfigError(f"config 'bm25_method' must be one of {', '.join(METHODS)}, got {s['method']!r}")
    if s["idf"] not in ("segment", "global"):
        raise ConfigError(f"config 'bm25_idf' must be 'segment' or 'global', got {s['idf']!r}")
    return s


class BM25Layer(SegmentedLayer):
    name = "bm25"
    version = "1"
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "chunk"
    query_format = ("free text; identifiers are split (camelCase, snake_case, kebab-case, digits) "
                    "and kept whole; LaTeX macros match by name (\\frac -> frac); English stemming")
    cost = "built lazily: tokenise + chunk per unit, bm25s segments; query ~1-10 ms"
    cost_rank = 30
    chunker_version = f"{CHUNKER_VERSION}.{CODE_CHUNKER_VERSION}"

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset(DEFAULTS)

    def __init__(self, ctx: LayerContext):
        self.settings = read_settings(dict(ctx.config or {}))
        self.tokenizer = Tokenizer(self.settings["tokenizer"], self.settings["stem"])
        self.missing = missing_dependency(self.settings["stem"])
        super().__init__(ctx)
        self.units = UnitStore(self.dir / "units.sqlite")
        self.adopt_sqlite(self.units.db)
        s = self.settings
        params = SegmentParams(self.build_version, s["k1"], s["b"], s["method"])
        self.index = SegmentedIndex(
            self.dir, params, self.units, self.build_version, max_deltas=s["max_deltas"],
            delta_fraction=s["delta_fraction"], dead_fraction=s["dead_fraction"], idf=s["idf"],
            on_lost=self._forget_lost, built_now=self.ok_hashes)

    # -- versions -------------------------------------------------------------------------------
    @property
    def build_version(self) -> str:
        """The base version (layer, chunker, extractors) + tokenizer setting + chunk sizes,
        computed once per layer instance."""
        bv = self.__dict__.get("_build_version")
        if bv is None:
            s = self.settings
            bv = (f"{BuildingLayer.build_version.fget(self)}+t{self.tokenizer.key}"  # type: ignore[attr-defined]
                  f"+s{s['chunk']}/{s['code_chunk']}")
            if self.missing:  # units skipped for a missing package rebuild once it is installed
                bv += f"+missing-{self.missing}"
            self.__dict__["_build_version"] = bv
        return bv

    @property
    def score_kind(self) -> str:
        return "bm25 (global idf over segments)" if self.settings["idf"] == "global" \
            else "bm25 (segment-local idf)"

    # -- building -------------------------------------------------------------------------------
    def skip_reason(self, unit: Unit) -> str | None:
        if self.missing:
            return f"needs the optional package {self.missing!r}: pip install 'lar[lexical]'"
        return None

    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        if not doc.text:
            raise SkipUnit("no text")
        mode = self.tokenizer.mode_for(unit.path)
        spans = chunk_spans(doc, mode, self.settings["chunk"], self.settings["code_chunk"])
        terms = [self.tokenizer.by_mode(doc.text[s:e].decode("utf-8", errors="replace"), mode)
                 for s, e in spans]
        keep = [(sp, t) for sp, t in zip(spans, terms) if t]
        if not keep:
            raise SkipUnit("no terms to index")
        self.units.put(unit.hash, self.build_version, [k[0] for k in keep], [k[1] for k in keep])
        return {"chunks": len(keep), "terms": sum(len(k[1]) for k in keep), "mode": mode}

    def drop(self, hashes: set[str]) -> None:
        self.units.drop(hashes)  # segments keep their docs as tombstones until the next merge

    @property
    def sync_units(self) -> int:
        return self.settings["sync_units"]

    def _forget_lost(self, hashes: set[str]) -> None:
        """Units marked built whose stored terms are gone: rebuild them lazily."""
        self.manifest.forget(hashes)

    def status(self, scope: ScopeView) -> LayerStatus:
        st = super().status(scope)
        notes = "; ".join(x for x in [st.notes, self.index.describe(), f"tokenizer {self.tokenizer.key}"]
                          + self.index.notes[-1:] if x)
        return replace(st, notes=notes)

    # -- searching ------------------------------------------------------------------------------
    def read_query(self, query: Any) -> str:
        return parse_query(query)

    def score(self, text: str, terms: list[str], allowed: set[str], paths: dict[str, str],
              budget: Budget, live: frozenset[str] | None = None) -> list[Hit]:
        moments = ScoreMoments()
        results, partial = self.index.search(terms, budget.pool, allowed, budget.expired, moments,
                                             live=live)
        budget.set_background(moments.result())
        hits = self._hits(text, results, budget, paths)
        if partial:
            budget.mark_partial()
        return hits

    def _hits(self, text: str, results: list, budget: Budget, paths: dict[str, str]) -> list[Hit]:
        """Hits for ``(score, hash, start, end)`` results; the first ``SUBSPAN_HITS`` carry
        sub-spans. Under a deferring budget the hits are light (no text read) and their
        sub-spans are marked for the hits the search returns (:class:`SubSpans`); otherwise a
        unit that can no longer be read is left out and the sub-spans are marked now. At the
        deadline the hits made so far are returned."""
        finish = SubSpans(self, text, paths)
        deferred = budget.deferred
        hits: list[Hit] = []
        kind = self.score_kind
        name = self.name
        for score, h, s, e in results:
            if budget.expired():
                budget.mark_partial()
                break
            if not deferred:
                data = finish.text(h)
                if data is None or e > len(data):
                    continue
            hits.append(layer_hit(name, Span(h, s, e), rank=len(hits) + 1, score=score,
                                  score_kind=kind, query=text))
        hits = budget.settle(name, hits, finish)
        budget.offer(hits)
        return hits


class SubSpans:
    """The deferred part of a bm25 hit (``lar.core.deferred``): the query's words found in its
    chunk, for the layer's first ``SUBSPAN_HITS`` hits (later ones carry none)."""

    def __init__(self, layer: BM25Layer, text: str, paths: dict[str, str]):
        self.layer = layer
        self.marker = Highlighter(*layer.tokenizer.surface(text))
        self.paths = paths
        self.texts: dict[str, bytes | None] = {}

    def text(self, h: str) -> bytes | None:
        if h not in self.texts:
            try:
                self.texts[h] = self.layer.ctx.reader.unit_text(h, self.paths.get(h))
            except Exception:
                self.texts[h] = None
        return self.texts[h]

    def __call__(self, hit: Hit):
        ev = hit.evidence[self.layer.name]
        if ev.rank > SUBSPAN_HITS:
            return None
        span = hit.span
        data = self.text(span.hash)
        if data is None or span.end > len(data):
            return None
        subs = self.marker.find(data, span.start, span.end)
        return replace(ev, sub_spans=tuple(tuple(x) for x in subs)) if subs else None
