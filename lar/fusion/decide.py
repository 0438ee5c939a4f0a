"""Knowing when not to fuse: the route set's signature, exact-match pins and the follow rule.

First, a route's list is read in its own order (:func:`in_list_order`). Then three per-query decisions of :func:`lar.fusion.adaptive.adaptive_fusion`, each read from the
model (:class:`lar.fusion.model.FusionModel`) and the lists alone, no labels:

* **Which weights.** The routes a query has lists from (the layers the user selected, less the
  ones the timebox left out) have a *signature*: the kinds of space they cover
  (:data:`KINDS`: lexical, static, dense, late). The model may hold weights fitted for that
  signature (``FusionModel.subsets``); a signature it was never fitted on uses its global
  weights (``FusionModel.routes``, then ``default``).
* **Exact-match evidence** (:class:`ExactRule`). A route that matches words as written (grep,
  symbols, trigram, names, bm25) and lists only a few units found a rare identifier or an
  exact phrase: its list is too short for a background fit, so score fusion would drop it, yet
  it is the most precise evidence a query gets. Its keys are pinned at the top (more such lists
  listing a key first, then the fused order); every other key follows in the fused order.
* **Follow or combine** (:class:`FollowRule`). The route the weights trust most for this query
  (the highest weight) is followed, the fused score only breaking its ties and ordering what it
  did not list, when its first keys disagree with every other route's (its ``agreement`` is
  below the rule's threshold) and its weight is at least ``min_ratio`` times the next one: then
  the others are read as noise around it, not as complementary evidence. Otherwise the routes
  are combined.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from lar.core.errors import ConfigError
from lar.fusion.table import Key

#: the kind of space each layer scores in; a layer not named here is ``lexical`` when it matches
#: words (its name in :data:`LEXICAL`) and its own kind otherwise
KINDS: Mapping[str, str] = {"dense": "dense", "dense-e5": "dense", "static": "static", "late": "late"}
LEXICAL = ("grep", "bm25", "derived", "sparse", "names", "symbols", "trigram", "fuzzy")
#: routes whose short lists are exact-match evidence, by default
EXACT_ROUTES = ("grep", "symbols", "trigram", "names", "bm25")


def kind(route: str) -> str:
    if route in KINDS:
        return KINDS[route]
    return "lexical" if route in LEXICAL else route


def signature(routes: Iterable[str]) -> str:
    """The kinds ``routes`` cover, sorted and joined by ``+`` (``"dense+late+lexical+static"``)."""
    return "+".join(sorted({kind(r) for r in routes}))


@dataclass(frozen=True, slots=True)
class ExactRule:
    """Pin the keys of an exact-match route's list when it holds 1 to ``max_hits`` keys."""

    routes: tuple[str, ...] = EXACT_ROUTES
    max_hits: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "routes", tuple(self.routes))
        if isinstance(self.max_hits, bool) or not isinstance(self.max_hits, int) or self.max_hits < 0:
            raise ConfigError(f"ExactRule.max_hits must be an integer >= 0, got {self.max_hits!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"routes": list(self.routes), "max_hits": self.max_hits}


@dataclass(frozen=True, slots=True)
class FollowRule:
    """Follow the most trusted route when its ``agreement`` is below ``agreement_below`` and its
    weight is at least ``min_ratio`` times the next route's (``agreement_below`` 0: never)."""

    agreement_below: float = 0.0
    min_ratio: float = 1.0

    def __post_init__(self) -> None:
        for name in ("agreement_below", "min_ratio"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"FollowRule.{name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, float]:
        return {"agreement_below": self.agreement_below, "min_ratio": self.min_ratio}


def in_list_order(items: Sequence[tuple[Key, float]]) -> list[tuple[Key, float]]:
    """A route's list with its scores made to follow its order: a layer that ranks by more than
    its score (a refine layer such as ``fuzzy`` orders its pool by a key of its own) lists a key
    above one it scored higher, and fusing by score would undo that ranking. The list's own
    scores, sorted, are handed out by position, so the background fit and the scale see the
    same values. A list already best-first by score is returned as it is."""
    scores = [s for _, s in items]
    if all(a >= b for a, b in zip(scores, scores[1:])):
        return list(items)
    return [(key, s) for (key, _), s in zip(items, sorted(scores, reverse=True))]


def pins(lists: Mapping[str, Sequence[tuple[Key, float]]], rule: ExactRule | None,
         skip: Iterable[str] = ()) -> dict[Key, int]:
    """``{key: how many short exact-match lists hold it}`` (routes in ``skip``, e.g. cut short
    by the timebox, are not read: a partial scan's few hits are not rare ones)."""
    out: dict[Key, int] = {}
    if rule is None or rule.max_hits < 1:
        return out
    skip = set(skip)
    for r in rule.routes:
        items = lists.get(r) or ()
        if r in skip or not 1 <= len(items) <= rule.max_hits:
            continue
        for key, _ in items:
            out[key] = out.get(key, 0) + 1
    return out


def followed(weights: Mapping[str, float], agreement: Mapping[str, float],
             rule: FollowRule | None) -> str | None:
    """The route to follow for this query, or None (combine)."""
    if rule is None or rule.agreement_below <= 0:
        return None
    ranked = sorted((w, r) for r, w in weights.items() if w > 0)
    if not ranked:
        return None
    top_w, top = ranked[-1]
    second = ranked[-2][0] if len(ranked) > 1 else 0.0
    if agreement.get(top, 1.0) < rule.agreement_below and top_w >= rule.min_ratio * second:
        return top
    return None


def decided_order(order: Sequence[Key], pinned: Mapping[Key, int],
                  leader: Mapping[Key, float] | None = None) -> list[Key]:
    """``order`` (the fused order, best first) with the ``leader`` route's keys (``{key: its
    score}``) first, by its score, the fused order breaking its ties; keys it did not list
    follow in fused order. Then the pinned keys move above everything, more pins first (ties:
    the order so far)."""
    out = list(order)
    if leader:
        out.sort(key=lambda key: (key not in leader, -leader.get(key, 0.0)))  # stable
    if pinned:
        out.sort(key=lambda key: -pinned.get(key, 0))
    return out


__all__ = ["EXACT_ROUTES", "ExactRule", "FollowRule", "KINDS", "LEXICAL", "decided_order", "followed",
           "in_list_order", "kind", "pins", "signature"]
