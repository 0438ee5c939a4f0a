"""Comparisons between routes, fusion policies and the default search.

* :func:`significance`: two-sided paired tests (Student's t or Fisher's randomisation, ranx's
  functions) of the comparisons asked for (by default RRF vs route-unique and every policy and
  the default search vs the best single route), corrected within each metric's family, with
  bootstrap confidence intervals of the differences (:mod:`lar_evals.significance`).
* :func:`route_unique_relevant`: for every relevant (query, document) pair, which routes found
  it within their first ``k`` hits; a pair found by exactly one route is *route-unique*, and
  ``recovered_by`` counts how many of those each policy (and the default search) kept in its top
  ``k``.
* :func:`per_type_breakdown`: metric means per query type (queries that carry ``type``).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from lar_evals.errors import EvalConfigError

if TYPE_CHECKING:  # pragma: no cover
    from lar_evals.data import BeirData
    from lar_evals.evaluation import BeirEvaluation

ALPHA = 0.05


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (NaN and None count as 1):
    :func:`lar_evals.significance.adjust` with ``holm``."""
    from lar_evals.significance import adjust

    p = [1.0 if (v is None or math.isnan(v)) else float(v) for v in pvalues]
    return adjust(p, "holm")[0]


def best_route(ev: "BeirEvaluation", routes: Sequence[str], metric: str) -> str | None:
    """The route with the highest mean ``metric`` (first in route order on ties)."""
    best, value = None, -math.inf
    for r in routes:
        v = ev.summary.get("routes", {}).get(r, {}).get(metric)
        if v is not None and v > value:
            best, value = r, v
    return best


def default_comparisons(fusion: Sequence[str], best: str | None) -> list[tuple[str, str]]:
    """RRF against route-unique, and every policy and the default search against the best
    route."""
    pairs = []
    if "rrf" in fusion and "route-unique" in fusion:
        pairs.append(("fusion:rrf", "fusion:route-unique"))
    if best is not None:
        pairs += [(f"fusion:{p}", f"route:{best}") for p in fusion]
        pairs.append(("default", f"route:{best}"))
    return pairs


def resolve_comparisons(spec: Sequence[str] | str | None, labels: Sequence[str],
                        fusion: Sequence[str], best: str | None) -> list[tuple[str, str]]:
    """The comparisons to test: ``spec`` as ``a:b`` pairs (``a,b`` a label such as
    ``route:bm25``, ``fusion:rrf``, a bare route or policy name, ``default``, or ``best`` for
    the best route), or :func:`default_comparisons` when ``spec`` is None."""
    if spec is None:
        return default_comparisons(fusion, best)
    if isinstance(spec, str):
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    known = list(labels)

    def label(name: str) -> str:
        if name == "best":
            if best is None:
                raise EvalConfigError("'best' names the best route, and no route scored")
            return f"route:{best}"
        if name in known:
            return name
        hits = [lab for lab in known if lab.split(":", 1)[-1] == name]
        if len(hits) != 1:
            raise EvalConfigError(f"unknown comparison side {name!r}; known: {', '.join(known)}, best")
        return hits[0]

    out: list[tuple[str, str]] = []
    for item in spec:
        a, sep, b = item.partition("/")
        if not sep or not a or not b:
            raise EvalConfigError(f"a comparison is A/B (e.g. adaptive/best or fusion:rrf/route:bm25), "
                                  f"got {item!r}")
        pair = (label(a.strip()), label(b.strip()))
        if pair[0] == pair[1]:
            raise EvalConfigError(f"comparison {item!r} compares a list with itself")
        if pair not in out:
            out.append(pair)
    return out


def significance(ev: "BeirEvaluation", routes: Sequence[str], fusion: Sequence[str],
                 metrics: Sequence[str], alpha: float = ALPHA, *, comparisons=None,
                 stat_test: str = "student", correction: str = "holm",
                 n_permutations: int = 10000, n_bootstrap: int = 2000, seed: int = 0
                 ) -> dict[str, Any]:
    """Paired tests of the comparisons, corrected per metric (:mod:`lar_evals.significance`)."""
    from lar_evals.significance import paired_tests

    best = best_route(ev, routes, metrics[0])
    labels = [f"route:{r}" for r in routes] + [f"fusion:{p}" for p in fusion] + ["default"]
    pairs = resolve_comparisons(comparisons, labels, fusion, best)
    out = paired_tests(ev.per_query, pairs, metrics, sorted(ev.qrels), stat_test=stat_test,
                       correction=correction, alpha=alpha, n_permutations=n_permutations,
                       n_bootstrap=n_bootstrap, seed=seed)
    out["best_route"], out["best_route_metric"] = best, metrics[0]
    return out


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
                metrics: Sequence[str], k: int, **tests: Any) -> dict[str, Any]:
    """The ``comparisons`` section of the summary (``tests``: options of :func:`significance`)."""
    return {"significance": significance(ev, routes, fusion, metrics, **tests),
            "route_unique_relevant": route_unique_relevant(ev, routes, fusion, k)}


__all__ = ["ALPHA", "best_route", "compare_all", "default_comparisons", "holm",
           "per_type_breakdown", "resolve_comparisons", "route_unique_relevant", "significance"]
