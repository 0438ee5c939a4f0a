"""Fusion by object identity (:func:`lar.fusion.adaptive.adaptive_fusion` with ``units``): each
route's list reduced to units, and each place's score under the units' fused scores."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from lar.fusion.probe import probe_runs
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


def unit_scores(table: CandidateTable, dedup, units, live, weights, norm, backgrounds) -> dict[Key, float]:
    """Each key's score under unit fusion: the unit's fused score (``live``, read from the unit
    lists) for the unit's best key; for its other keys their own key-level fused score with the
    same weights, kept strictly below the unit's."""
    unit_score = {}
    for key in table.cands:
        unit = units.get(key, key)
        if unit not in unit_score:
            unit_score[unit] = math.fsum(w * vals.get(unit, floor) for _, w, vals, floor in live)
    _, key_fits = probe_runs(dedup)
    key_values = route_values({r: items for r, items in dedup.items() if weights[r] > 0}, key_fits,
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


__all__ = ["by_unit", "unit_scores"]
