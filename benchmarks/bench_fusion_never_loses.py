"""Does the default fusion ever lose to its best route? Every set x layer subset x timebox.

    python benchmarks/bench_fusion_never_loses.py \
        --set squad2-mini ../shared/benchmarks/squad2-mini test RUNS/base-squad2-mini-test,RUNS/sparse-squad2-mini-test \
        --set cosqa-2k SETS/cosqa-2k dev RUNS/base-cosqa-2k-dev,RUNS/sparse-cosqa-2k-dev ... \
        --max-queries 100 --old-model OLD.json --out benchmarks/results/DATE-fusion-never-loses

Reads recorded route lists (``route-lists.jsonl.gz`` of ``lar eval beir``; nothing is searched
again), on a seeded sample of each set's queries, each route's list cut to ``--depth``.

1. **Fit.** Every set over every layer subset of :data:`SUBSETS` it has (at least two routes)
   is one case of :mod:`lar_evals.fit_minimax`; the weights are fitted leave-one-corpus-out
   (on the other sets' cases) and, for ``--fit-out``, once on all cases (written as a model; the
   packaged one is not this fit, see the results note).
2. **Score.** For each set, subset and timebox: the best single route, RRF, the current default
   (``--old-model``, the model this branch started from, without the slot guard) and the new
   default (the weights fitted without this set, with the slot guard), all through lar's own
   fusion (:func:`lar.fusion.adaptive.adaptive_fusion` on the documents' lists, as the fit
   harness fuses), nDCG@10, and the gap new - best. ``cheap`` is the new default over the
   routes the timebox left complete (the stage a cut-short layer must not pull below).

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
from lar.fusion.model import FusionModel, RouteWeights, load_model
from lar.fusion.policies import fuse
from lar_evals.fit import load_set
from lar_evals.fit_data import QueryBatch, query_data
from lar_evals.fit_minimax import fit_minimax, leave_one_out, make_case

SUBSETS = {"all": None,
           "lexical": ("names", "grep", "trigram", "symbols", "bm25", "derived"),
           "lexical+static": ("names", "grep", "trigram", "symbols", "bm25", "derived", "static", "fuzzy"),
           "dense+late": ("dense", "late"),
           "grep+bm25+static": ("grep", "bm25", "static")}
COST_MS = {"names": 30, "symbols": 15, "trigram": 15, "fuzzy": 5, "grep": 296, "bm25": 385,
           "derived": 1055, "sparse": 1000, "static": 1121, "dense": 1607, "late": 9932}
SCANNING = ("grep", "static", "dense", "late")
NORM = "zscore"


def read_share(doc: str, route: str) -> float:
    h = hashlib.blake2b(f"{route}\0{doc}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


def at_timebox(lists, timebox: float):
    """``(lists, partial routes)`` as a search with this timebox would get them (simulated)."""
    out, partial = {}, []
    for r, items in lists.items():
        cost = COST_MS.get(r, 100) / 1000.0
        if cost <= timebox:
            out[r] = items
        elif r in SCANNING:
            cov = timebox / cost
            kept = [(d, s) for d, s in items if read_share(d, r) < cov]
            if kept:
                out[r], partial = kept, partial + [r]
    return out, partial


def ndcg10(ranking, qrels):
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    dcg = sum((2 ** qrels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    return dcg / idcg if idcg > 0 else 0.0


def load(specs, max_queries: int, depth: int):
    sets = {}
    for name, beir, split, runs in specs:
        fs = load_set(beir, split, runs)
        qids = sorted(fs.lists)
        random.Random(0).shuffle(qids)
        qids = sorted(qids[:max_queries])
        sets[name] = {"qrels": {q: fs.qrels[q] for q in qids},
                      "lists": {q: {r: v[:depth] for r, v in fs.lists[q].items() if v} for q in qids}}
    return sets


def subset_routes(data, subset):
    have = sorted({r for per in data["lists"].values() for r in per})
    spec = SUBSETS[subset]
    return have if spec is None else [r for r in have if r in spec]


def cases_of(sets, routes):
    cases = []
    for name, data in sets.items():
        for subset in SUBSETS:
            sub = subset_routes(data, subset)
            if len(sub) < 2:
                continue
            qs = [query_data({r: v for r, v in data["lists"][q].items() if r in sub}, routes, data["qrels"][q], NORM)
                  for q in sorted(data["qrels"]) if any(r in sub for r in data["lists"][q])]
            cases.append(make_case(name, subset, QueryBatch(qs), routes, sub))
    return cases


def model_of(params, routes, default: float, **meta) -> FusionModel:
    return FusionModel({r: RouteWeights(float(p[0])) for r, p in zip(routes, params)},
                       RouteWeights(default), norm=NORM, **meta)


def score_cell(data, sub, timebox, models):
    """nDCG@10 of the best route, RRF, each of ``models`` (``{label: (model, slot guard)}``) and
    ``cheap`` (the ``"new"`` model over the routes the timebox left complete)."""
    vals: dict[str, list[float]] = {k: [] for k in ("rrf", *models, "cheap")}
    per_route: dict[str, list[float]] = {r: [] for r in sub}
    for q, qrels in data["qrels"].items():
        lists, partial = at_timebox({r: v for r, v in data["lists"][q].items() if r in sub}, timebox)
        for r in sub:
            per_route[r].append(ndcg10([d for d, _ in lists.get(r, [])], qrels))
        if not lists:
            for key in vals:
                vals[key].append(0.0)
            continue
        vals["rrf"].append(ndcg10([it.key for it in fuse("rrf", lists, k=10)], qrels))
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
               gap_current=round(out["current"] - means[best], 4),
               gap_loco=round(out["minimax-loco"] - means[best], 4))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", nargs=4, action="append", required=True, metavar=("NAME", "BEIR", "SPLIT", "RUNS"))
    ap.add_argument("--max-queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--timeboxes", default="0.1,0.5,2,inf")
    ap.add_argument("--old-model", default=None, help="the current default's model (default: the packaged one)")
    ap.add_argument("--new-model", default=None,
                    help="the new default's model (default: the packaged one); the minimax fit, held "
                         "out per corpus, is scored beside it")
    ap.add_argument("--default-weight", type=float, default=0.25,
                    help="the weight of a route no set had (default 0.25)")
    ap.add_argument("--fit-out", default=None, help="write the model fitted on every case here")
    ap.add_argument("--out", default=None, help="prefix of the .json results")
    args = ap.parse_args(argv)
    t0 = time.time()
    old = load_model(args.old_model)
    sets = load(args.set, args.max_queries, args.depth)
    routes = sorted({r for d in sets.values() for per in d["lists"].values() for r in per})
    cases = cases_of(sets, routes)
    loco = leave_one_out(cases, routes)
    final = fit_minimax(cases, routes)
    trained = tuple(f"{n} ({len(d['qrels'])} queries)" for n, d in sets.items())
    if args.fit_out:
        known = {"names", "symbols", "trigram"} - set(routes)  # exact-match kin of grep, if unseen
        model = model_of(final, routes, args.default_weight, name="adaptive-minimax", trained_on=trained,
                         info={"fit": "lar_evals.fit_minimax: base weights by coordinate ascent, mean gap to "
                                      "each case's best route with 4x penalty below -0.005; cases = sets x "
                                      "layer subsets (benchmarks/bench_fusion_never_loses.py)",
                               "held_out": {c.corpus + "/" + c.subset: {"new": round(v, 4), "best": round(c.best, 4),
                                                                        "best_route": c.best_route}
                                            for _, (_, got) in sorted(loco.items()) for c, v in got}})
        if known and "grep" in routes:
            g = dict(model.routes)["grep"]
            model = FusionModel({**model.routes, **{r: g for r in known}}, model.default, model.name,
                                model.trained_on, {**model.info, "copied_from_grep": sorted(known)}, model.norm)
        model.save(args.fit_out)
        print(f"wrote {args.fit_out}: " + ", ".join(f"{r} {w.base:g}" for r, w in sorted(model.routes.items())))
    boxes = [math.inf if b.strip() == "inf" else float(b) for b in args.timeboxes.split(",")]
    rows = []
    newm = load_model(args.new_model)
    print("| set | layers | timebox s | best route | best | rrf | current | minimax LOCO | cheap | new | "
          "new - best | current - best | LOCO - best |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, data in sets.items():
        held = model_of(loco[name][0], routes, args.default_weight, name=f"without-{name}")
        models = {"current": (old, False), "minimax-loco": (held, True), "new": (newm, True)}
        for subset in SUBSETS:
            sub = subset_routes(data, subset)
            if len(sub) < 2:
                continue
            for tb in boxes:
                cell = score_cell(data, sub, tb, models)
                rows.append({"set": name, "subset": subset, "timebox_s": tb, **cell})
                print(f"| {name} | {subset} | {tb:g} | {cell['best_route']} | {cell['best']:.4f} | {cell['rrf']:.4f} | "
                      f"{cell['current']:.4f} | {cell['minimax-loco']:.4f} | {cell['cheap']:.4f} | {cell['new']:.4f} | "
                      f"{cell['gap']:+.4f} | {cell['gap_current']:+.4f} | {cell['gap_loco']:+.4f} |", flush=True)
    nodl = [r for r in rows if r["timebox_s"] == math.inf]
    below_cheap = sum(r["new"] < r["cheap"] - 0.005 for r in rows if r["timebox_s"] != math.inf)
    print(f"\ncells: {len(rows)}; more than 0.5 point below the best route: new {sum(r['gap'] < -0.005 for r in rows)}, "
          f"current {sum(r['gap_current'] < -0.005 for r in rows)}, minimax LOCO {sum(r['gap_loco'] < -0.005 for r in rows)}; "
          f"mean gap without deadline: new {np.mean([r['gap'] for r in nodl]):+.4f}, current "
          f"{np.mean([r['gap_current'] for r in nodl]):+.4f}, minimax LOCO {np.mean([r['gap_loco'] for r in nodl]):+.4f}; "
          f"new below its cheap stage by > 0.5 point: {below_cheap} cells; {time.time() - t0:.0f} s")
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(
            {"rows": rows, "weights_final": {r: float(p[0]) for r, p in zip(routes, final)},
             "weights_loco": {n: {r: float(p[0]) for r, p in zip(routes, ps)} for n, (ps, _) in loco.items()},
             "settings": vars(args)}, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
