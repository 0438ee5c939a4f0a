"""The fusion fit's default method: a listwise softmax loss over each query's candidates, with an
L2 pull towards equal weights, minimised by L-BFGS-B.

A query's fused score of document d is ``sum_r w_r(q) * value_r(d)`` with ``w_r(q) = max(0,
base_r + signal_r * top_r(q) + agree_r * agreement_r(q))``
(:class:`lar.fusion.model.RouteWeights`). The loss is the cross-entropy between the softmax
of those scores over the query's candidates and the relevance targets (gains ``2^g - 1``,
normalised): ListNet's top-one loss. The loss takes the weights as linear in the parameters (no
clip at 0), which makes it convex: one optimum, found by L-BFGS-B, all routes moving together
instead of one grid step at a time. The model clips a weight at 0 when it is applied, so a route
whose fitted weight comes out negative for a query drops out of that query. (Clipping inside the
loss too was measured worse: SciFact +1.9 and +1.5 held out on two fold seeds against +2.9 and
+3.4, the optimiser stalling at the kinks.) The penalty ``l2 * sum (theta - theta_0)^2`` with
``theta_0 = (1, 0, 0)`` (equal weights, no adaptation) keeps a route at equal weight unless the
data move it: a route that never lists a document stays at 1, as unseen routes do.

Measured (SciFact 120 + CoSQA 500 + stdlib generated 200, ten routes, zscore, two folds, four
fold seeds): held-out nDCG@10 above the best single route by +2.1..+3.4 (SciFact), +2.2..+2.7
(CoSQA) and +5.4..+6.5 (stdlib) at ``l2 = 0.01``, where the coordinate ascent of
:mod:`lar_evals.fit_ascent` gave +0.4..+3.1, +1.0..+1.8 and +5.8..+6.3 on the same splits
(``benchmarks/results/2026-11-30-fit-methods.md``). It is faster too: a few seconds per fit of
820 queries against 10 to 20 s for the ascent, on 2 cores.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lar_evals.errors import EvalConfigError
from lar_evals.fit_data import QueryBatch, QueryData

#: the pull towards equal weights; the loss is a mean over queries. 0.003 and 0.03 gave held-out
#: figures within a point of 0.01's on the four fold seeds above
L2 = 0.01
FEATURES = ("base", "signal", "agree")


def fit_listwise(queries: "Sequence[QueryData] | QueryBatch", routes: Sequence[str],
                 l2: float | None = None, max_iter: int = 500) -> np.ndarray:
    """Fitted ``params`` (routes x (base, signal, agree)) minimising the listwise loss plus the
    L2 pull. Deterministic. Queries whose relevant documents no route listed carry no signal and
    are left out of the loss; with none left, equal weights come back."""
    from lar.core.errors import require

    optimize = require("scipy.optimize", "eval")
    l2 = L2 if l2 is None else float(l2)
    if not np.isfinite(l2) or l2 < 0:
        raise EvalConfigError(f"l2 must be a finite number >= 0, got {l2!r}")
    batch = queries if isinstance(queries, QueryBatch) else QueryBatch(list(queries))
    m = len(routes)
    theta0 = np.zeros((m, len(FEATURES)))
    theta0[:, 0] = 1.0
    if batch.n and batch.ev.shape[2] != m:
        raise EvalConfigError(f"the queries have {batch.ev.shape[2]} routes, {m} route names were given")
    if not len(batch.rel_q):
        return theta0
    target = np.zeros(batch.ev.shape[:2])
    np.add.at(target, (batch.rel_q, batch.rel_d), batch.rel_gain)
    keep = target.sum(axis=1) > 0
    target = target[keep] / target[keep].sum(axis=1, keepdims=True)
    ev, pad, usable = batch.ev[keep], batch.pad[keep], batch.usable[keep]
    feats = np.stack([np.ones_like(batch.top[keep]), batch.top[keep], batch.agree[keep]], axis=2)  # (n, m, 3)
    n = len(ev)

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        theta = flat.reshape(m, len(FEATURES))
        lin = np.einsum("qrk,rk->qr", feats, theta)
        w = lin * usable  # linear in theta (not clipped at 0 as the model is when applied): convex
        s = np.einsum("qdr,qr->qd", ev, w)
        s[pad] = -np.inf
        top = s.max(axis=1, keepdims=True)
        e = np.exp(s - top)
        z = e.sum(axis=1, keepdims=True)
        logp = np.where(pad, 0.0, s - top - np.log(z))
        value = -(target * logp).sum() / n
        resid = np.where(pad, 0.0, e / z - target)                  # d loss / d score, times n
        grad_w = np.einsum("qd,qdr->qr", resid, ev) / n * usable
        grad = np.einsum("qr,qrk->rk", grad_w, feats) + 2 * l2 * (theta - theta0)
        return value + l2 * float(((theta - theta0) ** 2).sum()), grad.ravel()

    bounds = [(0.0, None) if f == "base" else (None, None) for _ in range(m) for f in FEATURES]
    res = optimize.minimize(loss, theta0.ravel(), jac=True, method="L-BFGS-B", bounds=bounds,
                            options={"maxiter": int(max_iter)})
    return np.asarray(res.x, dtype=float).reshape(m, len(FEATURES))


__all__ = ["FEATURES", "L2", "fit_listwise"]
