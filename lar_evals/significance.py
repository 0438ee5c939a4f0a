"""Paired significance tests, corrected within a declared family, with effect sizes.

:func:`paired_tests` takes per-query metric values (``{label: {metric: {qid: value}}}``, what
ranx computed) and a list of comparisons ``(a, b)`` and returns one row per (comparison,
metric):

* ``p_value``: two-sided paired test over the queries, ranx's own functions on the per-query
  values: ``student`` (paired t-test, ``ranx.statistical_tests.paired_student_t_test``, i.e.
  scipy's ``ttest_rel``) or ``fisher`` (Fisher's randomisation test,
  ``ranx.statistical_tests.fisher_randomization_test``, ``n_permutations`` seeded permutations);
* ``p_adjusted``: corrected for multiple comparisons **within each metric's family** (the
  comparisons asked for, on that metric); a *degenerate* comparison (both lists score the same
  on every query, e.g. recall@100 at 1.0 for both) has no p-value, is left out of its family and
  is marked ``degenerate``. The correction is statsmodels' ``multipletests`` when statsmodels is
  installed (``correction_by: "statsmodels"``), else the same procedure here (Holm, Bonferroni;
  Benjamini-Hochberg through scipy's ``false_discovery_control``);
* ``delta`` (mean of a - b), its bootstrap confidence interval (``ci_low``, ``ci_high``:
  scipy's ``bootstrap``, percentile method, ``n_bootstrap`` seeded resamples of the per-query
  differences) and ``d_z``, the paired standardised effect (mean difference over the standard
  deviation of the differences; None when they do not vary).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from lar_evals.errors import EvalConfigError

STAT_TESTS = ("student", "fisher")
CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
ALPHA = 0.05

__all__ = ["ALPHA", "CORRECTIONS", "STAT_TESTS", "adjust", "bootstrap_ci", "check_test",
           "paired_test", "paired_tests"]


def check_test(stat_test: str, correction: str) -> None:
    if stat_test not in STAT_TESTS:
        raise EvalConfigError(f"unknown test {stat_test!r}; choose one of {', '.join(STAT_TESTS)}")
    if correction not in CORRECTIONS:
        raise EvalConfigError(f"unknown correction {correction!r}; choose one of "
                              f"{', '.join(CORRECTIONS)}")


def _statsmodels_multipletests():
    try:
        from statsmodels.stats.multitest import multipletests
    except ImportError:
        return None
    return multipletests


def adjust(pvalues: Sequence[float], method: str = "holm") -> tuple[list[float], str]:
    """Adjusted p-values in the input order, and what computed them (``statsmodels`` or
    ``lar_evals``). ``method``: ``holm``, ``bonferroni``, ``fdr_bh`` or ``none``."""
    if method not in CORRECTIONS:
        raise EvalConfigError(f"unknown correction {method!r}; choose one of {', '.join(CORRECTIONS)}")
    p = [float(v) for v in pvalues]
    if not p or method == "none":
        return list(p), "none"
    multipletests = _statsmodels_multipletests()
    if multipletests is not None:
        return [float(v) for v in multipletests(p, method=method)[1]], "statsmodels"
    m = len(p)
    if method == "bonferroni":
        return [min(1.0, v * m) for v in p], "lar_evals"
    if method == "fdr_bh":
        from scipy.stats import false_discovery_control

        return [float(v) for v in false_discovery_control(p, method="bh")], "scipy"
    adjusted = [1.0] * m  # Holm: the i-th smallest times (m - i), made monotone, capped at 1
    running = 0.0
    for i, idx in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - i) * p[idx]))
        adjusted[idx] = running
    return adjusted, "lar_evals"


def paired_test(a: Sequence[float], b: Sequence[float], stat_test: str = "student",
                n_permutations: int = 10000, seed: int = 0) -> float | None:
    """Two-sided p-value of a paired test of ``a`` against ``b`` (ranx's tests); None when the
    two are equal on every query (no test is defined)."""
    import numpy as np
    from lar.core.errors import require

    require("ranx", "eval")
    from ranx.statistical_tests import fisher_randomization_test, paired_student_t_test

    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(xa) < 2 or np.array_equal(xa, xb):
        return None
    if stat_test == "fisher":
        p, _ = fisher_randomization_test(xa, xb, int(n_permutations), ALPHA, int(seed))
    else:
        p, _ = paired_student_t_test(xa, xb, ALPHA)
    p = float(p)
    return None if math.isnan(p) else p


def bootstrap_ci(diffs: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the paired differences (scipy)."""
    import numpy as np
    from scipy.stats import bootstrap

    d = np.asarray(diffs, dtype=np.float64)
    if len(d) < 2 or np.all(d == d[0]):
        return float(d.mean()) if len(d) else 0.0, float(d.mean()) if len(d) else 0.0
    res = bootstrap((d,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                    method="percentile", random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def paired_tests(per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
                 comparisons: Sequence[tuple[str, str]], metrics: Sequence[str],
                 qids: Sequence[str], *, stat_test: str = "student", correction: str = "holm",
                 alpha: float = ALPHA, n_permutations: int = 10000, n_bootstrap: int = 2000,
                 confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """The rows of the module docstring, and how they were made."""
    import numpy as np

    check_test(stat_test, correction)
    tests: list[dict[str, Any]] = []
    used = "none"
    for m in metrics:
        family: list[dict[str, Any]] = []
        for a, b in comparisons:
            xa = np.array([per_query.get(a, {}).get(m, {}).get(q, 0.0) for q in qids], dtype=np.float64)
            xb = np.array([per_query.get(b, {}).get(m, {}).get(q, 0.0) for q in qids], dtype=np.float64)
            d = xa - xb
            p = paired_test(xa, xb, stat_test, n_permutations, seed) if len(qids) >= 2 else None
            lo, hi = bootstrap_ci(d, confidence, n_bootstrap, seed)
            sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
            row = {"a": a, "b": b, "metric": m,
                   "mean_a": round(float(xa.mean()), 4) if len(xa) else None,
                   "mean_b": round(float(xb.mean()), 4) if len(xb) else None,
                   "delta": round(float(d.mean()), 4) if len(d) else None,
                   "ci_low": round(lo, 4), "ci_high": round(hi, 4),
                   "d_z": round(float(d.mean()) / sd, 4) if sd > 0 else None,
                   "wins": int((d > 0).sum()), "losses": int((d < 0).sum()),
                   "ties": int((d == 0).sum()),
                   "p_value": p, "degenerate": p is None, "p_adjusted": None, "significant": False}
            family.append(row)
        live = [r for r in family if r["p_value"] is not None]
        adjusted, by = adjust([r["p_value"] for r in live], correction)
        if live:
            used = by
        for r, adj in zip(live, adjusted):
            r["p_adjusted"] = adj
            r["significant"] = adj < alpha
        tests.extend(family)
    return {"stat_test": f"{stat_test} (two-sided, paired)", "correction": correction,
            "correction_by": used, "family": "per metric: the comparisons listed, degenerate "
            "ones left out", "alpha": alpha, "confidence": confidence,
            "n_bootstrap": n_bootstrap, "n_permutations": n_permutations if stat_test == "fisher"
            else None, "seed": seed, "comparisons": [list(c) for c in comparisons], "tests": tests}
