"""Does the default fusion ever lose to its best route? Every set x layer subset x timebox.

    python benchmarks/bench_fusion_never_loses.py \
        --set squad2-mini ../shared/benchmarks/squad2-mini test RUNS/base-squad2-mini-test,RUNS/sparse-squad2-mini-test \
        --set cosqa-2k SETS/cosqa-2k dev RUNS/base-cosqa-2k-dev,RUNS/sparse-cosqa-2k-dev ... \
        --max-queries 100 --old-model OLD.json --out benchmarks/results/DATE-fusion-never-loses

Reads recorded route lists (``route-lists.jsonl.gz`` of ``lar eval beir``; nothing is searched
again), on a seeded sample of each set's queries, each route's list cut to ``--depth``.

1. **Fit.** :func:`lar_evals.fit_subsets_cli.fit_all`: every set over every layer subset of
   :data:`SUBSETS` and over the routes each timebox leaves complete is one case of
   :mod:`lar_evals.fit_subsets`; the model is fitted leave-one-corpus-out (on the other sets'
   cases) and, for ``--fit-out``, once on all cases (what ``python -m lar_evals fit --method
   subsets`` packages).
2. **Score.** For each set, subset and timebox: the best single route, RRF, route-unique, the
   previous default (``--old-model``) and the new default (the model fitted without this set),
   all through lar's own fusion (:func:`lar.fusion.adaptive.adaptive_fusion` on the documents'
   lists, with the slot guard), nDCG@10, the gap to the best route and a paired test of each
   default against it (:func:`paired_p`, Fisher's randomisation test on the per-query nDCG@10). ``cheap`` is the new
   default over the routes the timebox left complete (the stage a cut-short layer must not
   pull below).

Timeboxes are simulated on the recorded lists, from :data:`COST_MS` (mean single-route query
times of ``benchmarks/results/2026-11-30-evals-stdlib-mixed.json``, 2 loaded cores): a scanning
route (:data:`SCANNING`) whose cost exceeds the timebox is cut short at coverage timebox / cost
and keeps only the documents of a seeded share of the corpus (a stable hash of document and
route); an index route whose cost exceeds the timebox is missing. ``inf`` is no deadline.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.model import load_model
from lar.fusion.policies import fuse
from lar_evals.fit import load_set
from lar_evals.fit_subsets_cli import COST_MS, SUBSETS, fit_all, ndcg10, sample, subset_routes

SCANNING = ("grep", "static", "dense", "late")
NORM = "zscore"


def read_share(doc: str, route: str) -> float:
    h = hashlib.blake2b(f"{route}\0{doc}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


def at_timebox(lists, timebox: float):
    """``(lists, {partial route: coverage})`` as a search with this timebox would get them
    (simulated; the engine reports a cut-short scan's coverage on its run, and the fusion reads it)."""
    out, partial = {}, {}
    for r, items in lists.items():
        cost = COST_MS.get(r, 100) / 1000.0
        if cost <= timebox:
            out[r] = items
        elif r in SCANNING:
            cov = timebox / cost
            kept = [(d, s) for d, s in items if read_share(d, r) < cov]
            if kept:
                out[r], partial[r] = kept, cov
    return out, partial


def paired_p(a, b) -> float:
    """Fisher's randomisation test (scipy's paired permutation test, 10,000 resamples, seeded)
    of per-query figures ``a`` against ``b``: the two-sided p-value of their mean difference."""
    from scipy.stats import permutation_test

    if all(x == y for x, y in zip(a, b)):
        return 1.0
    res = permutation_test((np.asarray(a), np.asarray(b)), lambda x, y: np.mean(x - y),
                           permutation_type="samples", n_resamples=10_000, random_state=0)
    return float(res.pvalue)


def load(specs, max_queries: int, depth: int):
    return {name: sample(load_set(beir, split, runs), max_queries, depth) for name, beir, split, runs in specs}


def score_cell(data, sub, timebox, models):
    """nDCG@10 of the best route, RRF, route-unique, each of ``models`` (``{label: (model, slot
    guard)}``) and ``cheap`` (the ``"new"`` model over the routes the timebox left complete)."""
    vals: dict[str, list[float]] = {k: [] for k in ("rrf", "route-unique", *models, "cheap")}
    per_route: dict[str, list[float]] = {r: [] for r in sub}
    for q, qrels in data["qrels"].items():
        lists, partial = at_timebox({r: v for r, v in data["lists"][q].items() if r in sub}, timebox)
        for r in sub:
            per_route[r].append(ndcg10([d for d, _ in lists.get(r, [])], qrels))
        if not lists:
            for key in vals:
                vals[key].append(0.0)
            continue
        for policy in ("rrf", "route-unique"):
            vals[policy].append(ndcg10([it.key for it in fuse(policy, lists, k=10)], qrels))
        for label, (model, guard) in models.items():
            got = adaptive_fusion(lists, k=10, model=model, partial=partial, guard_slots=guard)[0]
            vals[label].append(ndcg10([it.key for it in got], qrels))
        done = {r: v for r, v in lists.items() if r not in partial}
        cheap = adaptive_fusion(done, k=10, model=models["new"][0])[0] if done else []
        vals["cheap"].append(ndcg10([it.key for it in cheap], qrels))
    means = {r: float(np.mean(v)) for r, v in per_route.items()}
    best = max(means, key=lambda r: (means[r], r))
    out = {k: round(float(np.mean(v)), 4) for k, v in vals.items()}
    out.update(best_route=best, best=round(means[best], 4), gap=round(out["new"] - means[best], 4),
               gap_previous=round(out["previous"] - means[best], 4),
               p_new=round(paired_p(vals["new"], per_route[best]), 4),
               p_previous=round(paired_p(vals["previous"], per_route[best]), 4))
    out["per_query"] = {"new": vals["new"], "previous": vals["previous"]}  # popped by main
    return out


def summary(rows, key):
    gaps = [r[key] for r in rows]
    worst = min(rows, key=lambda r: r[key])
    p = "p_new" if key == "gap" else "p_previous"
    return {"failing": sum(g < -0.005 for g in gaps), "cells": len(gaps), "worst": round(worst[key], 4),
            "failing_significant": sum(r[key] < -0.005 and r[p] < 0.05 for r in rows),
            "worst_cell": f"{worst['set']} {worst['subset']} {worst['timebox_s']:g}",
            "mean_gap_no_deadline": round(float(np.mean([r[key] for r in rows if r["timebox_s"] == math.inf])), 4)}


def monotone_drops(rows, label, per_query=None):
    """Cells whose ``label`` figure is more than half a point below the same set and subset at
    a shorter timebox: ``"SET SUBSET TIMEBOX"``, with `` (-GAP vs SHORTER s, p P)`` when
    ``per_query`` (``{(set, subset, timebox): {label: [nDCG@10 per query]}}``) gives the paired
    test of the drop against the best shorter timebox (the same queries)."""
    drops = []
    for r in rows:
        shorter = [o for o in rows if o["set"] == r["set"] and o["subset"] == r["subset"]
                   and o["timebox_s"] < r["timebox_s"]]
        if shorter and r[label] < max(o[label] for o in shorter) - 0.005:
            line = f"{r['set']} {r['subset']} {r['timebox_s']:g}"
            if per_query is not None:
                top = max(shorter, key=lambda o: o[label])
                a = per_query[(r["set"], r["subset"], r["timebox_s"])][label]
                b = per_query[(top["set"], top["subset"], top["timebox_s"])][label]
                line += f" ({r[label] - top[label]:+.4f} vs {top['timebox_s']:g} s, p {paired_p(a, b):.3f})"
            drops.append(line)
    return drops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", nargs=4, action="append", required=True, metavar=("NAME", "BEIR", "SPLIT", "RUNS"))
    ap.add_argument("--max-queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--timeboxes", default="0.1,0.5,2,inf")
    ap.add_argument("--old-model", default=None, help="the current default's model (default: the packaged one)")
    ap.add_argument("--default-weight", type=float, default=0.1,
                    help="the weight of a route no set had (default 0.1)")
    ap.add_argument("--fit-out", default=None, help="write the model fitted on every case here")
    ap.add_argument("--out", default=None, help="prefix of the .json results")
    args = ap.parse_args(argv)
    t0 = time.time()
    old = load_model(args.old_model)
    sets = load(args.set, args.max_queries, args.depth)
    boxes = [math.inf if b.strip() == "inf" else float(b) for b in args.timeboxes.split(",")]
    final, held, cases, _ = fit_all(sets, args.default_weight)
    print(f"{len(cases)} cases fitted, each corpus left out in turn and all together, {time.time() - t0:.0f} s",
          flush=True)
    if args.fit_out:
        final.save(args.fit_out)
        print(f"wrote {args.fit_out}", flush=True)
    rows, per_query = [], {}
    print("| set | layers | timebox s | best route | best | rrf | route-unique | previous | cheap | new | "
          "new - best | p | previous - best | p |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, data in sets.items():
        models = {"previous": (old, True), "new": (held[name], True)}
        for subset in SUBSETS:
            sub = subset_routes(data, subset)
            if len(sub) < 2:
                continue
            for tb in boxes:
                cell = score_cell(data, sub, tb, models)
                per_query[(name, subset, tb)] = cell.pop("per_query")
                rows.append({"set": name, "subset": subset, "timebox_s": tb, **cell})
                print(f"| {name} | {subset} | {tb:g} | {cell['best_route']} | {cell['best']:.4f} | {cell['rrf']:.4f} | "
                      f"{cell['route-unique']:.4f} | {cell['previous']:.4f} | {cell['cheap']:.4f} | {cell['new']:.4f} | "
                      f"{cell['gap']:+.4f} | {cell['p_new']:.3f} | {cell['gap_previous']:+.4f} | "
                      f"{cell['p_previous']:.3f} |", flush=True)
    res = {"new": summary(rows, "gap"), "previous": summary(rows, "gap_previous"),
           "new_below_cheap": sum(r["new"] < r["cheap"] - 0.005 for r in rows if r["timebox_s"] != math.inf),
           "monotone_drops_new": monotone_drops(rows, "new", per_query),
           "monotone_drops_previous": monotone_drops(rows, "previous", per_query), "seconds": round(time.time() - t0)}
    print(json.dumps(res, indent=1))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(
            {"rows": rows, "summary": res,
             "held_out_models": {c: m.to_dict() for c, m in held.items()},
             "settings": vars(args)}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
