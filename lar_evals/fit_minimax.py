"""A fit of the adaptive fusion model that is scored against each case's best single route.

A *case* is one judged set fused over one subset of its layers (all of them, lexical only,
dense + late, ...), as a :class:`lar_evals.fit_data.QueryBatch` over the model's route list
(routes outside the subset are unusable in it), with the nDCG@10 of its best single route. The
objective of a weight vector is the mean over cases of

    gap - penalty * max(0, -gap - slack)          gap = nDCG@10(fused) - nDCG@10(best route)

so a weighting that wins a few points on one case but loses to the best route on another by
more than ``slack`` (half a point) is pulled back: the fit prefers never losing over winning
big. It is maximised by coordinate ascent over :data:`GRID` on each route's ``base`` weight
(``signal`` and ``agree`` stay at 0: the probe features did not tell the better route per query
on the development sets, ``benchmarks/results/2026-12-03-fusion-never-loses.md``), from equal
weights, :data:`ROUNDS` rounds. Deterministic.

:func:`leave_one_out` fits on every corpus but one and scores the one left out, so its figures
say how the weights transfer to a corpus the fit never saw.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from lar_evals.errors import EvalConfigError
from lar_evals.fit_data import QueryBatch

GRID: tuple[float, ...] = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)
ROUNDS = 3
PENALTY = 4.0
SLACK = 0.005


@dataclass
class Case:
    """One set over one layer subset: its queries and its best single route."""

    corpus: str
    subset: str
    batch: QueryBatch
    best_route: str
    best: float


def route_only(routes: Sequence[str], route: str) -> np.ndarray:
    """Parameters under which the fused ranking is ``route``'s own."""
    p = np.zeros((len(routes), 3))
    p[list(routes).index(route), 0] = 1.0
    return p


def make_case(corpus: str, subset: str, batch: QueryBatch, routes: Sequence[str],
              present: Sequence[str]) -> Case:
    """The case of ``batch`` with its best route among ``present``."""
    if not present:
        raise EvalConfigError(f"{corpus}/{subset}: no route to compare against")
    scores = {r: float(batch.ndcg(route_only(routes, r)).mean()) for r in present}
    best = max(scores, key=lambda r: (scores[r], r))
    return Case(corpus, subset, batch, best, scores[best])


def objective(cases: Sequence[Case], params: np.ndarray, penalty: float = PENALTY,
              slack: float = SLACK) -> float:
    total = 0.0
    for c in cases:
        gap = float(c.batch.ndcg(params).mean()) - c.best
        total += gap - penalty * max(0.0, -gap - slack)
    return total / len(cases) if cases else 0.0


def fit_minimax(cases: Sequence[Case], routes: Sequence[str], penalty: float = PENALTY,
                grid: Sequence[float] = GRID, rounds: int = ROUNDS, init: np.ndarray | None = None) -> np.ndarray:
    """Fitted ``params`` (routes x (base, signal, agree)): each route's ``base`` moved over
    ``grid`` from ``init`` (default: equal weights, ``signal`` and ``agree`` 0, which stay)."""
    if not cases:
        raise EvalConfigError("fit_minimax needs at least one case")
    if init is None:
        params = np.zeros((len(routes), 3))
        params[:, 0] = 1.0
    else:
        params = np.array(init, dtype=float).copy()
    best = objective(cases, params, penalty)
    for _ in range(int(rounds)):
        moved = False
        for j in range(len(routes)):
            for g in grid:
                trial = params.copy()
                trial[j, 0] = g
                v = objective(cases, trial, penalty)
                if v > best + 1e-6:
                    best, params, moved = v, trial, True
        if not moved:
            break
    return params


def leave_one_out(cases: Sequence[Case], routes: Sequence[str], penalty: float = PENALTY,
                  init: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, list[tuple[Case, float]]]]:
    """``{corpus: (params fitted without it, [(case, held-out nDCG@10), ...])}``."""
    out: dict[str, tuple[np.ndarray, list[tuple[Case, float]]]] = {}
    corpora = sorted({c.corpus for c in cases})
    if len(corpora) < 2:
        raise EvalConfigError("leave-one-corpus-out needs cases from at least two corpora")
    for corpus in corpora:
        params = fit_minimax([c for c in cases if c.corpus != corpus], routes, penalty, init=init)
        out[corpus] = (params, [(c, float(c.batch.ndcg(params).mean())) for c in cases if c.corpus == corpus])
    return out


def weights_of(params: np.ndarray, routes: Sequence[str]) -> Mapping[str, float]:
    return {r: float(p[0]) for r, p in zip(routes, params)}


__all__ = ["Case", "GRID", "PENALTY", "ROUNDS", "SLACK", "fit_minimax", "leave_one_out", "make_case",
           "objective", "route_only", "weights_of"]
