"""Which score scale, and how many training queries, does a weighted sum of lar's routes need?

    python benchmarks/study_fusion_scales.py ../shared/benchmarks/scifact-train train \
        [--qids-from RUN.trec] [--routes dense,late,bm25] --out benchmarks/results/DATE-fusion-scales-X

Full-corpus scores as in ``study_fusion_ceiling.py`` (same cached encodings in ``--work``; ``e5``
needs that study's ``--e5`` cache). Each route is put on one scale, then summed with weights
from a grid; the weights are fitted on one seeded half of the queries and scored on the other,
then swapped (mean of 5 seeds). Scales:

* ``full-z``: z over every document (the ceiling study's scale);
* ``top100 ...``: what an engine sees, only each route's first 100 documents, the rest at the
  list's floor: ``full-z`` (the whole-corpus statistics), ``list-z`` and ``minmax`` over the
  list, ``sample1000-z`` (statistics of a fixed random sample of 1000 documents: a null model),
  ``tail-z`` (statistics of ranks 10..100, lar's ``tailz``).

``--qids-from`` restricts the queries to those of a TREC run file (e.g. a harness run's), to
compare with a run on that subset.
"""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
from report_io import write_results
from study_fusion_ceiling import GRID, bm25_scores, e5_encode, encode, late_scores, ndcg_at_10

K = 100


def views(S: np.ndarray, sample: np.ndarray) -> dict[str, np.ndarray]:
    out = {"full-z": (S - S.mean(1, keepdims=True)) / (S.std(1, keepdims=True) + 1e-12)}
    top = np.argpartition(-S, K, axis=1)[:, :K]
    mask = np.zeros_like(S, bool)
    np.put_along_axis(mask, top, True, 1)
    L = np.where(mask, S, np.nan)

    def listed(V):  # outside the list: the list's floor
        floor = np.nanmin(np.where(mask, V, np.nan), 1, keepdims=True)
        return np.where(mask, V, floor)

    out["top100 full-z"] = listed(out["full-z"])
    lm, ls = np.nanmean(L, 1, keepdims=True), np.nanstd(L, 1, keepdims=True) + 1e-12
    out["top100 list-z"] = listed((S - lm) / ls)
    mn, mx = np.nanmin(L, 1, keepdims=True), np.nanmax(L, 1, keepdims=True)
    out["top100 minmax"] = listed((S - mn) / (mx - mn + 1e-12))
    sm, ss = S[:, sample].mean(1, keepdims=True), S[:, sample].std(1, keepdims=True) + 1e-12
    out["top100 sample1000-z"] = listed((S - sm) / ss)
    tail = -np.sort(-np.where(mask, S, -np.inf), 1)[:, 9:K]
    out["top100 tail-z"] = listed((S - tail.mean(1, keepdims=True)) / (tail.std(1, keepdims=True) + 1e-12))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("split")
    ap.add_argument("--work", default="/tmp/lar-ceiling")
    ap.add_argument("--routes", default="dense,late,bm25")
    ap.add_argument("--qids-from", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from lar_evals.data import load_beir

    bench = Path(args.dir)
    data = load_beir(bench, args.split)
    enc = encode(bench, Path(args.work))
    dids = [str(d) for d in enc["dids"]]
    keep = None
    if args.qids_from:
        keep = {line.split()[0] for line in open(args.qids_from, encoding="utf-8") if line.strip()}
    qidx = [i for i, q in enumerate(enc["qids"]) if data.qrels.get(str(q)) and (keep is None or str(q) in keep)]
    ndcg = ndcg_at_10(data, [str(enc["qids"][i]) for i in qidx], dids)

    names = args.routes.split(",")
    scores = {"dense": lambda: enc["Q"][qidx] @ enc["D"].T, "late": lambda: late_scores(enc, qidx),
              "bm25": lambda: bm25_scores(enc, qidx)}
    if "e5" in names:
        e5 = e5_encode(bench, Path(args.work))
        scores["e5"] = lambda: e5["Q"][qidx] @ e5["D"].T
    routes = {n: scores[n]().astype(np.float64) for n in names}
    sample = np.random.default_rng(0).choice(len(dids), min(1000, len(dids)), replace=False)
    V = {n: views(S, sample) for n, S in routes.items()}
    singles = {n: round(float(ndcg(S).mean()), 4) for n, S in routes.items()}
    best = max(singles.values())
    grid = [ws for ws in itertools.product(GRID, repeat=len(names)) if any(ws)]
    nq = len(qidx)
    res = {"dataset": bench.name, "split": args.split, "n_queries": nq, "routes": singles, "scales": {}}
    for view in V[names[0]]:
        P = np.stack([ndcg(sum(w * V[n][view] for w, n in zip(ws, names))) for ws in grid])
        held = []
        for seed in range(5):
            perm = np.random.default_rng(seed).permutation(nq)
            halves = [perm[: nq // 2], perm[nq // 2:]]
            v = np.zeros(nq)
            for h in range(2):
                tr, te = halves[h], halves[1 - h]
                v[te] = P[int(np.argmax(P[:, tr].mean(1))), te]
            held.append(v.mean())
        res["scales"][view] = {"held_out": round(float(np.mean(held)), 4),
                               "in_sample_best": round(float(P.mean(1).max()), 4)}
    lines = [f"# Fusion scales: {bench.name} {args.split} ({nq} queries, routes {'+'.join(names)})", "",
             "Single routes: " + ", ".join(f"{n} {v}" for n, v in singles.items()), "",
             "| scale | held out (5 seeds) | vs best route | best in-sample weights |", "|---|---|---|---|"]
    for view, r in res["scales"].items():
        lines.append(f"| {view} | {r['held_out']} | {r['held_out'] - best:+.4f} | {r['in_sample_best']} |")
    write_results(args.out, res, lines)


if __name__ == "__main__":
    main()
