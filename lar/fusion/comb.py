"""CombSUM and CombMNZ (Fox and Shaw 1994): the sum of each route's normalised score for a key,
times the number of routes that found it for CombMNZ. ``norm="pvalue"`` sums each route's
evidence ``-ln p`` (the ``pvalue`` policy): a route without signal adds nothing."""
from __future__ import annotations

import math

from lar.fusion.scales import check_norm, normalise
from lar.fusion.table import FusedItem, Key, Runs, by_score, check_k, collect


def _comb(runs: Runs, k: int | None, norm: str, mnz: bool) -> list[FusedItem]:
    k = check_k(k)
    norm = check_norm(norm)
    table = collect(runs)
    parts: dict[Key, list[float]] = {key: [] for key in table.cands}
    for route in table.routes:
        for key, value in normalise(table, route, norm).items():
            parts[key].append(value)
    scores = {key: math.fsum(vals) * (len(vals) if mnz else 1) for key, vals in parts.items()}
    return by_score(table, scores, k)


def combsum(runs: Runs, k: int | None = None, norm: str = "minmax") -> list[FusedItem]:
    """CombSUM: sum over routes of the key's normalised score (``norm`` one of
    :data:`lar.fusion.scales.NORMS`, see :func:`lar.fusion.scales.normalise`)."""
    return _comb(runs, k, norm, mnz=False)


def combmnz(runs: Runs, k: int | None = None, norm: str = "minmax") -> list[FusedItem]:
    """CombMNZ: the CombSUM score times the number of routes that found the key."""
    return _comb(runs, k, norm, mnz=True)


__all__ = ["combmnz", "combsum"]
