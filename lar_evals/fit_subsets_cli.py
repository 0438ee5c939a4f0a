"""``python -m lar_evals fit --method subsets``: the packaged default's fit (:mod:`lar_evals.fit_subsets`)
from recorded route lists, with its leave-one-corpus-out figures.

Each ``--set`` is one corpus (its BEIR folder, split and runs dirs, as for the other methods);
``--max-queries`` takes a seeded sample of its queries (the sample
``benchmarks/bench_fusion_never_loses.py`` scores) and ``--depth`` cuts each route's list. The
cases are every corpus over every layer subset of :data:`SUBSETS` and over the routes each of
:data:`TIMEBOXES` leaves complete (:data:`COST_MS`, mean single-route query times on 2 loaded
cores), with at least two routes.
"""
from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

import numpy as np

from lar_evals.fit_subsets import DecisionBatch, SubsetCase, fit_decisions, leave_one_corpus_out, to_model

SUBSETS: Mapping[str, tuple[str, ...] | None] = {
    "all": None,
    "lexical": ("names", "grep", "trigram", "symbols", "bm25", "derived"),
    "lexical+static": ("names", "grep", "trigram", "symbols", "bm25", "derived", "static", "fuzzy"),
    "dense+late": ("dense", "late"),
    "grep+bm25+static": ("grep", "bm25", "static")}
COST_MS: Mapping[str, float] = {"names": 30, "symbols": 15, "trigram": 15, "fuzzy": 5, "grep": 296, "bm25": 385,
                                "derived": 1055, "sparse": 1000, "static": 1121, "dense": 1607, "late": 9932}
TIMEBOXES: tuple[float, ...] = (0.1, 0.5, 2.0, math.inf)
#: the base weight of a route no case had (a new layer)
DEFAULT_WEIGHT = 0.1
NORM = "zscore"


def ndcg10(ranking: Sequence[str], qrels: Mapping[str, int]) -> float:
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    dcg = sum((2 ** qrels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    return dcg / idcg if idcg > 0 else 0.0


def sample(fs, max_queries: int | None, depth: int) -> dict[str, Any]:
    """``{"qrels", "lists"}`` of a :class:`lar_evals.fit.FitSet` on a seeded sample of its queries."""
    qids = sorted(fs.lists)
    random.Random(0).shuffle(qids)
    qids = sorted(qids[:max_queries] if max_queries else qids)
    return {"qrels": {q: fs.qrels[q] for q in qids},
            "lists": {q: {r: v[:depth] for r, v in fs.lists[q].items() if v} for q in qids}}


def subset_routes(data, subset: str) -> list[str]:
    have = sorted({r for per in data["lists"].values() for r in per})
    spec = SUBSETS[subset]
    return have if spec is None else [r for r in have if r in spec]


def fit_cases(sets: Mapping[str, Mapping[str, Any]], routes: Sequence[str],
              boxes: Sequence[float] = TIMEBOXES) -> list[SubsetCase]:
    """The fit's cases: every set over every subset and timebox's complete routes (>= 2 routes)."""
    cases = []
    for name, data in sets.items():
        seen = set()
        qs = sorted(data["qrels"])
        for subset in SUBSETS:
            sub = subset_routes(data, subset)
            for tb in sorted(boxes, reverse=True):
                present = tuple(r for r in sub if COST_MS.get(r, 100) / 1000.0 <= tb)
                if len(present) < 2 or present in seen:
                    continue
                seen.add(present)
                means = {r: float(np.mean([ndcg10([d for d, _ in data["lists"][q].get(r, [])], data["qrels"][q])
                                           for q in qs])) for r in present}
                best = max(means, key=lambda r: (means[r], r))
                batch = DecisionBatch([{r: v for r, v in data["lists"][q].items() if r in present} for q in qs],
                                      [data["qrels"][q] for q in qs], routes, NORM)
                cases.append(SubsetCase(name, f"{subset}@{tb:g}", present, batch, best, means[best]))
    return cases


def fit_all(sets: Mapping[str, Mapping[str, Any]], default: float = DEFAULT_WEIGHT):
    """``(packaged model fitted on every case, {corpus: model fitted without it}, cases, held-out
    surrogate nDCG@10 per case)``."""
    routes = sorted({r for d in sets.values() for per in d["lists"].values() for r in per})
    cases = fit_cases(sets, routes)
    loco = leave_one_corpus_out(cases, routes)
    held = {c: to_model(f, routes, default, name=f"without-{c}") for c, f in loco.items()}
    scores = {f"{c.corpus}/{c.subset}": {"new": round(loco[c.corpus].ndcg(c), 4), "best": round(c.best, 4),
                                        "best_route": c.best_route} for c in cases}
    trained = tuple(f"{n} ({len(d['qrels'])} queries)" for n, d in sets.items())
    info = {"fit": "lar_evals.fit_subsets: per-signature base weights, kind totals, exact-match pin and follow "
                   "rule by the minimax gap to each case's best route (4x penalty below half a point); cases = "
                   "sets x layer subsets x timeboxes (python -m lar_evals fit --method subsets)",
            "held_out": scores}
    final = to_model(fit_decisions(cases, routes), routes, default, name="adaptive-subsets", trained_on=trained,
                     info=info)
    return final, held, cases, scores


def run_subsets(args, load_set) -> int:
    """``lar_evals fit --method subsets`` (``load_set``: :func:`lar_evals.fit.load_set`)."""
    sets = {}
    for spec in args.set:
        fs = load_set(*spec)
        sets[fs.name] = sample(fs, args.max_queries, args.depth)
    model, held, _, scores = fit_all(sets)
    model.save(args.out)
    if args.report:
        from lar_evals.io import write_json

        write_json(args.report, {"held_out": scores, "held_out_models": {c: m.to_dict() for c, m in held.items()}})
    fails = sum(v["new"] < v["best"] - 0.005 for v in scores.values())
    for key, v in scores.items():
        print(f"{key}: held out {v['new']:.4f}, best route {v['best_route']} {v['best']:.4f}")
    print(f"{len(scores)} cases; held out (leave-one-corpus-out), {fails} more than half a point below "
          f"their best route; wrote {args.out}" + (f" and {args.report}" if args.report else ""))
    return 0


__all__ = ["COST_MS", "DEFAULT_WEIGHT", "SUBSETS", "TIMEBOXES", "fit_all", "fit_cases", "ndcg10", "run_subsets",
           "sample", "subset_routes"]
