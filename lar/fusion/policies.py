"""The fusion policies by name, and :func:`fuse`, which runs one.

Every policy is pure. Its input is ``runs``: for each route name, that route's candidates
best-first as ``(key, raw score)`` pairs (:mod:`lar.fusion.table`). Its output is a list of
:class:`lar.fusion.table.FusedItem`, best first, cut to ``k`` items (``k=None``: all).

* ``"rrf"`` - reciprocal rank fusion (:mod:`lar.fusion.rrf`).
* ``"route-unique"`` - an RRF core plus, for every route that found anything, its best
  candidate not already selected (:mod:`lar.fusion.route_unique`).
* ``"combsum"`` / ``"combmnz"`` - sum of per-route normalised scores (times the number of
  routes that found the key, for CombMNZ; :mod:`lar.fusion.comb`).
* ``"pvalue"`` - CombSUM of each route's evidence ``-ln p`` (:mod:`lar.fusion.probe`).
* ``"adaptive"`` - the engine's default (:data:`DEFAULT_POLICY`): the same evidence, weighted
  per route and query by the probe features and a fitted model (:mod:`lar.fusion.adaptive`).
"""
from __future__ import annotations

from typing import Any, Mapping

from lar.core.errors import ConfigError
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.comb import combmnz, combsum
from lar.fusion.route_unique import route_unique
from lar.fusion.rrf import DEFAULT_C, check_c, rrf
from lar.fusion.scales import check_norm
from lar.fusion.table import FusedItem, Key, Runs, check_k

POLICIES: tuple[str, ...] = ("route-unique", "rrf", "combsum", "combmnz", "adaptive", "pvalue")
# the engine's policy when a search names none (config "fusion" overrides it); chosen by the
# evaluation harness on the development splits (benchmarks/results/, docs/fusion.md)
DEFAULT_POLICY = "adaptive"


def check_policy(policy: object) -> str:
    if policy not in POLICIES:
        raise ConfigError(f"unknown fusion policy {policy!r}; valid policies: {', '.join(POLICIES)}")
    return policy  # type: ignore[return-value]


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
    :class:`lar.fusion.model.FusionModel`, a mapping or a JSON path; None: the packaged one)
    and ``units`` (``{key: unit}``: fuse by unit, see :func:`adaptive_fusion`) by ``"adaptive"``.
    Empty ``runs`` give ``[]``.
    """
    check_policy(policy)
    check_k(k)
    if policy in ("rrf", "route-unique", "adaptive"):
        check_c(c)
    elif policy != "pvalue":
        check_norm(norm)
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


__all__ = ["DEFAULT_POLICY", "POLICIES", "check_policy", "fuse"]
