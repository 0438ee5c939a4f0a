"""Time each fusion policy on recorded route lists (what the default adds per query).

    python benchmarks/bench_fusion.py RUNS_DIR [RUNS_DIR ...] --model MODEL.json --pool 100 \
        --out benchmarks/results/DATE-fusion-time

Reads each runs dir's ``route-lists.jsonl.gz`` (written by ``python -m lar_evals beir``), cuts every
route's list to ``--pool`` documents (the engine takes ``pool = max(20, 5 k)`` hits per layer:
100 for the default ``k = 20``) and times ``lar.fusion.policies.fuse`` per query for every policy, all
policies interleaved query by query in one process so machine noise hits them alike.
``adaptive (by unit)`` is the engine's default path (``units=``, :mod:`lar.fusion.units`).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

from lar.fusion.policies import POLICIES, fuse
from lar.fusion.model import load_model

UNITS = "adaptive (by unit)"


def load_lists(runs_dir: Path, pool: int) -> list[dict[str, list[tuple[str, float]]]]:
    out = []
    with gzip.open(runs_dir / "route-lists.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            runs = {r: [(d, s) for d, s in items if s is not None][:pool]
                    for r, items in row["routes"].items()}
            out.append({r: v for r, v in runs.items() if v})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs_dirs", nargs="+")
    ap.add_argument("--model", default=None)
    ap.add_argument("--pool", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = load_model(args.model)
    results = {}
    for d in args.runs_dirs:
        queries = load_lists(Path(d), args.pool)
        labels = [*POLICIES, UNITS]
        times = {p: [] for p in labels}
        for _ in range(args.repeat):
            for runs in queries:
                # the documents as their own units: the unit path's whole cost (its second,
                # per-place pass included), with the ranking of the per-place one
                units = {d: d for items in runs.values() for d, _ in items}
                for p in labels:
                    t0 = time.perf_counter()
                    if p == UNITS:
                        fuse("adaptive", runs, k=20, model=model, units=units)
                    elif p == "adaptive":
                        fuse(p, runs, k=20, model=model)
                    else:
                        fuse(p, runs, k=20)
                    times[p].append(time.perf_counter() - t0)
        base = statistics.median(times["route-unique"])
        results[Path(d).name] = {
            "queries": len(queries), "routes_per_query": round(statistics.fmean(len(r) for r in queries), 2),
            "policies": {p: {"median_ms": round(1000 * statistics.median(v), 3),
                             "p95_ms": round(1000 * sorted(v)[int(0.95 * (len(v) - 1))], 3),
                             "ratio_to_route_unique": round(statistics.median(v) / base, 2)}
                         for p, v in times.items()}}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps({"pool": args.pool, "model": args.model,
                                                     "sets": results}, indent=2) + "\n")
    lines = [f"# Fusion time per query (pool {args.pool} per route, k = 20)", "",
             "Each policy timed per query on recorded route lists, policies interleaved in one "
             "process (`benchmarks/bench_fusion.py`).", ""]
    for name, r in results.items():
        lines += [f"## {name} ({r['queries']} queries, {r['routes_per_query']} routes with hits per query)", "",
                  "| policy | median ms | p95 ms | x route-unique |", "|---|---|---|---|"]
        lines += [f"| {p} | {v['median_ms']} | {v['p95_ms']} | {v['ratio_to_route_unique']} |"
                  for p, v in r["policies"].items()]
        lines.append("")
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
