"""Paired tests with known p-values, the per-metric family, degenerate comparisons, bootstrap
intervals and the choice of comparisons."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from lar_evals.compare import resolve_comparisons
from lar_evals.errors import EvalConfigError
from lar_evals.significance import adjust, bootstrap_ci, paired_test, paired_tests

QIDS = [f"q{i}" for i in range(10)]
A = [0.9, 0.8, 0.7, 0.95, 0.6, 0.85, 0.75, 0.9, 0.65, 0.8]
B = [0.7, 0.75, 0.72, 0.6, 0.55, 0.8, 0.5, 0.88, 0.6, 0.7]


def test_student_p_value_is_the_t_distributions():
    d = np.subtract(A, B)
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    expected = 2 * stats.t.sf(abs(t), len(d) - 1)  # two-sided, n - 1 degrees of freedom
    assert paired_test(A, B, "student") == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.0161, abs=1e-4)  # t = 0.11 / (0.1178 / sqrt 10) = 2.954, 9 df


def test_fisher_randomisation_approximates_the_exact_sign_flip_p_value():
    d = np.subtract(A, B)
    observed = abs(d.mean())
    flips = [abs(np.mean(d * np.array(s))) >= observed - 1e-12
             for s in itertools.product([1, -1], repeat=len(d))]
    exact = sum(flips) / len(flips)  # all 1024 assignments
    got = paired_test(A, B, "fisher", n_permutations=20000, seed=1)
    assert exact == pytest.approx(6 / 1024)  # the identity, flipping -0.02, flipping both 0.02s; and mirrored
    assert got == pytest.approx(exact, abs=0.004)


def test_identical_lists_have_no_test():
    assert paired_test(A, A, "student") is None and paired_test(A, A, "fisher") is None


def test_corrections_known_values():
    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust(p, "holm")[0] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p, "bonferroni")[0] == pytest.approx([0.04, 0.16, 0.12, 0.02])
    # Benjamini-Hochberg: sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3, 4/4, step-up
    assert adjust(p, "fdr_bh")[0] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust(p, "none")[0] == p
    with pytest.raises(EvalConfigError, match="holm"):
        adjust(p, "sidak-ish")


def test_bootstrap_interval_holds_the_mean_and_narrows_with_more_queries():
    rng = np.random.default_rng(3)
    small, big = rng.normal(0.1, 0.2, 20), rng.normal(0.1, 0.2, 2000)
    lo, hi = bootstrap_ci(small, seed=0)
    assert lo < small.mean() < hi
    blo, bhi = bootstrap_ci(big, seed=0)
    assert (bhi - blo) < (hi - lo) / 5  # ~ 1/sqrt(n): 10x the queries, ~1/10 the width
    assert bootstrap_ci(small, seed=0) == (lo, hi)  # seeded
    # the normal-theory interval of the mean, for comparison
    half = 1.96 * big.std(ddof=1) / math.sqrt(len(big))
    assert blo == pytest.approx(big.mean() - half, abs=0.003)
    assert bhi == pytest.approx(big.mean() + half, abs=0.003)


def test_family_is_per_metric_and_degenerate_rows_are_left_out():
    per_query = {
        "x": {"ndcg@10": dict(zip(QIDS, A)), "recall@100": dict.fromkeys(QIDS, 1.0)},
        "y": {"ndcg@10": dict(zip(QIDS, B)), "recall@100": dict.fromkeys(QIDS, 1.0)},
        "z": {"ndcg@10": dict(zip(QIDS, [v + 0.01 for v in B])),
              "recall@100": dict(zip(QIDS, [1.0] * 9 + [0.0]))},
    }
    out = paired_tests(per_query, [("x", "y"), ("x", "z")], ["ndcg@10", "recall@100"], QIDS)
    rows = {(t["a"], t["b"], t["metric"]): t for t in out["tests"]}
    p_xy, p_xz = (paired_test(A, B), paired_test(A, [v + 0.01 for v in B]))
    # ndcg@10's family: two tests, Holm over those two only
    assert rows["x", "y", "ndcg@10"]["p_adjusted"] == pytest.approx(adjust([p_xy, p_xz])[0][0])
    assert rows["x", "z", "ndcg@10"]["p_adjusted"] == pytest.approx(adjust([p_xy, p_xz])[0][1])
    # recall@100: x and y are both 1.0 everywhere: degenerate, out of the family, so x/z stands alone
    assert rows["x", "y", "recall@100"]["degenerate"] and rows["x", "y", "recall@100"]["p_adjusted"] is None
    alone = rows["x", "z", "recall@100"]
    assert alone["p_adjusted"] == pytest.approx(alone["p_value"])  # a family of one
    assert alone["wins"] == 1 and alone["ties"] == 9 and alone["losses"] == 0
    assert rows["x", "y", "ndcg@10"]["d_z"] == pytest.approx(
        np.mean(np.subtract(A, B)) / np.std(np.subtract(A, B), ddof=1), abs=1e-4)


def test_comparisons_are_resolved_by_name():
    labels = ["route:bm25", "route:dense", "fusion:rrf", "fusion:adaptive", "default"]
    got = resolve_comparisons("adaptive/best,rrf/route:dense,default/bm25", labels, ["rrf", "adaptive"], "dense")
    assert got == [("fusion:adaptive", "route:dense"), ("fusion:rrf", "route:dense"),
                   ("default", "route:bm25")]
    assert resolve_comparisons(None, labels, ["rrf", "adaptive"], "dense")[-1] == ("default", "route:dense")
    with pytest.raises(EvalConfigError, match="unknown comparison side"):
        resolve_comparisons("nope/best", labels, [], "dense")
    with pytest.raises(EvalConfigError, match="A/B"):
        resolve_comparisons("adaptive", labels, [], "dense")


def test_the_correction_is_statsmodels_multipletests_when_installed():
    """The eval extra installs statsmodels: Holm's adjusted p-values are its own, and known:
    p = (0.01, 0.04, 0.03) over three tests -> (0.03, 0.06, 0.06)."""
    from lar_evals.significance import adjust

    got, by = adjust([0.01, 0.04, 0.03], "holm")
    assert by == "statsmodels"
    assert got == pytest.approx([0.03, 0.06, 0.06])
