"""``rerank``: a local cross-encoder rescoring the candidate pool (role: refine).

Each candidate of the fused pool is read as a passage (its lines, grown within its paragraph up
to ``passage_bytes``); the (query, passage) pairs go through the cross-encoder in batches and the
hits are ordered by its relevance logit. The deadline is checked between batches (batches shrink
to what the time left allows); the layer returns what it scored and reports its pool coverage.

The model is a local checkpoint directory only: a sentence-transformers ``CrossEncoder`` or any
``AutoModelForSequenceClassification`` checkpoint with one label; hub ids are refused, nothing is
downloaded. A checkpoint whose classification head is not in its weight files (a bi-encoder such
as the packaged all-MiniLM-L6-v2) is refused before loading: transformers would initialise the
head at random. With no model configured the layer does not apply (``why_not`` says why).
Options (``rerank_<key>``, or a variant's options): see ``RerankOptions`` and docs/rerank.md.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
import re
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from lar.core.errors import ConfigError, LarError, QueryError
from lar.core.layer import BaseLayer, Budget, Candidate, LayerContext, ScopeView
from lar.store.reader import expand_to_lines
from lar.core.types import Hit, Span
from lar.encoders.cross_encoder import CrossEncoderModel, check_cross_encoder, load_cross_encoder  # noqa: F401
from lar.layers.kits.device import torch_device
from lar.layers.kits.embedding import ModelProblem

NOT_CONFIGURED = "no cross-encoder checkpoint configured (set config rerank_model to a local directory)"
SCORE_KIND = "cross-encoder logit"
FIRST_BATCH = 4  # the first batch measures the time per pair before larger batches are risked
_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?)$")


@dataclasses.dataclass(frozen=True)
class RerankOptions:
    """The layer's settings, checked on construction."""

    model: str | None = None
    batch_size: int = 16
    max_pairs: int = 100
    max_length: int = 512
    device: str | None = None
    passage_bytes: int = 1500

    def __post_init__(self) -> None:
        for key, low in (("batch_size", 1), ("max_pairs", 1), ("max_length", 8), ("passage_bytes", 64)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"rerank option {key} must be an integer >= {low}, got {v!r}")
        if self.model is not None and not isinstance(self.model, (str, Path)):
            raise ConfigError(f"rerank option model must be a local directory path, got {self.model!r}")
        if self.device is not None and not (isinstance(self.device, str) and _DEVICE_RE.match(self.device)):
            raise ConfigError(f"rerank option device must be None, 'cpu', 'cuda', 'cuda:N' or 'mps', "
                              f"got {self.device!r}")

    @classmethod
    def read(cls, prefix: str, config: Mapping[str, Any], preset: Mapping[str, Any] | None = None):
        if preset is not None:
            given = {k: v for k, v in preset.items() if k != "base"}
        else:
            given = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        unknown = sorted(set(given) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"layer 'rerank': unknown option(s) {unknown}; valid: "
                              f"{sorted(cls.__dataclass_fields__)}")
        return cls(**given)


def parse_query(query: Any) -> str:
    if isinstance(query, str) and query.strip():
        return query.strip()
    if isinstance(query, Mapping) and isinstance(query.get("text"), str) and query["text"].strip():
        extra = set(query) - {"text"}
        if extra:
            raise QueryError("rerank", f"unknown keys {sorted(extra)}; give free text or {{'text': ...}}")
        return query["text"].strip()
    raise QueryError("rerank", f"give free text or {{'text': ...}}; got {query!r}")


def passage_bounds(text: bytes, start: int, end: int, limit: int) -> tuple[int, int]:
    """The passage scored for span ``[start, end)``: its whole lines, grown a line at a time
    (before, then after) within the enclosing paragraph (blank-line delimited) while it stays
    within ``limit`` bytes. Longer spans are cut to ``limit`` bytes: at a line end when one lies
    in the second half, else at a UTF-8 character boundary."""
    n = len(text)
    start = min(max(0, start), n)
    s, e = expand_to_lines(text, start, min(max(start, end), n))
    if e - s > limit:
        cut = s + limit
        nl = text.rfind(b"\n", s, cut)
        if nl >= s + limit // 2:
            return s, nl + 1
        while cut > s and (text[cut] & 0xC0) == 0x80:
            cut -= 1
        return s, cut
    lo = text.rfind(b"\n\n", 0, s)
    lo = 0 if lo < 0 else lo + 2
    hi = text.find(b"\n\n", max(s, e - 1))
    hi = n if hi < 0 else hi + 1
    while True:
        grown = False
        if s > lo:
            ps = max(lo, text.rfind(b"\n", 0, s - 1) + 1)
            if e - ps <= limit:
                s, grown = ps, True
        if e < hi:
            pe = text.find(b"\n", e)
            pe = hi if pe < 0 else min(pe + 1, hi)
            if pe - s <= limit:
                e, grown = pe, True
        if not grown:
            return s, e


class RerankLayer(BaseLayer):
    name = "rerank"
    version = "1"
    roles = frozenset({"refine"})
    origin = "text"
    granularity = "passage (the candidate's lines, grown within its paragraph to passage_bytes)"
    query_format = "free text, or {'text': ...}"
    cost = "no index; one cross-encoder pass per (query, passage) pair of the candidate pool"
    cost_rank = 90
    base: str = ""
    preset: dict[str, Any] | None = None

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        """``<name>_<option>`` for each of its options (a variant takes its options from its preset)."""
        return frozenset() if cls.preset is not None else frozenset(
            f"{cls.name}_{k}" for k in RerankOptions.__dataclass_fields__)

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self.options = RerankOptions.read(f"{self.name}_", dict(ctx.config or {}), self.preset)
        self._problem: LarError | None = None
        self._path: Path | None = None
        self.model_id = "none"
        self._loaded: CrossEncoderModel | None = None
        self._loader: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        if self.options.model is not None:
            try:
                from lar.encoders.models import resolve_model

                ref = resolve_model(self.options.model)  # hub ids and missing paths: ConfigError
                check_cross_encoder(ref.path)  # on the files (MissingExtraError without torch)
                self._path, self.model_id = ref.path, ref.model_id
            except LarError as exc:
                self._problem = exc
            except Exception as exc:  # a broken checkpoint must not break lar.open
                self._problem = ModelProblem(f"cannot check the cross-encoder {self.options.model}: "
                                             f"{type(exc).__name__}: {exc}")

    @classmethod
    def variant(cls, name: str, options: dict[str, Any]) -> type:
        """A separately named reranker with its own options (e.g. a second checkpoint)."""
        if not isinstance(options, dict):
            raise ConfigError(f"layer variant {name!r}: options must be a mapping")
        sub = type(f"{cls.__name__}_{name.replace('-', '_')}", (cls,),
                   {"name": name, "preset": dict(options), "base": cls.name})
        RerankOptions.read(f"{name}_", {}, sub.preset)  # a bad variant is a clear error at open
        return sub

    # -- applicability and the model --------------------------------------------------------
    def applies(self, scope: ScopeView) -> bool:
        return self.options.model is not None

    def why_not(self, scope: ScopeView | None = None) -> str | None:
        """Why ``applies`` is False (None when it applies)."""
        return None if self.options.model is not None else NOT_CONFIGURED

    def problem(self) -> LarError | None:
        return ModelProblem(NOT_CONFIGURED) if self.options.model is None else self._problem

    def fail_if_unusable(self) -> None:
        p = self.problem()
        if p is not None:
            raise p

    def status(self, scope: ScopeView):
        p = self.problem()
        note = (NOT_CONFIGURED if self.options.model is None else f"unusable: {p}" if p is not None
                else f"model {self.model_id}")
        return dataclasses.replace(super().status(scope), notes=note,
                                   device="" if p is not None else torch_device(self.options.device))

    def _load(self) -> None:
        try:
            self._loaded = load_cross_encoder(self._path, self.model_id, self.options.device,
                                              self.options.max_length)
        except LarError as exc:
            self._problem = exc
        except Exception as exc:  # a broken checkpoint must not break the engine
            self._problem = ModelProblem(f"loading the cross-encoder {self._path} failed: "
                                         f"{type(exc).__name__}: {exc}")
        finally:
            self._ready.set()

    def model(self, timeout: float | None = None) -> CrossEncoderModel | None:
        """The loaded model; loading starts in the background on first use and this waits at
        most ``timeout`` seconds (None: until loaded). None when still loading."""
        self.fail_if_unusable()
        with self._lock:
            if self._loader is None:
                self._loader = threading.Thread(target=self._load, name="lar-rerank-load", daemon=True)
                self._loader.start()
        self._ready.wait(timeout)
        self.fail_if_unusable()
        return self._loaded

    def warm(self) -> None:
        """Load the model now (seconds), so the first search's timebox is not spent on it."""
        self.model(None)

    # -- searching --------------------------------------------------------------------------
    async def search(self, query: Any, scope: ScopeView, budget: Budget,
                     candidates: Sequence[Candidate] | None = None) -> list[Hit]:
        text = parse_query(query)
        if not candidates:
            budget.set_coverage(1.0)
            return []
        self.fail_if_unusable()
        return await asyncio.to_thread(self._rerank, text, list(candidates), scope, budget)

    def _score_batch(self, query: str, passages: list[str]) -> list[float]:
        return self._loaded.score(query, passages)

    def _passage(self, cand: Candidate, texts: dict[str, bytes]):
        h = cand.span.hash
        if h not in texts:
            try:
                texts[h] = self.ctx.reader.unit_text(h, cand.path)
            except Exception:  # unit vanished since the candidate was found: skip it
                texts[h] = b""
        data = texts[h]
        if not data:
            return None
        s, e = passage_bounds(data, cand.span.start, cand.span.end, self.options.passage_bytes)
        body = data[s:e].decode("utf-8", errors="replace")
        if not body.strip():
            return None
        span = cand.span if cand.span.end <= len(data) else Span(h, min(cand.span.start, len(data)), len(data))
        return span, (h, s, e), body

    def _rerank(self, text: str, cands: list[Candidate], scope: ScopeView, budget: Budget) -> list[Hit]:
        allowed = scope.hashes()
        in_scope = [c for c in cands if c.span.hash in allowed]
        pool = in_scope[: self.options.max_pairs]
        if len(in_scope) > len(pool):
            budget.warn(f"rescored the first {len(pool)} of {len(in_scope)} candidates "
                        f"({self.name}_max_pairs={self.options.max_pairs})")
        if not pool:
            budget.set_coverage(1.0)
            return []
        if self.model(budget.remaining()) is None or budget.expired():
            budget.set_coverage(0.0)
            budget.mark_partial("timebox ended while the cross-encoder was loading (it "
                                "goes on loading in the background; call Engine.warm() "
                                "before timed searches)")
            return []
        texts: dict[str, bytes] = {}
        scores: dict[tuple, float] = {}
        members: list[tuple[Span, tuple]] = []
        done, per_pair, hits = 0, None, []
        while done < len(pool) and not budget.expired():
            size = min(FIRST_BATCH if per_pair is None else math.floor(budget.remaining() / per_pair),
                       self.options.batch_size)
            if size < 1:  # the next pair would not finish in time
                break
            keys, bodies, j = [], [], done
            while j < len(pool) and len(keys) < size:
                got = self._passage(pool[j], texts)
                j += 1
                if got is None:
                    continue
                span, key, body = got
                members.append((span, key))
                if key not in scores and key not in keys:
                    keys.append(key)
                    bodies.append(body)
            if keys:
                t0 = time.monotonic()
                values = self._score_batch(text, bodies)
                per_pair = max(1e-6, (time.monotonic() - t0) / len(keys))
                scores.update(zip(keys, values))
            done = j
            hits = self._hits(text, members, scores, budget)
            budget.offer(hits)
        budget.set_coverage(done / len(pool))
        if done < len(pool):
            budget.mark_partial(f"timebox ended after the cross-encoder rescored {done} of "
                                f"{len(pool)} candidates ({len(scores)} passages)")
        return hits

    def _hits(self, text: str, members, scores, budget: Budget) -> list[Hit]:
        ranked = sorted(((scores[key], i, span, key) for i, (span, key) in enumerate(members)
                         if key in scores), key=lambda t: (-t[0], t[1]))
        return [Hit.single(self.name, span, rank=rank, score=score, score_kind=SCORE_KIND,
                           query={"text": text},
                           details={"passage": [key[1], key[2]], "model": self.model_id})
                for rank, (score, _, span, key) in enumerate(ranked[: budget.pool], start=1)]
