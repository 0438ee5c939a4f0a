"""The partial guard's second half: a route that saw part of the scope (cut short by the timebox,
or a partly built index) enters the fusion only for the keys it scored.

:func:`lar.fusion.adaptive.partial_factors` already scales such a route's weight by how much of
the complete routes' leading candidates it scored. That alone still lets a half-done scan push
every key it did not reach below the ones it did (an unscored key gets the route's floor, as if
the route had scored it low). :func:`slot_guard` removes that: the complete routes' fused order
fixes which positions the partial routes' keys occupy, and only those keys are reordered among
those positions, by the score with the partial routes. A key no partial route scored keeps its
position in the complete routes' order, so the fused list at a short timebox is the cheap
stage's list with the scored keys re-sorted among themselves: a cut-short layer can reorder what
it read, never bury what it did not.
"""
from __future__ import annotations

import math
from typing import Collection, Mapping

from lar.fusion.table import CandidateTable, Key, ordered


def slot_guard(table: CandidateTable, complete: Mapping[Key, float], full: Mapping[Key, float],
               scored: Collection[Key]) -> dict[Key, float]:
    """Scores whose order (by :func:`lar.fusion.table.ordered`) is the ``complete`` order with
    the keys in ``scored`` re-sorted among their own positions by ``full``.

    ``complete``: every key's score in the order so far (the complete routes' fusion); ``full``:
    the scored keys' scores with the partial route; ``scored``: the keys the partial route listed. The returned scores are
    the ``complete`` scores of the positions, made strictly decreasing where the reordering put
    keys whose ``complete`` scores tie (so the table's tie-breaking cannot undo it)."""
    base = ordered(table, complete)
    scored = set(scored).intersection(complete)
    slots = [i for i, cand in enumerate(base) if cand.key in scored]
    if len(slots) < 2:
        return dict(complete)
    movers = sorted((base[i] for i in slots), key=lambda c: (-full[c.key], -len(c.ranks),
                                                             min(c.ranks.values()), c.order))
    final = list(base)
    for i, cand in zip(slots, movers):
        final[i] = cand
    out: dict[Key, float] = {}
    prev = math.inf
    for pos, cand in enumerate(final):
        s = complete[base[pos].key]
        if not s < prev:
            s = math.nextafter(prev, -math.inf)
        out[cand.key] = s
        prev = s
    return out


__all__ = ["slot_guard"]
