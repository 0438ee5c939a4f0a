"""The candidate table every fusion policy works on, and the fused item it returns.

A policy's input is ``runs``: for each route name, that route's candidates best-first as
``(key, raw score)`` pairs, keys being any hashable value. A key listed twice in one route keeps
its first (best) position; later copies are ignored and ranks are positions in the route's list
of distinct keys. Ties are broken deterministically: higher score, then more routes, then best
single rank, then first appearance (routes in the order of ``runs``, each route best-first).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Hashable, Mapping, Sequence

from lar.core.errors import ConfigError

Key = Hashable
Runs = Mapping[str, Sequence[tuple[Key, float]]]

SLOTS: tuple[str, ...] = ("core", "route-unique", "fill")


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


def check_k(k: object) -> int | None:
    """``k`` as given when it is None (keep all) or an integer >= 1."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be None (keep all) or an integer >= 1; got {k!r}")
    return k


@dataclass(slots=True)
class TableEntry:
    """One distinct key: its first appearance, and its rank and raw score in each route."""

    key: Key
    order: int
    ranks: dict[str, int] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class CandidateTable:
    """The routes in order, one entry per distinct key, and each route's distinct keys."""

    routes: list[str]
    cands: dict[Key, TableEntry]
    route_keys: dict[str, list[Key]]

    def distinct(self, route: str) -> list[tuple[Key, float]]:
        """``route``'s ``(key, raw score)`` list with repeated keys removed, best first."""
        return [(key, self.cands[key].raw[route]) for key in self.route_keys[route]]


def collect(runs: Runs) -> CandidateTable:
    """Validate ``runs`` and index it: one entry per distinct key, in first-appearance order."""
    if not isinstance(runs, Mapping):
        raise ConfigError(f"runs must be a mapping of route name -> [(key, score), ...]; got {type(runs).__name__}")
    table = CandidateTable(routes=list(runs), cands={}, route_keys={})
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
            if type(score) is float:  # the common case, without the ABC check below
                if score != score:
                    raise ConfigError(f"route {route!r}, key {key!r}: score must be a number; got {score!r}")
            elif isinstance(score, bool) or not isinstance(score, numbers.Real) or math.isnan(score):
                raise ConfigError(f"route {route!r}, key {key!r}: score must be a number; got {score!r}")
            cand = table.cands.get(key)
            if cand is None:
                cand = table.cands[key] = TableEntry(key, len(table.cands))
            if route in cand.ranks:  # duplicate within the route: keep the first (best)
                continue
            keys.append(key)
            cand.ranks[route] = len(keys)
            cand.raw[route] = float(score)
        table.route_keys[route] = keys
    return table


def ordered(table: CandidateTable, scores: Mapping[Key, float]) -> list[TableEntry]:
    """Candidates best first: higher score, more routes, best single rank, first appearance."""
    return sorted(
        table.cands.values(),
        key=lambda c: (-scores[c.key], -len(c.ranks), min(c.ranks.values()), c.order),
    )


def fused_item(table: CandidateTable, cand: TableEntry, score: float, slot: str) -> FusedItem:
    routes = tuple(r for r in table.routes if r in cand.ranks)
    return FusedItem(cand.key, score, {r: cand.ranks[r] for r in routes}, routes, slot)


def by_score(table: CandidateTable, scores: Mapping[Key, float], k: int | None) -> list[FusedItem]:
    """The first ``k`` candidates in :func:`ordered` order, as core items with their scores."""
    return [fused_item(table, cand, scores[cand.key], "core") for cand in ordered(table, scores)[:k]]


__all__ = ["CandidateTable", "FusedItem", "Key", "Runs", "SLOTS", "TableEntry", "by_score",
           "check_k", "collect", "fused_item", "ordered"]
