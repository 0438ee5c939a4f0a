"""Reciprocal rank fusion (Cormack, Clarke and Büttcher 2009):
``score(key) = sum over routes that found it of 1 / (c + rank)``."""
from __future__ import annotations

import math
import numbers

from lar.core.errors import ConfigError
from lar.fusion.table import CandidateTable, FusedItem, Key, Runs, by_score, check_k, collect

DEFAULT_C = 60.0


def check_c(c: object) -> float:
    if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c <= 0:
        raise ConfigError(f"the RRF constant c must be a finite number > 0 (usually 60); got {c!r}")
    return float(c)


def rrf_scores(table: CandidateTable, c: float) -> dict[Key, float]:
    # fsum is correctly rounded, so equal rank sets give bit-equal scores whatever the order.
    return {key: math.fsum(1.0 / (c + r) for r in cand.ranks.values()) for key, cand in table.cands.items()}


def rrf(runs: Runs, k: int | None = None, c: float = DEFAULT_C) -> list[FusedItem]:
    """Reciprocal rank fusion: ``score(key) = sum over routes that found it of 1 / (c + rank)``."""
    k = check_k(k)
    c = check_c(c)
    return rrf_table(collect(runs), k, c)


def rrf_table(table: CandidateTable, k: int | None = None, c: float = DEFAULT_C) -> list[FusedItem]:
    """:func:`rrf` of runs already collected into ``table``."""
    return by_score(table, rrf_scores(table, check_c(c)), check_k(k))


__all__ = ["DEFAULT_C", "check_c", "rrf", "rrf_scores", "rrf_table"]
