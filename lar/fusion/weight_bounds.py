"""Whether a fitted model can give any weight at all to a set of routes, read from its numbers
alone, before any list is fitted.

A route's weight is ``max(0, base + signal * t + agree * a)`` with ``t`` (the capped top
evidence over its cap) in [0, 1] and ``a`` (agreement with the other routes) in [0, 1], and 0
for a route with only itself (no other route to agree with). So its largest possible weight is
``base + max(signal, 0) + max(agree, 0) * [other routes present]``; when that is at most 0 for
every route, every weight is 0 whatever the lists say, and adaptive fusion can skip a weighing
whose only outcome is "no route carries signal" (:func:`lar.fusion.adaptive.adaptive_fusion`:
the unit-level lists of a single bm25 list under the packaged model, for example).
"""
from __future__ import annotations

from typing import Sequence


def can_weigh(model, routes: Sequence[str]) -> bool:
    """False when ``model`` gives weight 0 to each of ``routes`` for any lists (see above)."""
    others = len(routes) > 1
    for r in routes:
        w = model.weights_for(r)
        if w.base + max(w.signal, 0.0) + (max(w.agree, 0.0) if others else 0.0) > 0.0:
            return True
    return False


__all__ = ["can_weigh"]
