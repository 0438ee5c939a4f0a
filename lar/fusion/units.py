"""Fusion by object identity (:func:`lar.fusion.adaptive.adaptive_fusion` with ``units``): each
route's list reduced to units, and each place's score under the units' fused scores."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from lar.fusion.probe import probe_list
from lar.fusion.scales import route_values
from lar.fusion.table import CandidateTable, Key, ordered


def by_unit(items: Sequence[tuple[Key, float]], units: Mapping[Key, Any]) -> list[tuple[Any, float]]:
    """A route's ``(key, score)`` list, best first, reduced to ``(unit, best score)``."""
    seen: set = set()
    out = []
    for key, score in items:
        unit = units.get(key, key)
        if unit not in seen:
            seen.add(unit)
            out.append((unit, score))
    return out


def key_fits(dedup, unit_lists=None, unit_fits=None) -> dict[str, Any]:
    """Each route's background fit on its key list (what :func:`probe_runs` fits): a fit reads
    the scores only, so a route whose unit list has the same scores reuses the unit list's fit
    (``unit_fits``, fitted on ``unit_lists``) instead of fitting again."""
    out = {}
    for route, items in dedup.items():
        scores = [s for _, s in items]
        if unit_fits is not None and route in unit_fits and \
                [s for _, s in unit_lists[route]] == scores:
            out[route] = unit_fits[route]
        else:
            out[route] = probe_list(route, scores)[1]
    return out


def unit_scores(table: CandidateTable, dedup, units, live, weights, norm, backgrounds,
                unit_lists=None, unit_fits=None) -> dict[Key, float]:
    """Each key's score under unit fusion: the unit's fused score (``live``, read from the unit
    lists) for the unit's best key; for its other keys their own key-level fused score with the
    same weights, kept strictly below the unit's. ``unit_lists`` and ``unit_fits``: the unit
    lists and their fits, when known (see :func:`key_fits`)."""
    unit_score = {}
    for key in table.cands:
        unit = units.get(key, key)
        if unit not in unit_score:
            unit_score[unit] = math.fsum(w * vals.get(unit, floor) for _, w, vals, floor in live)
    fits = key_fits(dedup, unit_lists, unit_fits)
    key_values = route_values({r: items for r, items in dedup.items() if weights[r] > 0}, fits,
                              norm, backgrounds)
    used = [(weights[r], *key_values[r]) for r in dedup if weights[r] > 0 and r in key_values]
    own = {key: math.fsum(w * vals.get(key, floor) for w, vals, floor in used) for key in table.cands}
    best: dict[Any, Key] = {}
    for cand in ordered(table, own):
        best.setdefault(units.get(cand.key, cand.key), cand.key)
    scores = {}
    for key in table.cands:
        unit = units.get(key, key)
        top = unit_score[unit]
        scores[key] = top if best[unit] == key else min(own[key], math.nextafter(top, -math.inf))
    return scores


__all__ = ["by_unit", "key_fits", "unit_scores"]
