"""The subset-aware fit of the default fusion: weights per layer-kind signature, the exact-match
pin and the follow rule, scored against each case's best single route.

A *case* is one corpus fused over one set of its routes (a layer subset the user may select, or
the routes a timebox leaves complete), with the nDCG@10 of its best route's own list. The
objective is :func:`lar_evals.fit_minimax.objective`'s: the mean gap to each case's best route,
with a 4x penalty below half a point. :func:`fit_decisions` fits, in order,

1. global base weights (coordinate ascent, :func:`lar_evals.fit_minimax.fit_minimax`'s grid)
   over every case, without pins;
2. the exact-match pin's ``max_hits`` (:data:`PIN_GRID`) under those weights, then the global
   weights again with it;
3. for each signature (:func:`lar.fusion.decide.signature`) with cases, its own weights, from
   the global ones, on its cases only;
4. the follow rule's threshold and ratio (:data:`FOLLOW_GRID`), all signatures together.

:func:`leave_one_corpus_out` runs all of it without each corpus in turn and scores the corpus
left out, so the figures say how the model transfers to a corpus it never saw. The fused
ranking is computed on arrays (:class:`DecisionBatch`), as lar's fusion ranks per-document lists:
the weighted sum on the model's scale (RRF when no route carries weight), pinned keys first,
a followed route's list before the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from lar.fusion.decide import EXACT_ROUTES, ExactRule, FollowRule, in_list_order, kind, signature
from lar.fusion.model import FusionModel, RouteWeights
from lar_evals.errors import EvalConfigError
from lar_evals.fit_data import query_data
from lar_evals.fit_minimax import PENALTY, SLACK

#: the base weights and kind totals tried: no layer is silenced outright (a fit on three corpora
#: that zeroes the route only the fourth needs loses it 13-25 points held out)
GRID: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0)
PIN_GRID: tuple[int, ...] = (0, 1, 2, 3, 5, 10, 18)
FOLLOW_GRID: tuple[tuple[float, float], ...] = tuple(
    (a, r) for a in (0.0, 0.1, 0.2, 0.3, 0.5) for r in (1.0, 2.0, 4.0) if a > 0 or r == 1.0)
ROUNDS = 1
PIN, LEAD = 1e9, 1e6  # score offsets: pinned keys above a followed route's keys above the rest


class DecisionBatch:
    """Many queries' evidence over a fixed route list, padded into arrays: per query, document
    and route the value on the model's scale (``ev``), the route's reciprocal rank (``rr``, 0
    when unlisted), whether an exact-match route listed it and that list's length."""

    def __init__(self, lists: Sequence[Mapping[str, list]], qrels: Sequence[Mapping[str, int]],
                 routes: Sequence[str], norm: str = "zscore") -> None:
        lists = [{r: in_list_order(v) for r, v in ls.items()} for ls in lists]  # as lar fuses them
        qds = [query_data(ls, routes, qr, norm) for ls, qr in zip(lists, qrels)]
        self.routes = list(routes)
        self.kinds = kind_names(routes)
        self.kind_of = np.array([[kind(r) == k for k in self.kinds] for r in routes], dtype=float)
        self.exact = [j for j, r in enumerate(routes) if r in EXACT_ROUTES]
        n, m, width = len(qds), len(routes), max((len(q.docs) for q in qds), default=0) or 1
        self.n = n
        self.ev, self.rr = np.zeros((n, width, m)), np.zeros((n, width, m))
        self.pad = np.ones((n, width), dtype=bool)
        self.agree, self.usable = np.zeros((n, m)), np.zeros((n, m))
        self.length = np.zeros((n, m))
        self.gains, self.idcg = np.zeros((n, width)), np.zeros(n)
        for i, (q, ls) in enumerate(zip(qds, lists)):
            d = len(q.docs)
            self.ev[i, :d], self.rr[i, :d], self.pad[i, :d] = q.ev, q.rrf, False
            self.agree[i], self.usable[i], self.idcg[i] = q.agree, q.usable, q.idcg
            self.gains[i, :d] = 2.0 ** q.gains - 1.0
            self.length[i] = (self.rr[i] > 0).sum(axis=0)
        self.disc = 1.0 / np.log2(np.arange(2, 12))

    def pins(self, max_hits: int) -> np.ndarray:
        """Per query and document: how many short exact-match lists hold it."""
        out = np.zeros(self.pad.shape)
        for j in self.exact:
            short = (self.length[:, j] >= 1) & (self.length[:, j] <= max_hits)
            out += (self.rr[:, :, j] > 0) * short[:, None]
        return out

    def weights(self, params: np.ndarray, totals: np.ndarray | None = None) -> np.ndarray:
        """Per query and route the weight: the base weight, and with ``totals`` (per kind of
        :attr:`kinds`) that share of its kind's total among the routes the query has usable
        lists of (:func:`lar.fusion.adaptive.balanced`)."""
        w = np.maximum(0.0, params[:, 0])[None, :] * self.usable
        if totals is not None:
            per_kind = (w @ self.kind_of) @ self.kind_of.T                  # the kind's sum, per route
            w = np.divide(w, per_kind, out=np.zeros_like(w), where=per_kind > 0) * (self.kind_of @ totals)[None, :]
        return w

    def scores(self, params: np.ndarray, max_hits: int = 0, follow: FollowRule | None = None,
               totals: np.ndarray | None = None) -> np.ndarray:
        w = self.weights(params, totals)
        fused = np.where(w.any(axis=1)[:, None], np.einsum("qdr,qr->qd", self.ev, w), self.rr.sum(axis=2))
        fused = fused / (np.abs(fused).max(axis=1, keepdims=True) + 1.0)  # below 1 in magnitude
        if follow is not None and follow.agreement_below > 0:
            top = w.argmax(axis=1)
            srt = np.sort(w, axis=1)
            second = srt[:, -2] if w.shape[1] > 1 else np.zeros(self.n)
            lead = (srt[:, -1] > 0) & (self.agree[np.arange(self.n), top] < follow.agreement_below) \
                & (srt[:, -1] >= follow.min_ratio * second)
            rr = self.rr[np.arange(self.n), :, top]                        # the leader's 1/(60 + rank)
            fused = fused + LEAD * rr * lead[:, None]
        if max_hits:
            fused = fused + PIN * self.pins(max_hits)
        fused[self.pad] = -np.inf
        return fused

    def ndcg(self, params: np.ndarray, max_hits: int = 0, follow: FollowRule | None = None,
             totals: np.ndarray | None = None) -> np.ndarray:
        s = self.scores(params, max_hits, follow, totals)
        order = np.argsort(-s, axis=1, kind="stable")[:, :10]
        g = np.take_along_axis(self.gains, order, axis=1)
        dcg = (g * self.disc[: g.shape[1]]).sum(axis=1)
        return np.divide(dcg, self.idcg, out=np.zeros(self.n), where=self.idcg > 0)


@dataclass
class SubsetCase:
    corpus: str
    subset: str
    present: tuple[str, ...]
    batch: DecisionBatch
    best_route: str
    best: float
    signature: str = field(init=False)

    def __post_init__(self) -> None:
        self.signature = signature(self.present)


@dataclass
class Decisions:
    """A fit: global base weights, kind totals (None: no balancing), per-signature base weights,
    the pin's ``max_hits`` and the follow rule."""

    params: np.ndarray
    totals: np.ndarray | None
    by_signature: dict[str, np.ndarray]
    max_hits: int
    follow: FollowRule

    def params_for(self, sig: str) -> np.ndarray:
        return self.by_signature.get(sig, self.params)

    def ndcg(self, case: "SubsetCase") -> float:
        return float(case.batch.ndcg(self.params_for(case.signature), self.max_hits, self.follow,
                                     self.totals).mean())


def objective(cases: Sequence[SubsetCase], fit: Decisions, penalty: float = PENALTY,
              slack: float = SLACK) -> float:
    if not cases:
        return 0.0
    total = 0.0
    for c in cases:
        gap = fit.ndcg(c) - c.best
        total += gap - penalty * max(0.0, -gap - slack)
    return total / len(cases)


def ascend(cases, routes, fit: Decisions, sig: str | None = None, rounds: int = ROUNDS) -> Decisions:
    """Coordinate ascent of the base weights of the routes the cases have (of signature ``sig``'s
    table when given, else the global ones) and, globally, of the kind totals."""
    seen = {r for c in cases for r in c.present}
    best = objective(cases, fit)

    def trials(f: Decisions):
        base = f.params if sig is None else f.params_for(sig)
        for j, r in enumerate(routes):
            if r in seen:
                for g in GRID:
                    if g != base[j, 0]:
                        p = base.copy()
                        p[j, 0] = g
                        yield (replace_params(f, p) if sig is None else
                               replace_sig(f, sig, p))
        if sig is None and f.totals is not None:
            for k in range(len(f.totals)):
                for g in GRID[1:]:
                    if g != f.totals[k]:
                        t = f.totals.copy()
                        t[k] = g
                        yield Decisions(f.params, t, f.by_signature, f.max_hits, f.follow)

    for _ in range(rounds):
        moved = False
        for trial in list(trials(fit)):
            v = objective(cases, trial)
            if v > best + 1e-6:
                best, fit, moved = v, trial, True
        if not moved:
            break
    return fit


def replace_params(f: Decisions, p: np.ndarray) -> Decisions:
    return Decisions(p, f.totals, f.by_signature, f.max_hits, f.follow)


def replace_sig(f: Decisions, sig: str, p: np.ndarray) -> Decisions:
    return Decisions(f.params, f.totals, {**f.by_signature, sig: p}, f.max_hits, f.follow)


def fit_decisions(cases: Sequence[SubsetCase], routes: Sequence[str], balance: bool = True,
                  pin_grid: Sequence[int] = PIN_GRID, follow_grid=FOLLOW_GRID) -> Decisions:
    """The fit of :data:`__doc__`'s steps on ``cases`` (``balance``: with kind totals)."""
    if not cases:
        raise EvalConfigError("the subset fit needs at least one case")
    init = np.zeros((len(routes), 3))
    init[:, 0] = 1.0
    kinds = cases[0].batch.kinds
    fit = Decisions(init, np.ones(len(kinds)) if balance else None, {}, 0, FollowRule())
    fit = ascend(cases, routes, fit)
    fit = max((Decisions(fit.params, fit.totals, {}, h, fit.follow) for h in pin_grid),
              key=lambda f: (round(objective(cases, f), 6), -f.max_hits))
    fit = ascend(cases, routes, fit)
    for sig in sorted({c.signature for c in cases}):
        mine = [c for c in cases if c.signature == sig]
        got = ascend(mine, routes, replace_sig(fit, sig, fit.params.copy()), sig)
        fit = replace_sig(fit, sig, got.params_for(sig))
    rules = [FollowRule(a, r) for a, r in follow_grid]
    return max((Decisions(fit.params, fit.totals, fit.by_signature, fit.max_hits, f) for f in rules),
               key=lambda f: (round(objective(cases, f), 6), -f.follow.agreement_below, -f.follow.min_ratio))


def leave_one_corpus_out(cases: Sequence[SubsetCase], routes: Sequence[str], balance: bool = True
                         ) -> dict[str, Decisions]:
    corpora = sorted({c.corpus for c in cases})
    if len(corpora) < 2:
        raise EvalConfigError("leave-one-corpus-out needs cases from at least two corpora")
    return {corpus: fit_decisions([c for c in cases if c.corpus != corpus], routes, balance) for corpus in corpora}


def held_out(cases: Sequence[SubsetCase], loco: Mapping[str, Decisions]) -> dict[tuple[str, str], float]:
    """``{(corpus, subset): held-out nDCG@10 on the surrogate}``."""
    return {(c.corpus, c.subset): loco[c.corpus].ndcg(c) for c in cases}


def to_model(fit: Decisions, routes: Sequence[str], default: float, fitted_routes: Sequence[str] = (),
             **meta) -> FusionModel:
    """The fit as a :class:`FusionModel` (norm zscore). Routes no case had keep ``default``; in
    a signature, routes its cases did not have are left out (the global weight serves)."""
    fitted = set(fitted_routes) or set(routes)
    glob = {r: RouteWeights(float(p[0])) for r, p in zip(routes, fit.params) if r in fitted}
    subsets = {}
    for sig, params in fit.by_signature.items():
        table = {r: RouteWeights(float(p[0])) for r, p in zip(routes, params)
                 if r in fitted and float(p[0]) != float(fit.params[routes.index(r), 0])}
        if table:  # a signature whose fit kept the global weights needs no table
            subsets[sig] = table
    exact = ExactRule(EXACT_ROUTES, int(fit.max_hits))
    kinds = {} if fit.totals is None else {k: float(t) for k, t in zip(kind_names(routes), fit.totals)}
    return FusionModel(glob, RouteWeights(default), norm="zscore", subsets=subsets, exact=exact,
                       follow=fit.follow, kinds=kinds, **meta)


def kind_names(routes: Sequence[str]) -> list[str]:
    """The kinds of ``routes`` in :class:`DecisionBatch`'s order."""
    return sorted({kind(r) for r in routes})


__all__ = ["DecisionBatch", "Decisions", "FOLLOW_GRID", "PIN_GRID", "SubsetCase", "ascend", "fit_decisions",
           "held_out", "leave_one_corpus_out", "objective", "to_model"]
