"""Half-built layers: does the default stay at or above its best route while indexes build?

    python benchmarks/bench_partial_coverage.py \
        --set squad2-mini ../shared/benchmarks/squad2-mini test RUNS/base-squad2-mini-test \
        --set cosqa-2k SETS/cosqa-2k dev RUNS/base-cosqa-2k-dev \
        --max-queries 100 --out benchmarks/results/DATE-partial-coverage

A small, replayable version of the first hour on a fresh folder
(``2026-12-03-first-hour-5k.md``): recorded route lists (``route-lists.jsonl.gz`` of ``lar eval
beir``; nothing is searched again) are cut down to what a search would get while the layers
build. In each :data:`SCENARIOS` row a route at coverage ``c`` below 1 keeps only the documents
of a seeded share ``c`` of the corpus (a stable hash of document and route: a partly built index
or a scan cut short answers from the units it has), a route at 0 is missing, a route not named
is complete. Every route so cut is passed to the fusion as partial, as the engine does
(:func:`lar.fusion.pipeline.covers_part`), with its coverage.

Per set and scenario: nDCG@10 of each route alone (as cut), of the complete routes' default
fusion (``cheap``), RRF and the default (:func:`lar.fusion.adaptive.adaptive_fusion` with the
packaged model, or ``--model``), and a paired test (ranx, Fisher's randomisation test) of the
default against the best single route.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from bench_fusion_never_loses import read_share
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.model import load_model
from lar.fusion.policies import fuse
from lar_evals.fit import load_set
from lar_evals.fit_subsets_cli import ndcg10, sample
from report_io import write_results

#: ``{scenario: {route: coverage}}``; routes not named are complete
SCENARIOS = {
    # the first minutes: the trigram index is built (grep, names, fuzzy, trigram, symbols answer),
    # bm25 and derived are building, grep's scan is cut short, no model layer yet
    "lexical building (bm25 30 %, derived 5 %, grep cut at 30 %)": {
        "bm25": 0.3, "derived": 0.05, "grep": 0.3, "static": 0.0, "dense": 0.0, "late": 0.0},
    "bm25 just started (bm25 5 %, derived 3 %, grep cut at 40 %)": {
        "bm25": 0.05, "derived": 0.03, "grep": 0.4, "static": 0.0, "dense": 0.0, "late": 0.0},
    # the same without fuzzy: its recorded list reranks the complete layers' pool, which a search
    # in the first minutes does not have; the complete routes left are the weak ones on prose
    "lexical building, no fuzzy": {
        "bm25": 0.3, "derived": 0.05, "grep": 0.3, "fuzzy": 0.0, "static": 0.0, "dense": 0.0, "late": 0.0},
    "bm25 just started, no fuzzy": {
        "bm25": 0.05, "derived": 0.03, "grep": 0.4, "fuzzy": 0.0, "static": 0.0, "dense": 0.0, "late": 0.0},
    "static building (static 40 %, no model layer)": {"static": 0.4, "dense": 0.0, "late": 0.0},
    "models building (dense 50 %, late 20 %)": {"dense": 0.5, "late": 0.2},
    "late building (late 30 %)": {"late": 0.3},
}


def cut(lists, coverage):
    """``(lists, {partial route: coverage})`` under one scenario."""
    out, partial = {}, {}
    for r, items in lists.items():
        c = coverage.get(r, 1.0)
        if c >= 1.0:
            out[r] = items
            continue
        kept = [(d, s) for d, s in items if read_share(d, r) < c]
        if kept:
            out[r], partial[r] = kept, c
    return out, partial


def paired_p(qrels, a, b) -> float:
    """Fisher's randomisation test (ranx) of rankings ``a`` against ``b`` (``{qid: [doc, ...]}``)."""
    from ranx import Qrels, Run, compare

    runs = [Run({q: {d: float(len(v) - i) for i, d in enumerate(v)} or {"-": 0.0} for q, v in x.items()},
                name=n) for n, x in (("a", a), ("b", b))]
    qr = Qrels({q: {d: int(g) for d, g in v.items()} for q, v in qrels.items()})
    rep = compare(qr, runs, metrics=["ndcg@10"], stat_test="fisher", max_p=0.05, random_seed=0)
    return float(rep.to_dict()["a"]["comparisons"]["b"]["ndcg@10"])


def score(data, coverage, model):
    ranks: dict[str, dict[str, list[str]]] = {k: {} for k in ("rrf", "cheap", "default")}
    routes = sorted({r for per in data["lists"].values() for r in per})
    alone: dict[str, dict[str, list[str]]] = {r: {} for r in routes}
    for q in data["qrels"]:
        lists, partial = cut(data["lists"][q], coverage)
        for r in routes:
            alone[r][q] = [d for d, _ in lists.get(r, [])][:10]
        done = {r: v for r, v in lists.items() if r not in partial}
        ranks["cheap"][q] = [it.key for it in adaptive_fusion(done, k=10, model=model)[0]] if done else []
        ranks["rrf"][q] = [it.key for it in fuse("rrf", lists, k=10)] if lists else []
        ranks["default"][q] = ([it.key for it in adaptive_fusion(lists, k=10, model=model, partial=partial)[0]]
                               if lists else [])

    def mean(r):
        return float(np.mean([ndcg10(r[q], data["qrels"][q]) for q in data["qrels"]]))

    per_route = {r: mean(v) for r, v in alone.items()}
    best = max(per_route, key=lambda r: (per_route[r], r))
    out = {k: round(mean(v), 4) for k, v in ranks.items()}
    out.update(best_route=best, best=round(per_route[best], 4), gap=round(out["default"] - per_route[best], 4),
               p=round(paired_p(data["qrels"], ranks["default"], alone[best]), 4),
               routes={r: round(v, 4) for r, v in per_route.items()})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", nargs=4, action="append", required=True, metavar=("NAME", "BEIR", "SPLIT", "RUNS"))
    ap.add_argument("--max-queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--model", default=None, help="the fusion model (default: the packaged one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    model = load_model(args.model)
    rows = []
    lines = ["| set | scenario | best route | best | rrf | cheap | default | default - best | p (Fisher) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, beir, split, runs in args.set:
        data = sample(load_set(beir, split, runs), args.max_queries, args.depth)
        for scen, coverage in SCENARIOS.items():
            cell = score(data, coverage, model)
            rows.append({"set": name, "scenario": scen, **cell})
            lines.append(f"| {name} | {scen} | {cell['best_route']} | {cell['best']:.4f} | {cell['rrf']:.4f} | "
                         f"{cell['cheap']:.4f} | {cell['default']:.4f} | {cell['gap']:+.4f} | {cell['p']:.3f} |")
            print(lines[-1], flush=True)
    summary = {"failing": sum(r["gap"] < -0.005 for r in rows), "cells": len(rows),
               "worst": min(r["gap"] for r in rows), "seconds": round(time.time() - t0)}
    lines += ["", f"failing (default more than 0.5 point below the best route): {summary['failing']} of "
              f"{summary['cells']}; worst {summary['worst']:+.4f}"]
    print(lines[-1])
    if args.out:
        write_results(args.out, {"rows": rows, "summary": summary, "settings": vars(args)}, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
