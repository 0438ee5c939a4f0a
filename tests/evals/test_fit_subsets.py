"""The subset-aware fit (lar_evals.fit_subsets): its array ranking is lar's fusion, and its
leave-one-corpus-out fit keeps what transfers (the exact-match pin) on hand-built corpora."""
from __future__ import annotations

import random

import numpy as np

from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.decide import ExactRule, FollowRule
from lar.fusion.model import FusionModel, RouteWeights
from lar_evals.fit_subsets import DecisionBatch, SubsetCase, fit_decisions, leave_one_corpus_out, to_model
from lar_evals.fit_subsets_cli import ndcg10

ROUTES = ["bm25", "dense", "grep"]


def corpus(seed: int, n: int = 16):
    """bm25 and dense noisy around the relevant document; grep, on half the queries, lists only
    it (a rare identifier: too few hits for a background fit)."""
    rng = random.Random(seed)
    lists, qrels = [], []
    for i in range(n):
        rel = f"q{i}rel"
        docs = [rel] + [f"q{i}d{j}" for j in range(40)]
        per = {}
        for r, q in (("bm25", 1.0), ("dense", 1.5)):
            s = {d: rng.gauss(0, 1) + (q if d == rel else 0.0) for d in docs}
            per[r] = sorted(s.items(), key=lambda kv: -kv[1])[:30]
        if i % 2 == 0:
            per["grep"] = [(rel, 1.0)]
        lists.append(per)
        qrels.append({rel: 1})
    return lists, qrels


def test_the_array_ranking_is_lars_fusion():
    lists, qrels = corpus(3)
    batch = DecisionBatch(lists, qrels, ROUTES)
    params = np.array([[1.0, 0, 0], [2.0, 0, 0], [1.0, 0, 0]])
    totals = np.array([1.0, 0.5])  # dense, lexical
    for max_hits, follow in ((0, None), (5, None), (5, FollowRule(0.3, 1.0))):
        model = FusionModel({r: RouteWeights(float(p[0])) for r, p in zip(ROUTES, params)}, norm="zscore",
                            exact=ExactRule(("grep",), max_hits), follow=follow, kinds={"dense": 1.0, "lexical": 0.5})
        want = [ndcg10([it.key for it in adaptive_fusion(ls, k=10, model=model)[0]], qr) for ls, qr in zip(lists, qrels)]
        got = batch.ndcg(params, max_hits, follow, totals)
        assert np.allclose(got, want), (max_hits, follow)


def test_leave_one_corpus_out_learns_the_pin_that_transfers():
    cases = []
    for c in range(3):
        lists, qrels = corpus(10 + c)
        batch = DecisionBatch(lists, qrels, ROUTES)
        means = {r: float(np.mean([ndcg10([d for d, _ in ls.get(r, [])], qr) for ls, qr in zip(lists, qrels)]))
                 for r in ROUTES}
        best = max(means, key=means.get)
        cases.append(SubsetCase(f"c{c}", "all", tuple(ROUTES), batch, best, means[best]))
    loco = leave_one_corpus_out(cases, ROUTES)
    assert all(f.max_hits >= 1 for f in loco.values())  # every fold pins grep's single hit
    fit = fit_decisions(cases, ROUTES)
    model = to_model(fit, ROUTES, 0.1)
    assert model.exact.max_hits >= 1 and model.default.base == 0.1
    assert sorted(model.kinds) == ["dense", "lexical"]
