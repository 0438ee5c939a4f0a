"""Route-unique allocation: an RRF core, then each route's best candidate not yet selected, so
that no route is crowded out of the top ``k`` (the second seed, KCAE.INDEX:4.4)."""
from __future__ import annotations

from lar.fusion.rrf import DEFAULT_C, check_c, rrf_scores
from lar.fusion.table import FusedItem, Key, Runs, check_k, collect, fused_item, ordered


def route_unique(runs: Runs, k: int | None, c: float = DEFAULT_C) -> list[FusedItem]:
    """RRF core plus each route's best unselected candidate, all within ``k`` items.

    With ``n`` routes that found anything: the top ``max(0, k - n)`` RRF items form the core;
    then each route in ``runs`` order, while fewer than ``k`` are selected, adds its best-ranked
    candidate not yet selected; remaining room is filled in RRF order.  The result lists the
    core first (RRF order), then the route-unique and fill items in RRF order.  Scores are RRF
    scores.  ``k=None`` selects every candidate.
    """
    k = check_k(k)
    c = check_c(c)
    table = collect(runs)
    scores = rrf_scores(table, c)
    best_first = ordered(table, scores)
    limit = len(best_first) if k is None else k
    n = sum(1 for keys in table.route_keys.values() if keys)

    slot: dict[Key, str] = {cand.key: "core" for cand in best_first[: max(0, limit - n)]}
    for route in table.routes:
        if len(slot) >= limit:
            break
        best = next((key for key in table.route_keys[route] if key not in slot), None)
        if best is not None:
            slot[best] = "route-unique"
    for cand in best_first:
        if len(slot) >= limit:
            break
        slot.setdefault(cand.key, "fill")

    core = [cand for cand in best_first if slot.get(cand.key) == "core"]
    rest = [cand for cand in best_first if slot.get(cand.key) in ("route-unique", "fill")]
    return [fused_item(table, cand, scores[cand.key], slot[cand.key]) for cand in core + rest]


__all__ = ["route_unique"]
