"""The anytime orchestrator: runs the selected layers under the caller's timebox.

Generate layers start first, cheapest first, concurrently; at the deadline the call returns with
whatever is done. Refine layers then rescore the merged candidate pool in the time left. Every
selected layer appears in the report as ran / aborted / skipped / failed, with reason,
contributions, elapsed time and coverage. Fusion is the caller's choice (``lar.fusion.policies``).
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lar.core.errors import ConfigError, LarError, LayerFailedError
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.policies import POLICIES, fuse
from lar.core.background import background_from
from lar.fusion.probe import probe_runs, with_probe
from lar.core.layer import Budget, Candidate, ScopeView
from lar.core.request import pool_size
from lar.fusion.grouping import group_hits, merged_hit, runs_for_fusion
from lar.core.types import Hit, LayerRun, RunState

# Layers get the deadline minus this margin so they can return partial results themselves; a
# layer still running at the real deadline is cancelled.
LAYER_MARGIN = 0.004
# how long (fraction of the timebox) an ``early_candidates`` layer waits for the cheap layers
EARLY_WAIT = 0.2


@dataclass
class _Outcome:
    name: str
    role: str
    hits: list[Hit]
    run: LayerRun
    finished_at: float | None = None


def covers_part(run: LayerRun) -> bool:
    """A run whose list comes from part of the scope: the timebox cut it short, or it is a
    building layer that answered from the units it has built so far (coverage below 1)."""
    return run.state is RunState.ABORTED or (run.coverage is not None and run.coverage < 1.0)


def _role(layer) -> str:
    return "generate" if "generate" in layer.roles else "refine"


async def _run_layer(name, layer, query, scope, budget: Budget, role, candidates=None,
                     ready=None, early=None) -> _Outcome:
    t0 = time.monotonic()
    try:
        if ready is not None:  # building layers wait for the shared change detection
            await asyncio.shield(ready)
        if early is not None:  # a scanning layer starts with the cheap layers' candidates
            candidates = await early()
        hits = await layer.search(query, scope, budget, candidates)
        hits = list(hits or [])
        for h in hits:
            if name not in h.signals:
                raise LarError(f"layer {name!r} returned a hit without its own signal")
        partial = bool(budget.notes.get("partial"))
        state = RunState.ABORTED if partial else RunState.RAN
        reason = budget.notes.get("warning", "")  # e.g. corrupt artefacts dropped and queued
        if partial:
            reason = "; ".join(x for x in (budget.notes.get("truncated")
                                           or "timebox ended; returned partial results", reason) if x)
        probe = budget.notes.get("probe")  # a layer's own probe features (e.g. hubness)
        if budget.notes.get("background") is not None:  # its scores' background (lar.core.background)
            probe = {**(probe or {}), "background": budget.notes["background"]}
        run = LayerRun(name, state, reason, len(hits), time.monotonic() - t0, budget.coverage, role, query,
                       probe=probe)
        return _Outcome(name, role, hits, run, time.monotonic())
    except asyncio.CancelledError:
        hits = [h for h in budget.offered if name in h.signals]
        reason = "timebox ended before it finished"
        if hits:
            reason += f"; kept the {len(hits)} hits it had offered"
        run = LayerRun(name, RunState.ABORTED, reason, len(hits), time.monotonic() - t0,
                       budget.coverage, role, query)
        return _Outcome(name, role, hits, run, time.monotonic() if hits else None)
    except LarError as exc:
        run = LayerRun(name, RunState.FAILED, str(exc), 0, time.monotonic() - t0, None, role, query)
        return _Outcome(name, role, [], run)
    except Exception as exc:  # a broken layer must not break the call
        msg = f"layer {name!r} crashed: {type(exc).__name__}: {exc}"
        run = LayerRun(name, RunState.FAILED, msg, 0, time.monotonic() - t0, None, role, query)
        return _Outcome(name, role, [], run)


async def _run_phase(jobs, deadline: float) -> list[_Outcome]:
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
        await asyncio.wait(pending)  # each _run_layer turns cancellation into an aborted run
    return [t.result() for t in tasks]


async def orchestrate(
    query: Any,
    layers: Sequence[tuple[str, Any]],
    scope: ScopeView,
    *,
    timebox: float,
    k: int,
    emphasis: str,
    fusion: str,
    rrf_c: float,
    strict: bool,
    skipped: Sequence[LayerRun] = (),
    prepare=None,
    fusion_model: Any = None,
    partial_guard: bool = True,
    by_unit: bool = True,
) -> dict[str, Any]:
    t0 = time.monotonic()
    deadline = t0 + timebox
    if fusion not in POLICIES:
        raise ConfigError(f"unknown fusion policy {fusion!r}; choose one of {', '.join(POLICIES)}")
    pool = pool_size(k, emphasis)
    runs: dict[str, LayerRun] = {r.name: r for r in skipped}
    per_query: dict[str, Any] = {}
    gen, ref = [], []
    for name, layer in layers:
        if isinstance(query, Mapping):
            q = query[name]
        else:
            q = layer.default_query(query) if hasattr(layer, "default_query") else query
            if q is None:  # e.g. a structural layer: free text is not an ast-grep pattern
                runs[name] = LayerRun(name, RunState.SKIPPED, "plain text is not this layer's query "
                                      "form; use the mapping form {layer: query}", role=_role(layer))
                continue
        per_query[name] = q
        try:
            applies = layer.applies(scope)
        except Exception as exc:
            runs[name] = LayerRun(name, RunState.FAILED, f"applies() crashed: {exc}", role=_role(layer))
            continue
        if not applies:
            why = getattr(layer, "why_not", None)
            try:
                reason = (why(scope) if callable(why) else None) or "does not apply to this scope"
            except Exception:  # a reason is a courtesy; a broken one must not fail the search
                reason = "does not apply to this scope"
            runs[name] = LayerRun(name, RunState.SKIPPED, reason, role=_role(layer))
            continue
        (gen if "generate" in layer.roles else ref).append((name, layer))
    gen.sort(key=lambda t: getattr(t[1], "cost_rank", 50))
    ref.sort(key=lambda t: getattr(t[1], "cost_rank", 50))

    first_result: list[float] = []

    def budget() -> Budget:
        return Budget(deadline - LAYER_MARGIN, pool=pool)

    ready = asyncio.ensure_future(prepare()) if prepare is not None else None

    def needs(layer):
        return ready if ready is not None and not getattr(layer, "always_current", True) else None

    # Layers with ``early_candidates`` (an exact scan that can order its work) wait for the
    # always-current generate layers (at most EARLY_WAIT of the timebox) and get their fused hits
    # as candidates: those units are scanned first.
    cheap = [n for n, l in gen if getattr(l, "always_current", True)]
    cheap_hits: dict[str, list[Hit]] = {}
    cheap_done = asyncio.Event()
    if not cheap:
        cheap_done.set()

    def note_cheap(o: _Outcome) -> _Outcome:
        if o.name in cheap:
            if o.hits:
                cheap_hits[o.name] = o.hits
            cheap.remove(o.name)
            if not cheap:
                cheap_done.set()
        return o

    async def tracked(job):
        return note_cheap(await job)

    async def early() -> list[Candidate]:
        try:
            await asyncio.wait_for(cheap_done.wait(), timeout=max(0.0, EARLY_WAIT * timebox))
        except asyncio.TimeoutError:
            pass
        got = dict(cheap_hits)
        if not got:
            return []
        groups = group_hits(got)
        items = fuse("rrf", runs_for_fusion(groups, got), k=pool, c=rrf_c)
        by_key = {g.key: g for g in groups}
        return [Candidate(by_key[it.key].span, None) for it in items]

    outcomes = await _run_phase(
        [tracked(_run_layer(n, l, per_query[n], scope, budget(), "generate", ready=needs(l),
                            early=early if getattr(l, "early_candidates", False) else None))
         for n, l in gen],
        deadline)
    per_layer: dict[str, list[Hit]] = {}
    for o in outcomes:
        runs[o.name] = o.run
        if o.hits:
            per_layer[o.name] = o.hits
            if o.finished_at is not None:
                first_result.append(o.finished_at - t0)

    if ref:
        groups = group_hits(per_layer)
        pool_items = fuse("rrf", runs_for_fusion(groups, per_layer), k=pool, c=rrf_c) if groups else []
        by_key = {g.key: g for g in groups}
        candidates = [Candidate(by_key[it.key].span, None) for it in pool_items]
        jobs = []
        for n, l in ref:
            if not candidates:
                runs[n] = LayerRun(n, RunState.SKIPPED, "no candidates to refine (no generate layer found any)",
                                   role="refine", query=per_query[n])
            elif time.monotonic() >= deadline - LAYER_MARGIN:
                runs[n] = LayerRun(n, RunState.SKIPPED, "no time left in the timebox for refinement",
                                   role="refine", query=per_query[n])
            else:
                jobs.append(_run_layer(n, l, per_query[n], scope, budget(), "refine", candidates,
                                       ready=needs(l)))
        for o in await _run_phase(jobs, deadline):
            runs[o.name] = o.run
            if o.hits:
                per_layer[o.name] = o.hits
                if o.finished_at is not None:
                    first_result.append(o.finished_at - t0)

    if strict:
        failed = [r for r in runs.values() if r.state is RunState.FAILED]
        if failed:
            raise LayerFailedError("; ".join(r.reason for r in failed))

    groups = group_hits(per_layer)
    fused, probes, weights, fits, fruns = [], {}, {}, {}, {}
    if groups:
        fruns = runs_for_fusion(groups, per_layer)
        if fusion == "adaptive":
            # a run that saw part of the scope weighs by how much of the complete lists it scored
            cut = [n for n in fruns if n in runs and covers_part(runs[n])] if partial_guard else []
            backgrounds = {n: (runs[n].probe or {}).get("background") for n in fruns if n in runs}
            units = {g.key: g.span.hash for g in groups} if by_unit else None
            fused, probes, weights, fits = adaptive_fusion(fruns, k=k, model=fusion_model, c=rrf_c,
                                                           partial=cut, backgrounds=backgrounds, units=units)
        else:
            fused = fuse(fusion, fruns, k=k, c=rrf_c)
            probes, fits = probe_runs(fruns)
    by_key = {g.key: g for g in groups}
    hits = [with_probe(merged_hit(by_key[it.key], dict(it.ranks)), fits) for it in fused]
    for name, probe in probes.items():
        if name in runs:
            info = {**(runs[name].probe or {}), **probe.to_dict()}
            if name in weights:
                info["weight"] = round(weights[name], 4)
            bg = background_from(info.get("background"))
            if bg is not None and fruns.get(name):  # its best hit, in sds above the whole scan
                info["top_z"] = round(bg.z(max(s for _, s in fruns[name])), 4)
            runs[name] = dataclasses.replace(runs[name], probe=info)
    order = [n for n, _ in layers]
    ordered_runs = [runs[n] for n in order if n in runs] + [r for n, r in runs.items() if n not in order]
    prep = None
    if ready is not None:
        if ready.done() and not ready.cancelled() and ready.exception() is None:
            prep = ready.result()
        elif not ready.done():
            ready.cancel()
    return {
        "hits": hits,
        "candidates": [g.span.hash for g in groups],
        "prepare": prep,
        "runs": ordered_runs,
        "first_result": min(first_result) if first_result else None,
        "pool": {n: len(h) for n, h in per_layer.items()},
        "started": t0,
    }
