"""The partial guard's second half: a route that saw part of the scope (cut short by the timebox,
or a partly built index) enters the fusion only for the keys it scored.

:func:`lar.fusion.adaptive.partial_factors` already scales such a route's weight by how much of
the complete routes' leading candidates it scored. That alone still let a half-done scan push
every key it did not reach below the ones it did (an unscored key gets the route's floor, as if
the route had scored it low), and when no route carried weight the RRF fallback counted the
partial list as a whole one. :func:`guarded_scores` removes both: the complete routes' own fusion
(the cheap stage, :func:`lar.fusion.adaptive.adaptive_fusion` over them alone) fixes the order;
keys only the partial routes found follow it; then each partial route in turn re-sorts the keys
it scored among the positions they hold, by the cheap stage's score plus its weighted value. A
key no partial route scored keeps its position, so at a short timebox the fused list is the
cheap stage's list with the scored keys re-sorted among themselves: a cut-short layer can
reorder what it read, never bury what it did not.
"""
from __future__ import annotations

import math
from typing import Any, Collection, Mapping, Sequence

from lar.fusion.table import Key


def slot_order(order: Sequence[Key], full: Mapping[Key, float], scored: Collection[Key]) -> list[Key]:
    """``order`` with the keys of ``scored`` re-sorted among their own positions by ``full``
    (higher first; ties keep their order)."""
    scored = set(scored)
    slots = [i for i, key in enumerate(order) if key in scored]
    movers = sorted((order[i] for i in slots), key=lambda key: -full[key])  # stable
    out = list(order)
    for i, key in zip(slots, movers):
        out[i] = key
    return out


def positional_scores(order: Sequence[Key], base: Mapping[Key, float]) -> dict[Key, float]:
    """Strictly decreasing scores for ``order``: position i gets the ``base`` score of the key
    that held it before (keys missing from ``base`` sit below its lowest), nudged down where
    needed so that no tie-breaking can undo the order."""
    low = min(base.values(), default=0.0)
    ranked = sorted(base, key=lambda key: -base[key])
    values = [base[key] for key in ranked] + [low] * (len(order) - len(ranked))
    out: dict[Key, float] = {}
    prev = math.inf
    for key, s in zip(order, values):
        if not s < prev:
            s = math.nextafter(prev, -math.inf)
        out[key] = s
        prev = s
    return out


def guarded_scores(keys: Sequence[Key], cheap: Sequence[tuple[Key, float]],
                   partial_values: Sequence[tuple[float, Mapping[Key, float], float]],
                   unit_of: Any = None) -> dict[Key, float]:
    """Scores of every key in ``keys`` under the guard.

    ``cheap``: the complete routes' fused ``(key, score)`` list, best first; ``partial_values``:
    per partial route with weight, ``(weight, {unit or key: value}, floor)``; ``unit_of(key)``
    maps a key to what the values are keyed by (None: the key itself). Keys only partial routes
    found follow the cheap list, ordered by their summed weighted values."""
    unit_of = unit_of or (lambda key: key)
    base = dict(cheap)
    extra = [key for key in keys if key not in base]
    gain = {key: math.fsum(w * vals.get(unit_of(key), floor) for w, vals, floor in partial_values)
            for key in extra}
    order = [key for key, _ in cheap] + sorted(extra, key=lambda key: -gain[key])
    low = min(base.values(), default=0.0)
    for w, vals, _ in partial_values:
        scored = [key for key in order if unit_of(key) in vals]
        full = {key: base.get(key, low) + w * vals[unit_of(key)] for key in scored}
        order = slot_order(order, full, scored)
    return positional_scores(order, base)


__all__ = ["guarded_scores", "positional_scores", "slot_order"]
