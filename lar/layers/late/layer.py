"""``late``: exact late interaction (ColBERT-style MaxSim) over per-unit token-vector sidecars.

No centroid index, no approximation (seed section 7): every chunk of every scanned unit is scored
exactly, ``score = sum_i w_i * max_t q_i . d_t``, in blocks, abortable between blocks.

Building (lazily, per unit): the unit's chunks go through the encoder once (shared with
``dense``, see ``lar.layers.kits.vectors.shared``); with size levers set (``pool``: token pooling factor,
``pca``: dimensions, ``int8``) a derived sidecar is written to the layer's folder. Every lever
combination is its own layer version. PCA is fitted on the corpus's first built units.

Searching: the candidates of cheaper layers first (the orchestrator hands them over when they are
in), then the rest of the scope by usage, then by path; at the deadline it returns what it scored
and reports the coverage. Every hit carries, per query token, its contribution to the score, the
document token it matched and that token's byte span; the hit's span is localised to the
sentences that carry the match (``details.chunk`` keeps the whole chunk).

Query: free text or ``{"text": ..., "weights": {word: w}, "min_score": 0.3}``
(see ``lar.layers.late.query``). Options (``late_<key>`` in the engine config, or a variant's options):
``model`` (default the packaged all-MiniLM-L6-v2; any local checkpoint path), ``kind`` (auto,
sentence-transformers, colbert, bge-m3), ``device`` (None = CUDA when available, else CPU),
``pool``, ``pool_method`` (ward, adjacent), ``pca``, ``int8``, ``block_tokens`` (None: 65536, 1 M
from a CUDA arena), ``device_mb`` (``lar.layers.kits.resident``), ``localise``,
``shards`` (0: scan in this process; n: scan n shards on Ray actors, at the engine's
``ray_address``, docs/ray.md; each actor keeps its units in its own arena on ``device`` within
``device_mb``, asking Ray for ``shard_gpus`` GPUs: None = 1 when ``device`` is cuda, else 0).
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from lar.core.errors import ConfigError, LarError, QueryError
from lar.core.layer import Budget, Candidate, LayerContext, ScopeView, Unit
from lar.layers.kits.vectors.arena import TokenArena, in_memory
from lar.layers.late.hits import late_hits
from lar.layers.late.query import parse_late_query, token_weights
from lar.layers.late.order import scan_order
from lar.layers.late.scan import DEFAULT_BLOCK_TOKENS, block_tokens_for, scan_units
from lar.core.types import Hit
from lar.layers.kits.device import scan_layer_device
from lar.layers.kits.resident import ResidentHolder, check_device_mb
from lar.layers.kits.embedding import DEFAULT_MAX_UNIT_BYTES, EmbeddingLayer
from lar.layers.kits.vectors.shared import SharedPassLayer

PCA_SAMPLE_UNITS = 64
PCA_SAMPLE_TOKENS = 200_000


class LateLayer(SharedPassLayer, EmbeddingLayer):
    name = "late"
    version = "1"
    roles = frozenset({"generate", "refine"})
    query_format = ("free text, or {'text': ..., 'weights': {word_or_token: w}, 'min_score': "
                    "0.3}: weights 0 drop a query token, > 1 boost it, no re-indexing")
    cost = "built lazily: one encoder pass per chunk (shared with dense); exact MaxSim scan"
    cost_rank = 80
    early_candidates = True  # the orchestrator hands over the cheap layers' candidates
    defaults = {"model": None, "kind": "auto", "device": None, "pool": 1, "pool_method": "ward",
                "pca": 0, "int8": False, "block_tokens": None, "localise": True,
                "max_unit_bytes": DEFAULT_MAX_UNIT_BYTES, "cache_mb": 1024, "shards": 0,
                "device_mb": None, "shard_gpus": None}

    @classmethod
    def check_options(cls, o: dict[str, Any]) -> None:
        super().check_options(o)
        for key, low in (("pool", 1), ("pca", 0), ("block_tokens", 1024), ("cache_mb", 0),
                         ("shards", 0)):
            v = o[key]
            if key == "block_tokens" and v is None:  # auto: lar.layers.late.scan.block_tokens_for
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"layer {cls.name!r}: {key} must be an integer >= {low}, got {v!r}")
        if o["pool_method"] not in ("ward", "adjacent"):
            raise ConfigError(f"layer {cls.name!r}: pool_method must be 'ward' or 'adjacent'")
        if o["kind"] not in ("auto", "sentence-transformers", "transformers", "colbert", "bge-m3"):
            raise ConfigError(f"layer {cls.name!r}: kind must be auto, sentence-transformers, "
                              f"colbert or bge-m3, got {o['kind']!r}")
        if not isinstance(o["int8"], bool) or not isinstance(o["localise"], bool):
            raise ConfigError(f"layer {cls.name!r}: int8 and localise must be True or False")
        check_device_mb(cls.name, o["device_mb"])
        g = o["shard_gpus"]
        if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g <= 8):
            raise ConfigError(f"layer {cls.name!r}: shard_gpus must be None (1 when device is cuda, "
                              f"else 0) or a number of GPUs per shard actor from 0 to 8, got {g!r}")

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self._model_id = "none"
        try:
            from lar.encoders.models import resolve_model

            from lar.encoders.adapters import check_kind

            self._ref = resolve_model(self.options["model"])
            check_kind(self._ref, self.options["kind"])  # on the files: never a random head
            self._model_id = self._ref.model_id
        except LarError as exc:
            self._ref = None
            self._problem = exc
        self._encoder = None
        self._shared = None
        self._pca = None
        self._init_lock = threading.Lock()
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._cache: dict[str, Any] = {}
        self._cache_bytes = 0
        self._cache_lock = threading.Lock()
        self._arena = TokenArena()
        self._resident = ResidentHolder()  # the token arena on the scan device (issue 23)
        self.sharded = None  # lar.layers.late.sharded.LateShards, started by the first search

    # -- versions and levers ----------------------------------------------------------------
    @property
    def levers(self) -> str:
        o = self.options
        parts = []
        if o["pool"] > 1:
            parts.append(f"pool{o['pool']}{o['pool_method'][0]}")
        if o["pca"]:
            parts.append(f"pca{o['pca']}")
        if o["int8"]:
            parts.append("int8")
        return "-".join(parts)

    @property
    def build_version(self) -> str:
        base = super().build_version
        return f"{base}+m{self._model_id}" + (f"+{self.levers}" if self.levers else "")

    # -- model ------------------------------------------------------------------------------
    def encoder(self):
        self.fail_if_unusable()
        with self._init_lock:
            if self._encoder is None:
                from lar.encoders.adapters import load_token_encoder
                from lar.layers.kits.vectors.shared import SharedEncodings

                try:
                    enc = load_token_encoder(self._ref.path, kind=self.options["kind"])
                except LarError as exc:
                    self._problem = exc
                    raise
                self._shared = SharedEncodings(self.ctx.state_dir, enc)
                self._encoder = enc
            return self._encoder

    @property
    def shared(self):
        self.encoder()
        return self._shared

    def shared_encoder_factory(self):  # what a Ray worker loads to build (lar.distributed)
        from functools import partial
        from lar.encoders.adapters import load_token_encoder
        return partial(load_token_encoder, self._ref.path, kind=self.options["kind"])

    def _pca_path(self):
        return self.dir / f"pca-{self.options['pca']}.npz"

    def pca_model(self, sample_units: Sequence[Unit] = ()):
        """The PCA fitted on this corpus (fitted on the first units built, then kept)."""
        if not self.options["pca"]:
            return None
        if self._pca is not None:
            return self._pca
        from lar.layers.kits.vectors.levers import fit_pca, load_pca

        p = self._pca_path()
        if p.exists():
            self._pca = load_pca(p)
            return self._pca
        rows, n = [], 0
        for u in list(sample_units)[:PCA_SAMPLE_UNITS]:
            try:
                doc = self.ctx.reader.document(u.hash, u.path)
                if not doc.text.strip() or doc.skipped:
                    continue
                enc = self.shared.encode(u.hash, doc)
            except Exception:
                continue
            rows.append(enc.tokens_f32())
            n += enc.n_tokens
            if n >= PCA_SAMPLE_TOKENS:
                break
        if not rows or n <= self.options["pca"]:
            raise ConfigError(f"layer {self.name!r}: too few tokens ({n}) to fit PCA to "
                              f"{self.options['pca']} dimensions; build more units first or lower pca")
        model = fit_pca(np.concatenate(rows)[:PCA_SAMPLE_TOKENS], self.options["pca"])
        model.save(p)
        self._pca = load_pca(p)
        return self._pca

    # -- building ---------------------------------------------------------------------------
    def _derived_path(self, h: str):
        from lar.layers.kits.vectors.sidecar import sidecar_path

        return sidecar_path(self.dir / "sidecars", h)

    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        self.forget_cached([unit.hash])
        self.text_of(doc)
        enc = self.shared.encode(unit.hash, doc)
        info = {"chunks": enc.n_chunks, "tokens": enc.n_tokens}
        if self.levers:
            from lar.layers.kits.vectors.levers import apply_pca, pool_tokens, quantize_int8
            from lar.layers.kits.vectors.sidecar import write_sidecar

            o = self.options
            if o["pool"] > 1:
                enc = pool_tokens(enc, o["pool"], o["pool_method"])
            enc = replace(enc, pooled=None)  # late never reads pooled vectors
            meta = {"levers": self.levers}
            if o["pca"]:
                pca = self.pca_model([unit])
                enc = apply_pca(enc, pca)
                meta["pca_id"] = pca.id
            if o["int8"]:
                enc = quantize_int8(enc)
            info["bytes"] = write_sidecar(self._derived_path(unit.hash), enc, meta=meta)
            info["stored_tokens"] = enc.n_tokens
        return info

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        if self.options["pca"] and self.problem() is None and units:
            try:  # fit on the first units of the first build (their encodings are kept)
                await asyncio.to_thread(self.pca_model, units)
            except LarError:
                pass  # too little text yet: units fail with the reason and retry later
        await super().build(units, cancel)

    def drop(self, hashes: set[str]) -> None:
        self.forget_cached(hashes)
        try:  # dead units' shared encodings go too (this loads the model once)
            self.shared.drop(hashes)
        except LarError:
            pass  # unusable model: nothing of it was stored
        for h in hashes:
            self._derived_path(h).unlink(missing_ok=True)

    # -- loading for search -----------------------------------------------------------------
    def load(self, h: str):
        """The encoding scored for unit ``h``: from the in-memory cache (``cache_mb``: sidecars
        read once stay in RAM, first come first kept, so a scan of a corpus larger than the cache
        still hits for its first part instead of thrashing), else from its sidecar."""
        with self._cache_lock:
            enc = self._cache.get(h)
        if enc is not None:
            return enc
        enc = self._load_sidecar(h)
        size = enc.tokens.nbytes + enc.token_spans.nbytes
        with self._cache_lock:
            if self._cache_bytes + size <= self.options["cache_mb"] * (1 << 20):
                enc = in_memory(enc, self._arena)
                self._cache[h] = enc
                self._cache_bytes += size
        return enc

    def forget_cached(self, hashes) -> None:
        self._resident.drop(hashes)
        with self._cache_lock:
            for h in hashes:
                enc = self._cache.pop(h, None)
                if enc is not None:
                    self._cache_bytes -= enc.tokens.nbytes + enc.token_spans.nbytes
                    self._arena.forget(enc.n_tokens)
            if self._arena.mostly_dead:  # start over; refilled lazily by the next scans
                self._cache.clear()
                self._cache_bytes = 0
                self._arena = TokenArena()

    def _load_sidecar(self, h: str):
        """The sidecar encoding of unit ``h``. A corrupt, truncated or stale sidecar is
        deleted, its manifest row forgotten (so it is rebuilt) and ``LookupError`` raised."""
        from lar.layers.kits.vectors.sidecar import CorruptSidecarError, open_sidecar

        try:
            if not self.levers:
                p = self.shared.path(h)
                if not p.exists():
                    raise FileNotFoundError(str(p))
                sc = open_sidecar(p)
                enc = sc.encoding
                if enc.model_id != self.shared.encoder.model_id:
                    raise CorruptSidecarError(p, f"written by model {enc.model_id}")
                return enc
            p = self._derived_path(h)
            sc = open_sidecar(p)
            pca_id = sc.meta.get("pca_id")
            if self.options["pca"]:
                current = self._pca or (self.pca_model() if self._pca_path().exists() else None)
                if current is None or pca_id != current.id:
                    raise CorruptSidecarError(p, f"projected with another PCA ({pca_id})")
            return sc.encoding
        except (CorruptSidecarError, FileNotFoundError) as exc:
            p = self.shared.path(h) if not self.levers else self._derived_path(h)
            p.unlink(missing_ok=True)
            self.manifest.forget([h])
            raise LookupError(f"sidecar of {h[:12]} dropped, rebuilt on the next build: {exc}") from None

    # -- searching --------------------------------------------------------------------------
    def dim(self) -> int:
        return int(self.encoder().dim)

    def backend(self) -> str:
        """torch whenever it is installed (CUDA when available; on CPU its vectorised float16
        conversion makes it ~1.6x the numpy kernel, benchmarks/results/2026-11-30-maxsim.md),
        else numpy."""
        import importlib.util

        return "torch" if importlib.util.find_spec("torch") is not None else "numpy"

    def resident_status(self):
        return self._resident.status()

    def compute_device(self) -> str:  # the encoder loads on the CPU; the scan follows `device`
        return scan_layer_device("cpu", self.backend(), self.options["device"], self.options["shards"])

    def encode_query(self, text: str):
        """Query token vectors (projected by the layer's PCA when set), cached per text."""
        got = self._queries.get(text)
        if got is not None:
            self._queries.move_to_end(text)
            return got
        qe = self.encoder().encode_query(text)
        q = qe.tokens
        if self.options["pca"]:
            q = self.pca_model().project(q)
        got = (qe, np.ascontiguousarray(q, dtype=np.float32))
        self._queries[text] = got
        if len(self._queries) > 256:
            self._queries.popitem(last=False)
        return got

    async def search(self, query: Any, scope: ScopeView, budget: Budget,
                     candidates: Sequence[Candidate] | None = None) -> list[Hit]:
        lq = parse_late_query(query, self.name)
        self.fail_if_unusable()
        return await asyncio.to_thread(self._search, lq, scope, budget, candidates)

    def order(self, hashes: set[str], paths: dict[str, str], candidates) -> list[str]:
        """Candidates' units first (in their order), then the units in memory in arena order,
        then the rest by usage, then by path (:func:`lar.layers.late.order.scan_order`)."""
        resident = self._resident.positions()  # the device arena's order, when there is one
        if resident is None:
            with self._cache_lock:
                resident = {h: i for i, h in enumerate(self._cache)}  # insertion = arena order
        return scan_order(hashes, (c.span.hash for c in candidates or ()), resident,
                          self.ctx.index.usage(), paths)

    def _search(self, lq, scope: ScopeView, budget: Budget, candidates) -> list[Hit]:
        paths, done, ok = self.scope_state(scope)
        not_ok = sum(1 for h in paths if h in done and done[h] != "ok")
        if not ok:  # nothing built yet: do not load the model for nothing
            budget.set_coverage(not_ok / len(paths) if paths else 1.0)
            return []
        try:
            qe, q = self.encode_query(lq.text)
        except QueryError as exc:
            raise QueryError(self.name, str(exc).split(": ", 1)[-1]) from None
        w = token_weights(lq, qe.token_texts, qe.token_spans, self.name)
        order = self.order(ok, paths, candidates)
        min_score = lq.min_score * float(w.sum()) if lq.min_score else None
        opts = {"block_tokens": self.options["block_tokens"] or DEFAULT_BLOCK_TOKENS,
                "backend": self.backend(), "device": self.options["device"], "min_score": min_score}
        if self.options["shards"]:
            from lar.layers.late.sharded import scan_on_shards

            res = scan_on_shards(self, q, w, order, budget, opts)
        else:
            arena = self._resident.arena(opts["backend"], opts["device"], self.options["device_mb"])
            self._resident.prune({h for h, s in done.items() if s == "ok"})  # full: drop the dead
            opts["block_tokens"] = self.options["block_tokens"] or block_tokens_for(arena)
            res = scan_units(q, w, order, self.load, budget.pool, should_stop=budget.expired,
                             resident=arena, **opts)
            if arena is not None:
                budget.detail("resident", {"hit_rate": res.hit_rate, "copied_tokens":
                                           res.copied_tokens, "host_tokens": res.host_tokens})
        budget.set_coverage((not_ok + len(res.scanned)) / len(paths))
        budget.detail("gathered_tokens", res.gathered)  # 0: every block was a view of the arena
        if res.unreadable:
            budget.warn(f"{len(res.unreadable)} sidecars were corrupt or missing: "
                        "dropped, not scored, queued for rebuilding")
        if res.aborted or len(res.scanned) + len(res.unreadable) < len(ok):
            budget.mark_partial(f"timebox ended after scanning {len(res.scanned)} of "
                                f"{len(ok)} built units ({res.tokens} tokens)")
        # the background of a complete scan only: a cut-short one scanned the candidates first,
        # the best-scoring corner, and would read every hit as less remarkable than it is
        background = None if budget.partial else res.moments.result()
        budget.set_background(background)
        return late_hits(self, lq, qe, q, w, res, paths, budget)
