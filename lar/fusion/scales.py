"""Putting one route's scores on a scale other routes' scores can be added to.

``normalise`` maps a route's raw scores within the candidate table: ``"minmax"`` onto [0, 1]
(all equal: 1.0 each), ``"zscore"`` by the route's mean and population standard deviation (all
equal: 0.0 each), ``"tailz"`` as z against the list's own background (ranks from
:data:`lar.fusion.probe.R0` on, :func:`lar.fusion.probe.background_z`), ``"rank"`` as
``1 / rank``, ``"pvalue"`` as the evidence ``-ln p`` of the route's background fit, ``"none"``
raw. :func:`route_values` gives the values on a fitted model's scale (adds ``"evidence"`` and
``"bgz"``, z against the layer's own reported background, :mod:`lar.core.background`).
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Mapping

from lar.core.background import background_from
from lar.core.errors import ConfigError
from lar.fusion.probe import background_z, fit_tail
from lar.fusion.table import CandidateTable, Key, collect

NORMS: tuple[str, ...] = ("minmax", "zscore", "tailz", "rank", "pvalue", "none")


def check_norm(norm: object) -> str:
    if norm not in NORMS:
        raise ConfigError(f"unknown score normalisation {norm!r}; valid choices: {', '.join(NORMS)}")
    return norm  # type: ignore[return-value]


def normalise(table: CandidateTable, route: str, norm: str) -> dict[Key, float]:
    """Per-route normalised scores of that route's distinct keys."""
    return normalised({key: table.cands[key].raw[route] for key in table.route_keys[route]}, route, norm)


def distinct_raw(items) -> dict[Key, float] | None:
    """A route's ``[(key, score), ...]`` as ``{key: score}`` in list order, a repeated key keeping
    its first score: what :func:`lar.fusion.table.collect` keeps for it. None unless every item is
    a pair with a float score that is a number (then ``collect`` is the one to read, and check,
    the list)."""
    raw: dict[Key, float] = {}
    try:
        for key, s in items:
            if type(s) is not float or s != s:
                return None
            raw.setdefault(key, s)
    except (TypeError, ValueError):
        return None
    return raw


def normalised(raw: Mapping[Key, float], route: str, norm: str) -> dict[Key, float]:
    """``raw`` (a route's distinct keys best first, each with its raw score) on ``norm``'s scale."""
    if norm == "rank":
        return {key: 1.0 / rank for rank, key in enumerate(raw, 1)}
    if norm == "pvalue":
        fit, _ = fit_tail(list(raw.values()))
        if fit is None:  # no signal in this route for this query
            return {key: 0.0 for key in raw}
        return {key: fit.evidence(s) for key, s in raw.items()}
    raw = dict(raw)
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


def evidence_scores(runs: Mapping[str, Any], fits: Mapping[str, Any]) -> dict[str, dict]:
    """``{route: {key: -ln p}}`` for the routes with a fit."""
    out = {}
    for route, items in runs.items():
        fit = fits.get(route)
        if fit is None:
            continue
        ev = {}
        for key, s in items:
            if key not in ev:
                ev[key] = fit.evidence(s)
        out[route] = ev
    return out


def route_values(runs: Mapping[str, Any], fits: Mapping[str, Any], norm: str = "evidence",
                 backgrounds: Mapping[str, Any] | None = None) -> dict[str, tuple[dict, float]]:
    """``{route: ({key: value}, floor)}`` on the model's scale for the routes with a fit (the
    others carry no signal and drop out); ``floor`` is what a key the route did not list gets.
    ``runs`` must hold distinct keys per route, best first. ``"bgz"`` reads a route's scores as
    z against its ``backgrounds[route]`` (the whole scan's moments, :mod:`lar.core.background`)
    and falls back to ``tailz`` for a route without a usable one."""
    if norm == "evidence":
        return {r: (ev, 0.0) for r, ev in evidence_scores(runs, fits).items()}
    out = {}
    usable = {r: items for r, items in runs.items() if fits.get(r) is not None}
    if not usable:
        return out
    table = None  # built only for a route read on its own list's scale (not needed with "bgz")
    for route in usable:
        bg = background_from((backgrounds or {}).get(route)) if norm == "bgz" else None
        if bg is not None:
            vals = {key: bg.z(s) for key, s in usable[route]}
        else:
            raw = distinct_raw(usable[route])
            if raw is None:
                table = collect(usable) if table is None else table
                raw = {key: table.cands[key].raw[route] for key in table.route_keys[route]}
            vals = normalised(raw, route, "tailz" if norm == "bgz" else norm)
        out[route] = (vals, min(vals.values()) if vals else 0.0)
    return out


__all__ = ["NORMS", "check_norm", "distinct_raw", "evidence_scores", "normalise", "normalised", "route_values"]
