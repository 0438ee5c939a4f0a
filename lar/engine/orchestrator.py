"""The anytime orchestrator: runs the selected layers under the caller's timebox.

Generate layers start first, cheapest first, concurrently; at the deadline the call returns with
whatever is done. Refine layers then rescore the fused candidate pool in the time left. Every
selected layer appears in the report as ran / aborted / skipped / failed, with reason,
contributions, elapsed time and coverage. Each stage fuses through the one pipeline
(:func:`lar.fusion.pipeline.fuse_hits`): the cheap layers' candidates for a scanning layer, the
pool for the refine layers, and the final ranking with the caller's policy.
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lar.core.building import damage_report
from lar.core.errors import LarError, LayerFailedError
from lar.core.layer import BaseLayer, Budget, Candidate, ScopeView
from lar.core.request import SearchRequest
from lar.core.types import Hit, LayerRun, RunState
from lar.engine import finishing
from lar.fusion.pipeline import FusionSettings, fuse_hits

# Layers get the deadline minus this margin so they can return partial results themselves; a
# layer still running at the real deadline is cancelled.
LAYER_MARGIN = 0.004
# how long (fraction of the timebox) an ``early_candidates`` layer waits for the cheap layers
EARLY_WAIT = 0.2


@dataclass(frozen=True)
class LayerOutcome:
    """One layer's part of a search: its hits, its run report, when it finished, and the
    finisher of its deferred per-hit evidence (``lar.engine.finishing``)."""

    name: str
    hits: tuple[Hit, ...]
    run: LayerRun
    finished_at: float | None = None
    finish: Any = None


@dataclass(frozen=True)
class SearchOutcome:
    """What the orchestrator returns: the fused ``hits``, one ``runs`` entry per layer (the
    caller's order, then any other), the content hashes of every candidate place (for build
    priority), the shared change detection's report, when the first layer answered (seconds
    after ``started``), each layer's pool size and each layer's own list (``layer_hits``)."""

    hits: tuple[Hit, ...]
    runs: tuple[LayerRun, ...]
    candidates: tuple[str, ...]
    prepare: Mapping[str, Any] | None
    first_result: float | None
    pool: Mapping[str, int]
    started: float
    layer_hits: Mapping[str, tuple[Hit, ...]]
    score_scale: str = ""  # the scale of the fused hits' scores (lar.fusion.pipeline.POLICY_SCALES)
    layers_done: float | None = None  # when the layer phases ended (time.monotonic())
    layer_deadline: float | None = None  # the deadline the layers ran under


def role_of(layer: BaseLayer) -> str:
    return "generate" if "generate" in layer.roles else "refine"


def run_order(layers: Sequence[tuple[str, BaseLayer]]) -> list[tuple[str, BaseLayer]]:
    """The order layers run and are fused in: generate layers by cost, then refine layers by
    cost (stable: the caller's order breaks ties)."""
    return sorted(layers, key=lambda t: (role_of(t[1]) != "generate", t[1].cost_rank))


def _report_run(name: str, role: str, query: Any, budget: Budget, hits: list[Hit], t0: float) -> LayerRun:
    report = budget.report()
    probe = dict(report.probe) or None  # the layer's own probe features (e.g. hubness)
    if report.background is not None:  # its scores' background (lar.core.background)
        probe = {**(probe or {}), "background": report.background.to_dict()}
    return LayerRun(name, RunState.ABORTED if report.partial else RunState.RAN, report.reason(),
                    len(hits), time.monotonic() - t0, budget.coverage, role, query, probe=probe,
                    notes=report.notes, details=dict(report.details) or None)


async def run_layer(name: str, layer: BaseLayer, query: Any, scope: ScopeView, budget: Budget, role: str,
                    candidates: Sequence[Candidate] | None = None, ready=None, early=None) -> LayerOutcome:
    """Run one layer; whatever happens (a deadline, an error, a crash) becomes its run report."""
    t0 = time.monotonic()
    try:
        if ready is not None:  # building layers wait for the shared change detection
            await asyncio.shield(ready)
        if early is not None:  # a scanning layer starts with the cheap layers' candidates
            candidates = await early()
        hits = list(await layer.search(query, scope, budget, candidates) or [])
        for h in hits:
            if name not in h.signals:
                raise LarError(f"layer {name!r} returned a hit without its own signal")
        run = _report_run(name, role, query, budget, hits, t0)
        return LayerOutcome(name, tuple(hits), run, time.monotonic(), budget.finisher)
    except asyncio.CancelledError:
        hits = [h for h in budget.offered if name in h.signals]
        reason = "timebox ended before it finished"
        if hits:
            reason += f"; kept the {len(hits)} hits it had offered"
        run = LayerRun(name, RunState.ABORTED, reason, len(hits), time.monotonic() - t0,
                       budget.coverage, role, query)
        return LayerOutcome(name, tuple(hits), run, time.monotonic() if hits else None, budget.finisher)
    except LarError as exc:
        run = LayerRun(name, RunState.FAILED, str(exc), 0, time.monotonic() - t0, None, role, query)
        return LayerOutcome(name, (), run)
    except Exception as exc:  # a broken layer must not break the call
        msg = damage_report(layer, exc) or f"layer {name!r} crashed: {type(exc).__name__}: {exc}"
        run = LayerRun(name, RunState.FAILED, msg, 0, time.monotonic() - t0, None, role, query)
        return LayerOutcome(name, (), run)


async def run_phase(jobs, deadline: float) -> list[LayerOutcome]:
    """Run jobs concurrently until all finish or the deadline; cancel the stragglers."""
    tasks = [asyncio.ensure_future(j) for j in jobs]
    if not tasks:
        return []
    timeout = max(0.0, deadline - time.monotonic())
    try:
        done, pending = await asyncio.wait(tasks, timeout=timeout)
    except asyncio.CancelledError:  # the caller gave up: stop the layers (and their processes)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending)  # each run_layer turns cancellation into an aborted run
    return [t.result() for t in tasks]


def plan(query: Any, layers: Sequence[tuple[str, BaseLayer]], scope: ScopeView, runs: dict[str, LayerRun]
         ) -> tuple[list[tuple[str, BaseLayer]], list[tuple[str, BaseLayer]], dict[str, Any]]:
    """The generate and refine layers that run (in :func:`run_order`) and each one's query;
    layers that cannot run get their skipped or failed run in ``runs``."""
    per_query: dict[str, Any] = {}
    gen, ref = [], []
    for name, layer in run_order(layers):
        if isinstance(query, Mapping):
            q = query[name]
        else:
            q = layer.default_query(query)
            if q is None:  # e.g. a structural layer: free text is not an ast-grep pattern
                runs[name] = LayerRun(name, RunState.SKIPPED, "plain text is not this layer's query "
                                      "form; use the mapping form {layer: query}", role=role_of(layer))
                continue
        per_query[name] = q
        try:
            applies = layer.applies(scope)
        except Exception as exc:
            runs[name] = LayerRun(name, RunState.FAILED, f"applies() crashed: {exc}", role=role_of(layer))
            continue
        if not applies:
            try:
                reason = layer.why_not(scope) or "does not apply to this scope"
            except Exception:  # a reason is a courtesy; a broken one must not fail the search
                reason = "does not apply to this scope"
            runs[name] = LayerRun(name, RunState.SKIPPED, reason, role=role_of(layer))
            continue
        (gen if role_of(layer) == "generate" else ref).append((name, layer))
    return gen, ref, per_query


class CheapCandidates:
    """The always-current generate layers' hits as they come in, fused by RRF into the
    candidates an ``early_candidates`` layer scans first (it waits at most EARLY_WAIT of the
    timebox for them)."""

    def __init__(self, gen: Sequence[tuple[str, BaseLayer]], pool: int, c: float, timebox: float):
        self.waiting = [n for n, layer in gen if layer.always_current]
        self.hits: dict[str, tuple[Hit, ...]] = {}
        self.done = asyncio.Event()
        self.settings = FusionSettings("rrf", k=pool, c=c)
        self.wait_s = max(0.0, EARLY_WAIT * timebox)
        if not self.waiting:
            self.done.set()

    async def track(self, job) -> LayerOutcome:
        o = await job
        if o.name in self.waiting:
            if o.hits:
                self.hits[o.name] = o.hits
            self.waiting.remove(o.name)
            if not self.waiting:
                self.done.set()
        return o

    async def candidates(self) -> list[Candidate]:
        try:
            await asyncio.wait_for(self.done.wait(), timeout=self.wait_s)
        except asyncio.TimeoutError:
            pass
        got = dict(self.hits)
        if not got:
            return []
        return [Candidate(h.span, None) for h in fuse_hits(got, self.settings).hits]


async def orchestrate(request: SearchRequest, layers: Sequence[tuple[str, BaseLayer]], scope: ScopeView, *,
                      timebox: float, settings: FusionSettings, skipped: Sequence[LayerRun] = (),
                      prepare=None, reserve: float = 0.0) -> SearchOutcome:
    """Run ``layers`` for ``request`` within ``timebox`` seconds and fuse with ``settings``.

    The layers run until ``timebox - reserve``: the last ``reserve`` seconds are kept for the
    final fusion and the caller's work on the hits (see :class:`lar.core.timebox.DeadlineReserve`)."""
    t0 = time.monotonic()
    deadline = t0 + max(0.0, timebox - max(0.0, reserve))
    pool = request.pool
    runs: dict[str, LayerRun] = {r.name: r for r in skipped}
    gen, ref, per_query = plan(request.query, layers, scope, runs)
    ready = asyncio.ensure_future(prepare()) if prepare is not None else None

    def budget() -> Budget:
        return Budget(deadline - LAYER_MARGIN, pool=pool, deferred=finishing.DEFER)

    def needs(layer: BaseLayer):
        return ready if ready is not None and not layer.always_current else None

    per_layer: dict[str, tuple[Hit, ...]] = {}
    finishers: dict[str, Any] = {}
    first_result: list[float] = []

    def record(outcomes: Sequence[LayerOutcome]) -> None:
        for o in outcomes:
            runs[o.name] = o.run
            if o.hits:
                per_layer[o.name] = o.hits
                if o.finish is not None:
                    finishers[o.name] = o.finish
                if o.finished_at is not None:
                    first_result.append(o.finished_at - t0)

    cheap = CheapCandidates(gen, pool, request.rrf_c, timebox)
    record(await run_phase(
        [cheap.track(run_layer(n, layer, per_query[n], scope, budget(), "generate", ready=needs(layer),
                               early=cheap.candidates if layer.early_candidates else None))
         for n, layer in gen],
        deadline))

    if ref:
        pooled = fuse_hits(per_layer, FusionSettings("rrf", k=pool, c=request.rrf_c))
        candidates = [Candidate(h.span, None) for h in pooled.hits]
        jobs = []
        for n, layer in ref:
            if not candidates:
                runs[n] = LayerRun(n, RunState.SKIPPED, "no candidates to refine (no generate layer found any)",
                                   role="refine", query=per_query[n])
            elif time.monotonic() >= deadline - LAYER_MARGIN:
                runs[n] = LayerRun(n, RunState.SKIPPED, "no time left in the timebox for refinement",
                                   role="refine", query=per_query[n])
            else:
                jobs.append(run_layer(n, layer, per_query[n], scope, budget(), "refine", candidates,
                                      ready=needs(layer)))
        record(await run_phase(jobs, deadline))

    layers_done = time.monotonic()
    if request.strict:
        failed = [r for r in runs.values() if r.state is RunState.FAILED]
        if failed:
            raise LayerFailedError("; ".join(r.reason for r in failed))

    fused = fuse_hits(per_layer, settings, runs)
    for name, info in fused.report.routes.items():
        if name in runs:
            runs[name] = dataclasses.replace(runs[name], probe={**(runs[name].probe or {}), **info})
    order = [n for n, _ in layers]
    ordered_runs = [runs[n] for n in order if n in runs] + [r for n, r in runs.items() if n not in order]
    return SearchOutcome(
        hits=finishing.finish_fused(fused.hits, fused.groups, finishers), runs=tuple(ordered_runs), candidates=tuple(g.span.hash for g in fused.groups),
        prepare=_prepared(ready), first_result=min(first_result) if first_result else None,
        pool={n: len(h) for n, h in per_layer.items()}, started=t0, layer_hits=dict(per_layer),
        score_scale=fused.scale, layers_done=layers_done, layer_deadline=deadline)


def _prepared(ready) -> Mapping[str, Any] | None:
    """The shared change detection's report when it finished in time (else it is cancelled)."""
    if ready is None:
        return None
    if ready.done() and not ready.cancelled() and ready.exception() is None:
        return ready.result()
    if not ready.done():
        ready.cancel()
    return None


__all__ = ["EARLY_WAIT", "LAYER_MARGIN", "LayerOutcome", "SearchOutcome", "orchestrate", "role_of",
           "run_layer", "run_order", "run_phase"]
