"""The minimax fit against each case's best route, on hand-built cases with known answers."""
from __future__ import annotations

import random

import numpy as np
import pytest

from lar_evals.errors import EvalConfigError
from lar_evals.fit_data import QueryBatch, query_data
from lar_evals.fit_minimax import fit_minimax, leave_one_out, make_case, objective, route_only

ROUTES = ["good", "noise"]


def batch(seed, n=30, noise_quality=0.0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rel = f"d{rng.randrange(100)}"

        def listing(q):
            s = {f"d{i}": rng.gauss(0, 1) + (q if f"d{i}" == rel else 0.0) for i in range(100)}
            return sorted(s.items(), key=lambda kv: -kv[1])[:40]
        out.append(query_data({"good": listing(5.0), "noise": listing(noise_quality)}, ROUTES, {rel: 1}, "zscore"))
    return QueryBatch(out)


def test_the_best_route_of_a_case_is_found():
    case = make_case("x", "all", batch(0), ROUTES, ROUTES)
    assert case.best_route == "good" and case.best > 0.9
    assert float(case.batch.ndcg(route_only(ROUTES, "noise")).mean()) < 0.3


def test_the_fit_turns_the_noise_route_down_and_never_scores_below_equal_weights():
    cases = [make_case("x", "all", batch(1), ROUTES, ROUTES), make_case("y", "all", batch(2), ROUTES, ROUTES)]
    equal = np.array([[1.0, 0, 0], [1.0, 0, 0]])
    params = fit_minimax(cases, ROUTES)
    assert params[1, 0] < params[0, 0]
    assert objective(cases, params) >= objective(cases, equal)
    for c in cases:  # the fitted fusion is within half a point of the good route
        assert float(c.batch.ndcg(params).mean()) >= c.best - 0.005


def test_leave_one_out_scores_each_corpus_with_weights_fitted_without_it():
    cases = [make_case("x", "all", batch(3), ROUTES, ROUTES), make_case("y", "all", batch(4), ROUTES, ROUTES)]
    out = leave_one_out(cases, ROUTES)
    assert sorted(out) == ["x", "y"]
    assert [c.corpus for c, _ in out["x"][1]] == ["x"]
    with pytest.raises(EvalConfigError):
        leave_one_out(cases[:1], ROUTES)
