"""Rank fusion: combine the best-first candidate lists of several routes (layers) into one.

Every function here is pure.  Its input is ``runs``: for each route name, that route's
candidates best-first as ``(key, raw score)`` pairs, keys being any hashable value.  Its
output is a list of :class:`FusedItem`, best first, cut to ``k`` items (``k=None``: all).

Policies (see :data:`POLICIES`):

* ``"rrf"`` - reciprocal rank fusion, ``score = sum over routes of 1 / (c + rank)``.
* ``"route-unique"`` - an RRF core plus, for every route that found anything,
  its best candidate not already selected, so that no route is crowded out of the top ``k``.
* ``"combsum"`` / ``"combmnz"`` - sum of per-route normalised scores (times the number of
  routes that found the key, for CombMNZ).
* ``"pvalue"`` - CombSUM of each route's evidence ``-ln p`` (:mod:`lar.probe`: the score read
  against the route's own background fit for this query); a route without signal adds nothing.
* ``"adaptive"`` - the engine's default (:data:`DEFAULT_POLICY`): the same evidence, weighted per
  route and query by the probe features and a fitted :class:`lar.fusion_adaptive.FusionModel`
  (``model=``; the packaged one by default); RRF when no route has signal.

A key listed twice in one route keeps its first (best) position; later copies are ignored and
ranks are positions in the route's list of distinct keys.  Ties are broken deterministically:
higher score, then more routes, then best single rank, then first appearance (routes in the
order of ``runs``, each route best-first).
"""
from __future__ import annotations

import math
import numbers
import statistics
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Hashable, Mapping, Sequence

from lar.errors import ConfigError

Key = Hashable
Runs = Mapping[str, Sequence[tuple[Key, float]]]

POLICIES: tuple[str, ...] = ("route-unique", "rrf", "combsum", "combmnz", "adaptive", "pvalue")
NORMS: tuple[str, ...] = ("minmax", "zscore", "tailz", "rank", "pvalue", "none")
SLOTS: tuple[str, ...] = ("core", "route-unique", "fill")
DEFAULT_C = 60.0
# how many leading keys of each finished route a cut-short route is checked against
PARTIAL_DEPTH = 10
# the engine's policy when a search names none (config "fusion" overrides it); chosen by the
# evaluation harness on the development splits (benchmarks/results/, README "Fusion and probing")
DEFAULT_POLICY = "adaptive"


@dataclass(frozen=True, slots=True)
class FusedItem:
    """One fused candidate.

    ``ranks`` maps each route that found ``key`` to its 1-based rank there; ``routes`` lists
    those routes in the order of ``runs``; ``slot`` says how it got into the result:
    ``"core"`` (by fused score), ``"route-unique"`` (a route's best not-yet-selected
    candidate) or ``"fill"`` (remaining room, by fused score).
    """

    key: Key
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    routes: tuple[str, ...] = ()
    slot: str = "core"

    def __post_init__(self) -> None:
        if self.slot not in SLOTS:
            raise ConfigError(f"FusedItem.slot must be one of {', '.join(SLOTS)}; got {self.slot!r}")
        object.__setattr__(self, "ranks", MappingProxyType(dict(self.ranks)))
        object.__setattr__(self, "routes", tuple(self.routes))


# -- validation -------------------------------------------------------------------------------
def _check_k(k: object) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be None (keep all) or an integer >= 1; got {k!r}")
    return k


def _check_c(c: object) -> float:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c <= 0:
        raise ConfigError(f"the RRF constant c must be a finite number > 0 (usually 60); got {c!r}")
    return float(c)


def _check_norm(norm: object) -> str:
    if norm not in NORMS:
        raise ConfigError(f"unknown score normalisation {norm!r}; valid choices: {', '.join(NORMS)}")
    return norm  # type: ignore[return-value]


# -- the candidate table ----------------------------------------------------------------------
@dataclass(slots=True)
class _Cand:
    key: Key
    order: int
    ranks: dict[str, int] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class _Table:
    routes: list[str]
    cands: dict[Key, _Cand]
    route_keys: dict[str, list[Key]]


def _collect(runs: Runs) -> _Table:
    """Validate ``runs`` and index it: one entry per distinct key, in first-appearance order."""
    if not isinstance(runs, Mapping):
        raise ConfigError(f"runs must be a mapping of route name -> [(key, score), ...]; got {type(runs).__name__}")
    table = _Table(routes=list(runs), cands={}, route_keys={})
    for route, items in runs.items():
        if not isinstance(route, str):
            raise ConfigError(f"route names must be strings; got {route!r}")
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise ConfigError(f"route {route!r}: candidates must be a sequence of (key, score) pairs")
        keys: list[Key] = []
        for pos, item in enumerate(items):
            try:
                key, score = item
                hash(key)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"route {route!r}, position {pos + 1}: expected a (hashable key, score) pair; got {item!r}"
                ) from None
            if isinstance(score, bool) or not isinstance(score, numbers.Real) or math.isnan(score):
                raise ConfigError(f"route {route!r}, key {key!r}: score must be a number; got {score!r}")
            cand = table.cands.get(key)
            if cand is None:
                cand = table.cands[key] = _Cand(key, len(table.cands))
            if route in cand.ranks:  # duplicate within the route: keep the first (best)
                continue
            keys.append(key)
            cand.ranks[route] = len(keys)
            cand.raw[route] = float(score)
        table.route_keys[route] = keys
    return table


def _ordered(table: _Table, scores: Mapping[Key, float]) -> list[_Cand]:
    """Candidates best first: higher score, more routes, best single rank, first appearance."""
    return sorted(
        table.cands.values(),
        key=lambda c: (-scores[c.key], -len(c.ranks), min(c.ranks.values()), c.order),
    )


def _item(table: _Table, cand: _Cand, score: float, slot: str) -> FusedItem:
    routes = tuple(r for r in table.routes if r in cand.ranks)
    return FusedItem(cand.key, score, {r: cand.ranks[r] for r in routes}, routes, slot)


def _rrf_scores(table: _Table, c: float) -> dict[Key, float]:
    # fsum is correctly rounded, so equal rank sets give bit-equal scores whatever the order.
    return {key: math.fsum(1.0 / (c + r) for r in cand.ranks.values()) for key, cand in table.cands.items()}


# -- policies ---------------------------------------------------------------------------------
def rrf(runs: Runs, k: int | None = None, c: float = DEFAULT_C) -> list[FusedItem]:
    """Reciprocal rank fusion: ``score(key) = sum over routes that found it of 1 / (c + rank)``."""
    k = _check_k(k)
    c = _check_c(c)
    table = _collect(runs)
    scores = _rrf_scores(table, c)
    ordered = _ordered(table, scores)[:k]
    return [_item(table, cand, scores[cand.key], "core") for cand in ordered]


def route_unique(runs: Runs, k: int | None, c: float = DEFAULT_C) -> list[FusedItem]:
    """RRF core plus each route's best unselected candidate, all within ``k`` items.

    With ``n`` routes that found anything: the top ``max(0, k - n)`` RRF items form the core;
    then each route in ``runs`` order, while fewer than ``k`` are selected, adds its best-ranked
    candidate not yet selected; remaining room is filled in RRF order.  The result lists the
    core first (RRF order), then the route-unique and fill items in RRF order.  Scores are RRF
    scores.  ``k=None`` selects every candidate.
    """
    k = _check_k(k)
    c = _check_c(c)
    table = _collect(runs)
    scores = _rrf_scores(table, c)
    ordered = _ordered(table, scores)
    limit = len(ordered) if k is None else k
    n = sum(1 for keys in table.route_keys.values() if keys)

    slot: dict[Key, str] = {cand.key: "core" for cand in ordered[: max(0, limit - n)]}
    for route in table.routes:
        if len(slot) >= limit:
            break
        best = next((key for key in table.route_keys[route] if key not in slot), None)
        if best is not None:
            slot[best] = "route-unique"
    for cand in ordered:
        if len(slot) >= limit:
            break
        slot.setdefault(cand.key, "fill")

    core = [cand for cand in ordered if slot.get(cand.key) == "core"]
    rest = [cand for cand in ordered if slot.get(cand.key) in ("route-unique", "fill")]
    return [_item(table, cand, scores[cand.key], slot[cand.key]) for cand in core + rest]


def _normalise(table: _Table, route: str, norm: str) -> dict[Key, float]:
    """Per-route normalised scores of that route's distinct keys."""
    keys = table.route_keys[route]
    if norm == "rank":
        return {key: 1.0 / table.cands[key].ranks[route] for key in keys}
    if norm == "pvalue":
        from lar.probe import fit_tail

        fit, _ = fit_tail([table.cands[key].raw[route] for key in keys])
        if fit is None:  # no signal in this route for this query
            return {key: 0.0 for key in keys}
        return {key: fit.evidence(table.cands[key].raw[route]) for key in keys}
    raw = {key: table.cands[key].raw[route] for key in keys}
    bad = [key for key, s in raw.items() if not math.isfinite(s)]
    if bad:
        raise ConfigError(
            f"route {route!r}: score of {bad[0]!r} is not finite, which norm={norm!r} cannot use; "
            "use norm='rank' or give finite scores"
        )
    if norm == "none" or not raw:
        return raw
    values = list(raw.values())
    if norm == "tailz":
        from lar.probe import background_z

        mean, std = background_z(values)
        if std == 0:
            return {key: 0.0 for key in raw}
        return {key: (s - mean) / std for key, s in raw.items()}
    if norm == "minmax":
        lo, hi = min(values), max(values)
        if hi == lo:
            return {key: 1.0 for key in raw}
        return {key: (s - lo) / (hi - lo) for key, s in raw.items()}
    # zscore, population standard deviation; a constant route contributes 0 to every key
    mean = statistics.fmean(values)
    std = statistics.pstdev(values, mean)
    if std == 0:
        return {key: 0.0 for key in raw}
    return {key: (s - mean) / std for key, s in raw.items()}


def _comb(runs: Runs, k: int | None, norm: str, mnz: bool) -> list[FusedItem]:
    k = _check_k(k)
    norm = _check_norm(norm)
    table = _collect(runs)
    parts: dict[Key, list[float]] = {key: [] for key in table.cands}
    for route in table.routes:
        for key, value in _normalise(table, route, norm).items():
            parts[key].append(value)
    scores = {key: math.fsum(vals) * (len(vals) if mnz else 1) for key, vals in parts.items()}
    ordered = _ordered(table, scores)[:k]
    return [_item(table, cand, scores[cand.key], "core") for cand in ordered]


def combsum(runs: Runs, k: int | None = None, norm: str = "minmax") -> list[FusedItem]:
    """CombSUM: sum over routes of the key's normalised score (``norm`` one of :data:`NORMS`).

    ``"minmax"`` maps a route's scores onto [0, 1] (all equal: 1.0 each); ``"zscore"`` uses the
    route's mean and population standard deviation (all equal: 0.0 each); ``"tailz"`` is the
    z-score against the list's background (ranks from :data:`lar.probe.R0` on, see
    :func:`lar.probe.background_z`), so a hit reads as "standard deviations above the
    unremarkable bulk"; ``"rank"`` is
    ``1 / rank``; ``"none"`` keeps raw scores.
    """
    return _comb(runs, k, norm, mnz=False)


def combmnz(runs: Runs, k: int | None = None, norm: str = "minmax") -> list[FusedItem]:
    """CombMNZ: the CombSUM score times the number of routes that found the key."""
    return _comb(runs, k, norm, mnz=True)


def partial_factors(runs: Runs, partial, depth: int = PARTIAL_DEPTH) -> dict[str, float]:
    """For each route in ``partial`` (cut short by the timebox), the share of the complete routes'
    leading keys (the union of their first ``depth``) that it scored: 1 when its partial list
    covers what the finished routes rank first (it reranked the right pool), near 0 when it
    scanned elsewhere. With no complete route to compare against, 1."""
    partial = [r for r in partial if r in runs]
    top = {key for r, items in runs.items() if r not in partial for key, _ in items[:depth]}
    if not top:
        return {r: 1.0 for r in partial}
    return {r: len(top.intersection(key for key, _ in runs[r])) / len(top) for r in partial}


def adaptive_fusion(runs: Runs, k: int | None = None, model=None, c: float = DEFAULT_C,
                    partial=(), backgrounds=None, units: Mapping[Key, Any] | None = None):
    """Query-adaptive fusion (see :mod:`lar.fusion_adaptive`). Returns ``(items, probes,
    weights, fits)``: the fused items, each route's :class:`lar.probe.RouteProbe`, its weight
    and its background fit (None when it has none).

    ``partial`` names routes that saw part of the scope (cut short by the timebox, or a partly
    built index): each one's weight is multiplied by :func:`partial_factors` (how much of the
    complete routes' leading candidates it scored, on the lists fused: units or places), so
    that a half-done scan of the wrong units does not outvote the complete lists. The factor is
    on the route's probe (``partial_factor``).

    ``backgrounds`` (``{route: ScoreBackground or its dict}``, see :mod:`lar.background`) is
    what a ``"bgz"`` model reads each route's scores against; routes without one use ``tailz``.

    ``units`` (``{key: unit}``, e.g. a place's content hash) fuses by object identity: each
    route's list is first reduced to units (a unit at its best key in that route), the probes,
    scales and weights are read from those lists, and a unit that stands out in several routes
    gets their combined evidence even when each route found it at a different place. The unit's
    best key (the highest score of the key-level fusion with the same weights) carries the
    unit's score; its other keys keep their own score, capped at the unit's, so they do not
    crowd the top. This is what ``python -m evals fit`` fits on (one document = one unit).
    Keys missing from ``units`` are their own unit."""
    from lar.fusion_adaptive import load_model

    k = _check_k(k)
    table = _collect(runs)
    model = load_model(model)
    dedup = {r: [(key, table.cands[key].raw[r]) for key in table.route_keys[r]] for r in table.routes}
    if units is not None:  # falls back to places when no route's unit list carries signal
        from lar.fusion_units import by_unit, unit_scores

        lists = {r: by_unit(items, units) for r, items in dedup.items()}
        probes, fits, weights, live = _weigh(lists, model, partial, backgrounds)
        if live:
            scores = unit_scores(table, dedup, units, live, weights, model.norm, backgrounds)
            return _fused(table, scores, k), probes, weights, fits
    probes, fits, weights, live = _weigh(dedup, model, partial, backgrounds)
    if not live:
        return rrf(runs, k, c), probes, weights, fits
    scores = {key: math.fsum(w * vals.get(key, floor) for _, w, vals, floor in live) for key in table.cands}
    return _fused(table, scores, k), probes, weights, fits


def _fused(table: _Table, scores: Mapping[Key, float], k: int | None) -> list[FusedItem]:
    return [_item(table, cand, scores[cand.key], "core") for cand in _ordered(table, scores)[:k]]


def _weigh(lists, model, partial, backgrounds):
    """Probes, background fits and weights of ``lists`` (``{route: [(key, score), ...]}``
    distinct keys, best first), and the live routes as ``(route, weight, values, floor)``."""
    from lar.fusion_adaptive import probe_runs, route_values

    probes, fits = probe_runs(lists)
    values = route_values(lists, fits, model.norm, backgrounds)
    weights = {r: model.weights_for(r).weight(probes[r]) for r in lists}
    for r, f in partial_factors(lists, partial).items():  # on the lists it fuses (units or places)
        weights[r] *= f
        probes[r] = replace(probes[r], partial_factor=f)
    live = [(r, weights[r], *values[r]) for r in lists if weights[r] > 0 and r in values]
    return probes, fits, weights, live


def adaptive(runs: Runs, k: int | None = None, model=None, c: float = DEFAULT_C) -> list[FusedItem]:
    """The items of :func:`adaptive_fusion`."""
    return adaptive_fusion(runs, k, model, c)[0]


def fuse(
    policy: str,
    runs: Runs,
    k: int | None = None,
    c: float = DEFAULT_C,
    *,
    norm: str = "minmax",
    model=None,
    units: Mapping[Key, Any] | None = None,
) -> list[FusedItem]:
    """Fuse ``runs`` with ``policy`` (one of :data:`POLICIES`).

    ``c`` is used by ``"rrf"`` and ``"route-unique"`` (and by ``"adaptive"`` when it falls back
    to RRF); ``norm`` by ``"combsum"`` and ``"combmnz"``; ``model`` (a
    :class:`lar.fusion_adaptive.FusionModel`, a mapping or a JSON path; None: the packaged one)
    and ``units`` (``{key: unit}``: fuse by unit, see :func:`adaptive_fusion`) by ``"adaptive"``.
    Empty ``runs`` give ``[]``.
    """
    if policy not in POLICIES:
        raise ConfigError(f"unknown fusion policy {policy!r}; valid policies: {', '.join(POLICIES)}")
    _check_k(k)
    if policy in ("rrf", "route-unique", "adaptive"):
        _check_c(c)
    elif policy != "pvalue":
        _check_norm(norm)
    if isinstance(runs, Mapping) and not runs:
        return []
    if policy == "rrf":
        return rrf(runs, k, c)
    if policy == "route-unique":
        return route_unique(runs, k, c)
    if policy == "combsum":
        return combsum(runs, k, norm)
    if policy == "pvalue":
        return combsum(runs, k, "pvalue")
    if policy == "adaptive":
        return adaptive_fusion(runs, k, model, c, units=units)[0]
    return combmnz(runs, k, norm)


__all__ = [
    "DEFAULT_C",
    "DEFAULT_POLICY",
    "NORMS",
    "POLICIES",
    "SLOTS",
    "FusedItem",
    "Key",
    "adaptive",
    "adaptive_fusion",
    "partial_factors",
    "Runs",
    "combmnz",
    "combsum",
    "fuse",
    "route_unique",
    "rrf",
]
