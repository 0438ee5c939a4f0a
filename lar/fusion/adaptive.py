"""Query-adaptive fusion, the engine's default: each route's weight follows what its own list
says about this query.

Every route's scores are first put on one scale by the model's normalisation (``norm``, see
:func:`lar.fusion.scales.route_values`). A key's fused score is

    sum over routes r of  w_r(q) * value_r(key)

where a key a route did not list gets that route's lowest value (it fell below the route's cut),
and ``w_r(q)`` comes from the route's probe features and the fitted :class:`FusionModel`
(:mod:`lar.fusion.model`). With no route carrying signal it falls back to RRF.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from lar.fusion.coverage import coverage_factors, coverages, weighted_rrf_scores
from lar.fusion.decide import decided_order, followed, in_list_order, kind, pins, signature
from lar.fusion.model import load_model
from lar.fusion.partial import guarded_scores, positional_scores
from lar.fusion.probe import probe_runs
from lar.fusion.rrf import DEFAULT_C, check_c, rrf
from lar.fusion.scales import route_values
from lar.fusion.table import Key, Runs, by_score, check_k, collect, ordered
from lar.fusion.units import by_unit, unit_scores

# how many leading keys of each finished route a cut-short route is checked against
PARTIAL_DEPTH = 10
# a cut-short route re-sorts the keys it scored only when it orders at least this share of the
# pairs of the cheap stage's leading keys (its first CONCORDANCE_DEPTH) it scored as the cheap
# stage does, counting CONCORDANCE_PRIOR pseudo-pairs at one half (else the finished routes'
# order stands: a partial scan that contradicts them, or scored too few of them to tell,
# cannot pull below them)
PARTIAL_CONCORDANCE = 0.7
CONCORDANCE_DEPTH = 20
CONCORDANCE_PRIOR = 4.0


def concordance(order, values, prior: float = 0.0) -> float:
    """Share of the pairs of ``order``'s keys that ``values`` (``{key: value}``) scored which it
    orders as ``order`` does (ties count half); 1 with fewer than two such keys and no
    ``prior``. ``prior`` pseudo-pairs at one half are added (a share read from one or two
    pairs is a coin toss, not agreement: with ``prior`` 4, one concordant pair reads 0.6)."""
    scored = [values[key] for key in order if key in values]
    pairs = [(a, b) for i, a in enumerate(scored) for b in scored[i + 1:]]
    if not pairs and not prior:
        return 1.0
    agree = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs)
    return (agree + 0.5 * prior) / (len(pairs) + prior)


def partial_factors(runs: Runs, partial, depth: int = PARTIAL_DEPTH) -> dict[str, float]:
    """For each route in ``partial`` (cut short by the timebox or partly built: names, or
    ``{route: coverage}``), its weight factor (:func:`lar.fusion.coverage.coverage_factors`):
    the share of the complete routes' leading keys (the union of their first ``depth``) that it
    scored, never below its coverage squared when that is known: 1 when its partial list covers
    what the finished routes rank first (it reranked the right pool), near its coverage when it
    scanned elsewhere. With no complete route to compare against, its coverage squared (1 when
    not known)."""
    return coverage_factors({r: items for r, items in runs.items()}, partial, depth)


def adaptive_fusion(runs: Runs, k: int | None = None, model=None, c: float = DEFAULT_C,
                    partial=(), backgrounds=None, units: Mapping[Key, Any] | None = None,
                    guard_slots: bool = True):
    """Query-adaptive fusion. Returns ``(items, probes, weights, fits)``: the fused items, each
    route's :class:`lar.fusion.probe.RouteProbe`, its weight and its background fit (None when
    it has none).

    ``partial`` names routes that saw part of the scope (cut short by the timebox, or a partly
    built index): each one's weight is multiplied by :func:`partial_factors` (how much of the
    complete routes' leading candidates it scored, on the lists fused: units or places), so
    that a half-done scan of the wrong units does not outvote the complete lists. The factor is
    on the route's probe (``partial_factor``). When some route finished, a partial route then
    enters only for the keys it scored (:func:`guarded`, :func:`lar.fusion.partial.guarded_scores`):
    the finished routes' own fusion is the order, keys only partial routes found follow it, and
    each partial route re-sorts the keys it scored among the positions they hold, by the
    finished fusion's score plus its weighted value; every other key keeps its position
    (``guard_slots=False``: the weight factor alone, as before).

    ``backgrounds`` (``{route: ScoreBackground or its dict}``, see :mod:`lar.core.background`)
    is what a ``"bgz"`` model reads each route's scores against; routes without one use ``tailz``.

    ``units`` (``{key: unit}``, e.g. a place's content hash) fuses by object identity: each
    route's list is first reduced to units (a unit at its best key in that route), the probes,
    scales and weights are read from those lists, and a unit that stands out in several routes
    gets their combined evidence even when each route found it at a different place. The unit's
    best key (the highest score of the key-level fusion with the same weights) carries the
    unit's score; its other keys keep their own score, capped at the unit's, so they do not
    crowd the top. This is what ``python -m lar_evals fit`` fits on (one document = one unit).
    Keys missing from ``units`` are their own unit.

    The weights are the model's for the signature of the routes that listed something
    (:func:`lar.fusion.decide.signature`), and the fused order then goes through the model's
    per-query decisions (:func:`decided`: exact-match pins, follow or combine)."""
    k = check_k(k)
    table = collect(runs)
    model = load_model(model)
    dedup = {r: in_list_order(table.distinct(r)) for r in table.routes}
    cut = [r for r in table.routes if r in partial and dedup[r]]
    finished = [r for r in table.routes if r not in partial and dedup[r]]
    if guard_slots and cut and finished:
        return guarded(runs, table, dedup, k, model, c, partial, finished, backgrounds, units)
    if guard_slots and len(cut) > 1:  # nothing finished: the best covered routes stand in for it
        factors = partial_factors(dedup, partial)
        lead = [r for r in cut if factors[r] >= max(factors.values())]
        if len(lead) < len(cut):
            cov = coverages(partial)
            rest = {r: cov[r] for r in cut if r not in lead}
            return guarded(runs, table, dedup, k, model, c, rest, lead, backgrounds, units,
                           lead_partial={r: cov[r] for r in lead})
    sig = signature(r for r in table.routes if dedup[r])
    if units is not None:  # falls back to places when no route's unit list carries signal
        lists = {r: by_unit(items, units) for r, items in dedup.items()}
        probes, fits, weights, live = weigh(lists, model, partial, backgrounds, sig)
        if live:
            scores = unit_scores(table, dedup, units, live, weights, model.norm, backgrounds, lists, fits)
            return decided(table, scores, k, model, dedup, probes, weights, partial), probes, weights, fits
    probes, fits, weights, live = weigh(dedup, model, partial, backgrounds, sig)
    if not live:
        factors = partial_factors(dedup, partial) if cut else {}
        if not factors and not pins(dedup, model.exact, partial):
            return rrf(runs, k, c), probes, weights, fits
        # a partial list counts by its factor (its coverage when nothing finished)
        scores = weighted_rrf_scores(table, factors, check_c(c))
        return decided(table, scores, k, model, dedup, probes, weights, partial), probes, weights, fits
    scores = {key: math.fsum(w * vals.get(key, floor) for _, w, vals, floor in live) for key in table.cands}
    return decided(table, scores, k, model, dedup, probes, weights, partial), probes, weights, fits


def decided(table, scores, k, model, dedup, probes, weights, partial):
    """The fused items of ``scores`` after the model's per-query decisions
    (:mod:`lar.fusion.decide`): the most trusted complete route followed when it stands alone
    (others only breaking its ties), and the keys of short exact-match lists pinned on top.
    Without either, exactly :func:`lar.fusion.table.by_score`."""
    pinned = pins(dedup, model.exact, partial)
    lead = followed({r: w for r, w in weights.items() if r not in partial},
                    {r: p.agreement for r, p in probes.items()}, model.follow)
    if not pinned and lead is None:
        return by_score(table, scores, k)
    order = decided_order([cand.key for cand in ordered(table, scores)], pinned,
                          dict(dedup[lead]) if lead is not None else None)
    return by_score(table, positional_scores(order, scores), k)


def guarded(runs, table, dedup, k, model, c, partial, finished, backgrounds, units, lead_partial=None):
    """Adaptive fusion with cut-short routes entering only for the keys they scored
    (:func:`lar.fusion.partial.guarded_scores`): the finished routes' own fusion is the order,
    each partial route re-sorts its keys among their positions. Probes and weights are those
    of all routes together (the report shows the partial factors).

    ``lead_partial`` (``{route: coverage}``): when no route finished, the best covered partial
    routes play the finished ones (``finished``); they are partial all the same (no exact-match
    pin from their few hits), and the other partial routes are read against them."""
    lead_partial = lead_partial or {}
    cheap = adaptive_fusion({r: runs[r] for r in finished}, None, model, c, lead_partial, backgrounds, units)[0]
    lists = dedup if units is None else {r: by_unit(items, units) for r, items in dedup.items()}
    sig = signature(r for r in table.routes if dedup[r])
    probes, fits, weights, live = weigh(lists, model, partial, backgrounds, sig)
    for r, f in partial_factors({r: lists[r] for r in lead_partial}, lead_partial).items():
        weights[r] *= f  # as reported: the stand-ins are partial too
        probes[r] = replace(probes[r], partial_factor=f)
    unit_of = None if units is None else (lambda key: units.get(key, key))
    top = [it.key if unit_of is None else unit_of(it.key) for it in cheap[:CONCORDANCE_DEPTH]]
    values = [(w, vals, floor) for r, w, vals, floor in live
              if r in partial and concordance(top, vals, CONCORDANCE_PRIOR) >= PARTIAL_CONCORDANCE]
    # keys only partial routes found and no weighted value tells apart follow their lists' ranks,
    # each list counted by its factor (not the order the routes happen to be listed in)
    tie = weighted_rrf_scores(table, {r: max(probes[r].partial_factor or 0.0, 1e-6) for r in table.routes if r in partial}, c)
    keys = sorted(table.cands, key=lambda key: -tie[key])  # stable
    scores = guarded_scores(keys, [(it.key, it.score) for it in cheap], values, unit_of)
    # a partial route cannot unpin what the cheap stage pinned
    pinned = pins(dedup, model.exact, [*partial, *lead_partial])
    if pinned:
        order = decided_order([cand.key for cand in ordered(table, scores)], pinned)
        scores = positional_scores(order, scores)
    return by_score(table, scores, k), probes, weights, fits


def balanced(weights: Mapping[str, float], kinds: Mapping[str, float]) -> dict[str, float]:
    """Each route's weight as its share of its kind's total (``kinds``) among the routes of that
    kind here (five lexical layers together weigh what one would; a weak layer alone gets its
    kind's whole total); a kind not in ``kinds`` keeps its weights."""
    if not kinds:
        return dict(weights)
    sums: dict[str, float] = {}
    for r, w in weights.items():
        sums[kind(r)] = sums.get(kind(r), 0.0) + w
    return {r: (w / sums[kind(r)] * kinds[kind(r)] if kind(r) in kinds and sums[kind(r)] > 0 else w)
            for r, w in weights.items()}


def weigh(lists, model, partial, backgrounds, sig=None):
    """Probes, background fits and weights of ``lists`` (``{route: [(key, score), ...]}``
    distinct keys, best first), and the live routes as ``(route, weight, values, floor)``;
    ``sig``: the signature whose fitted weights apply (None: the model's global ones)."""
    probes, fits = probe_runs(lists)
    weights = balanced({r: model.weights_for(r, sig).weight(probes[r]) for r in lists}, model.kinds)
    for r, f in partial_factors(lists, partial).items():  # on the lists it fuses (units or places)
        weights[r] *= f
        probes[r] = replace(probes[r], partial_factor=f)
    # each route's values depend on its own list only: a route weighted 0 needs none
    values = route_values({r: items for r, items in lists.items() if weights[r] > 0}, fits,
                          model.norm, backgrounds)
    live = [(r, weights[r], *values[r]) for r in lists if weights[r] > 0 and r in values]
    return probes, fits, weights, live


__all__ = ["CONCORDANCE_DEPTH", "CONCORDANCE_PRIOR", "PARTIAL_CONCORDANCE", "PARTIAL_DEPTH", "adaptive_fusion", "balanced", "concordance", "decided", "guarded", "partial_factors", "weigh"]
