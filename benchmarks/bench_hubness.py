"""Does the hubness discount help the dense route? nDCG@10 per discount weight, one BEIR set.

    python benchmarks/bench_hubness.py BEIR_DIR SPLIT --state STATE --weights 0,0.25,0.5 \
        --out benchmarks/results/DATE-hubness-NAME

For each weight ``w`` this runs ``python -m lar_evals beir BEIR_DIR --routes dense`` with
``{"dense_hubness": w}`` (every query of the split; the state dir's dense index is reused, so
only searches run), then scores the ``route-dense`` TREC runs with ranx side by side: mean
nDCG@10 and Recall@10 per weight and a paired t-test of each weight against ``w = 0``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from report_io import write_results


def run_weight(args, w: float, out: Path) -> Path:
    done = out.parent / f"{out.stem}-runs" / "route-dense.trec"
    if args.reuse and done.is_file():
        return done
    cmd = [sys.executable, "-m", "lar_evals", "beir", args.dir, "--split", args.split, "--routes", "dense",
           "--timebox", "30s", "--attribution-k", "100", "--fusion", "rrf", "--state", args.state,
           "--quiet", "--config", json.dumps({"freshness": 3600, "dense_hubness": w}),
           "--out", str(out.with_suffix(".json"))]
    if args.cache_dir:
        cmd += ["--cache-dir", args.cache_dir]
    subprocess.run(cmd, check=False)  # the summary is written before the interpreter exits
    runs = out.parent / f"{out.stem}-runs"
    if not (runs / "route-dense.trec").is_file():
        raise SystemExit(f"no run file for weight {w}: {runs}")
    return runs / "route-dense.trec"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("split")
    ap.add_argument("--state", required=True)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--weights", default="0,0.25,0.5")
    ap.add_argument("--work", default="/tmp/lar-bench-hubness")
    ap.add_argument("--reuse", action="store_true", help="score run files already in --work")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from ranx import Qrels, Run, compare

    from lar_evals.data import load_beir

    weights = [float(w) for w in args.weights.split(",")]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data = load_beir(args.dir, args.split)
    name = Path(args.dir).name
    runs = []
    for w in weights:
        trec = run_weight(args, w, work / f"{name}-w{w:g}")
        runs.append(Run.from_file(str(trec), kind="trec", name=f"w={w:g}"))
    qrels = Qrels.from_dict({q: dict(v) for q, v in data.qrels.items() if v})
    metrics = ["ndcg@10", "recall@10"]
    rep = compare(qrels, runs, metrics, stat_test="student", max_p=0.05)
    table = {r.name: {m: round(float(rep.results[r.name][m]), 4) for m in metrics} for r in runs}
    base = runs[0].name
    tests = {r.name: {m: float(rep.comparisons[frozenset((base, r.name))][m]["p_value"]) for m in metrics}
             for r in runs[1:]}
    result = {"dataset": name, "split": args.split, "n_queries": len(qrels.qrels), "weights": weights,
              "scores": table, "p_vs_w0": tests,
              "settings": {"routes": ["dense"], "hubness_k": 5, "hubness_sample": 4096}}
    lines = [f"# Hubness discount on the dense route: {name} {args.split} ({len(qrels.qrels)} queries)", "",
             "| weight | nDCG@10 | Recall@10 | p vs 0 (nDCG@10) |", "|---|---|---|---|"]
    for r in runs:
        p = tests.get(r.name, {}).get("ndcg@10")
        lines.append(f"| {r.name} | {table[r.name]['ndcg@10']} | {table[r.name]['recall@10']} | "
                     f"{'' if p is None else f'{p:.3g}'} |")
    write_results(args.out, result, lines)


if __name__ == "__main__":
    main()
