"""Comparisons between routes, fusion policies and the default search.

* :func:`significance`: two-sided paired Student t-tests (``ranx.compare(..., stat_test=
  "student")``) of RRF vs route-unique and of every policy (and the default search) vs the best
  single route, per metric, with a Holm-Bonferroni correction over the whole family of tests.
* :func:`route_unique_relevant`: for every relevant (query, document) pair, which routes found
  it within their first ``k`` hits; a pair found by exactly one route is *route-unique*, and
  ``recovered_by`` counts how many of those each policy (and the default search) kept in its top
  ``k``.
* :func:`per_type_breakdown`: metric means per query type (queries that carry ``type``).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from lar_evals.metrics import to_run_dict

if TYPE_CHECKING:  # pragma: no cover
    from lar_evals.data import BeirData
    from lar_evals.evaluation import BeirEvaluation

ALPHA = 0.05


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    Sorted ascending, the i-th smallest (0-based) is multiplied by ``m - i``, capped at 1, and
    made monotone (never below the adjusted value before it). NaN counts as 1.
    """
    p = [1.0 if (v is None or math.isnan(v)) else float(v) for v in pvalues]
    m = len(p)
    adjusted = [1.0] * m
    running = 0.0
    for i, idx in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - i) * p[idx]))
        adjusted[idx] = running
    return adjusted


def best_route(ev: "BeirEvaluation", routes: Sequence[str], metric: str) -> str | None:
    """The route with the highest mean ``metric`` (first in route order on ties)."""
    best, value = None, -math.inf
    for r in routes:
        v = ev.summary.get("routes", {}).get(r, {}).get(metric)
        if v is not None and v > value:
            best, value = r, v
    return best


def _pairs(routes: Sequence[str], fusion: Sequence[str], best: str | None) -> list[tuple[str, str]]:
    pairs = []
    if "rrf" in fusion and "route-unique" in fusion:
        pairs.append(("fusion:rrf", "fusion:route-unique"))
    if best is not None:
        pairs += [(f"fusion:{p}", f"route:{best}") for p in fusion]
        pairs.append(("default", f"route:{best}"))
    return pairs


def significance(ev: "BeirEvaluation", routes: Sequence[str], fusion: Sequence[str],
                 metrics: Sequence[str], alpha: float = ALPHA) -> dict[str, Any]:
    """Paired t-tests with a Holm correction (see the module docstring)."""
    from lar.core.errors import require

    ranx = require("ranx", "eval")
    best = best_route(ev, routes, metrics[0])
    tests: list[dict[str, Any]] = []
    qids = sorted(ev.qrels)
    if len(qids) >= 2:
        qrels = ranx.Qrels.from_dict({q: dict(ev.qrels[q]) for q in qids})
        for a, b in _pairs(routes, fusion, best):
            run_a = ranx.Run.from_dict(to_run_dict(ev.rankings.get(a, {}), qids), name=a)
            run_b = ranx.Run.from_dict(to_run_dict(ev.rankings.get(b, {}), qids), name=b)
            rep = ranx.compare(qrels, [run_a, run_b], list(metrics), stat_test="student", max_p=alpha)
            for m in metrics:
                p = float(rep.comparisons[frozenset((a, b))][m]["p_value"])
                mean_a, mean_b = float(rep.results[a][m]), float(rep.results[b][m])
                tests.append({"a": a, "b": b, "metric": m, "mean_a": round(mean_a, 4),
                              "mean_b": round(mean_b, 4), "delta": round(mean_a - mean_b, 4),
                              "p_value": None if math.isnan(p) else p})
    for t, adj in zip(tests, holm([t["p_value"] for t in tests])):
        t["p_holm"] = adj
        t["significant"] = adj < alpha
    return {"stat_test": "student (two-sided, paired)", "correction": "holm", "alpha": alpha,
            "best_route": best, "best_route_metric": metrics[0], "tests": tests}


def route_unique_relevant(ev: "BeirEvaluation", routes: Sequence[str], fusion: Sequence[str],
                          k: int) -> dict[str, Any]:
    """Counts over relevant (query, document) pairs at depth ``k`` (first ``k`` hits)."""
    found_by = {r: 0 for r in routes}
    unique = {r: 0 for r in routes}
    labels = [f"fusion:{p}" for p in fusion] + ["default"]
    kept = {lab: 0 for lab in labels}
    recovered = {lab: 0 for lab in labels}
    both = {a: {b: 0 for b in routes} for a in routes}
    pairs = any_route = several = 0
    for qid in ev.qids:
        tops = {r: set(ev.top.get(f"route:{r}", {}).get(qid, ())) for r in routes}
        fused = {lab: set(ev.top.get(lab, {}).get(qid, ())) for lab in labels}
        for doc in ev.qrels.get(qid, {}):
            pairs += 1
            found = [r for r in routes if doc in tops[r]]
            for r in found:
                found_by[r] += 1
                for other in found:
                    both[r][other] += 1
            any_route += bool(found)
            several += len(found) > 1
            for lab in labels:
                if doc in fused[lab]:
                    kept[lab] += 1
                    if len(found) == 1:
                        recovered[lab] += 1
            if len(found) == 1:
                unique[found[0]] += 1

    def name(lab: str) -> str:
        return lab.split(":", 1)[-1]

    return {"k": k, "relevant_pairs": pairs, "found_by_any_route": any_route,
            "found_by_several_routes": several, "found_by_route": found_by,
            "route_unique": unique, "route_unique_total": sum(unique.values()),
            "recovered_by": {name(lab): n for lab, n in recovered.items()},
            "kept_by": {name(lab): n for lab, n in kept.items()},
            "pairwise": both}


def per_type_breakdown(ev: "BeirEvaluation", data: "BeirData", labels: Sequence[str],
                       metrics: Sequence[str]) -> dict[str, Any]:
    """``{"by_type": {type: {"n_queries", "routes": {...}, "fusion": {...}, "default": {...}}},
    "untyped_queries": n}`` from the per-query values (``by_type`` is empty when no scored query
    carries a type)."""
    by_type: dict[str, list[str]] = {}
    for q in ev.qids:
        t = data.query_type(q)
        if t is not None:
            by_type.setdefault(t, []).append(q)
    out: dict[str, Any] = {}
    for t, qs in sorted(by_type.items()):
        entry: dict[str, Any] = {"n_queries": len(qs), "routes": {}, "fusion": {}}
        for label in labels:
            vals = {}
            for m in metrics:
                per_q = ev.per_query.get(label, {}).get(m, {})
                xs = [per_q[q] for q in qs if q in per_q]
                vals[m] = round(sum(xs) / len(xs), 4) if xs else None
            if label == "default":
                entry["default"] = vals
            else:
                kind, name = label.split(":", 1)
                entry["routes" if kind == "route" else "fusion"][name] = vals
        out[t] = entry
    return {"by_type": out, "untyped_queries": len(ev.qids) - sum(len(v) for v in by_type.values())}


def compare_all(ev: "BeirEvaluation", routes: Sequence[str], fusion: Sequence[str],
                metrics: Sequence[str], k: int) -> dict[str, Any]:
    """The ``comparisons`` section of the summary."""
    return {"significance": significance(ev, routes, fusion, metrics),
            "route_unique_relevant": route_unique_relevant(ev, routes, fusion, k)}


__all__ = ["ALPHA", "best_route", "compare_all", "holm", "per_type_breakdown",
           "route_unique_relevant", "significance"]
