"""Held-out comparison of the fusion fit's methods (listwise loss vs coordinate ascent) over
several fold seeds, on recorded route lists (the runs dirs of `python -m lar_evals beir`).

    python benchmarks/study_fit_methods.py \
        --set ../shared/benchmarks/scifact-train train RUNS[,RUNS] --set ... \
        --seeds 0,1,2,3 --variants ascent/zscore,listwise/zscore,listwise/all/inner,listwise/all/train \
        --out results/DATE-fit-methods.json

For every seed, each method is cross-fitted exactly as `python -m lar_evals fit` does (two folds,
the model fitted on one fold of every set ranks the other fold); the table gives each set's
held-out nDCG@10 and its difference to the set's best single route, per method and seed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lar_evals.fit import NORMS, load_set, run_fit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", nargs=3, action="append", required=True, metavar=("BEIR_DIR", "SPLIT", "RUNS_DIR"))
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--variants", default="ascent/zscore,listwise/zscore,listwise/all/inner,listwise/all/train",
                    help="comma-separated METHOD/NORMS[/SELECT][/L2]: NORMS is one norm, several joined "
                         "with '+', or 'all'; SELECT inner or train")
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--out", required=True, help="JSON results")
    args = ap.parse_args(argv)
    sets = [load_set(*spec) for spec in args.set]
    variants = []
    for spec in [v for v in args.variants.split(",") if v]:
        parts = spec.split("/")
        norms = NORMS if parts[1] == "all" else tuple(parts[1].split("+"))
        kw = {"method": parts[0], "norms": norms, "select": parts[2] if len(parts) > 2 else "inner"}
        if len(parts) > 3:
            kw["l2"] = float(parts[3])
        variants.append((spec, kw))
    rows = []
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        for label, kw in variants:
            t0 = time.perf_counter()
            _, rep = run_fit(sets, folds=args.folds, seed=seed, **kw)
            row = {"seed": seed, "method": label, "norm": rep["norm"],
                   "fit_s": round(time.perf_counter() - t0, 1), "sets": {}}
            for name, s in rep["sets"].items():
                sc, best = s["scores"], s["best_route"]
                got, ref = sc["fusion:adaptive"]["ndcg@10"], sc[best]["ndcg@10"]
                p = next(t["p_holm"] for t in s["tests"] if t["b"] == best and t["metric"] == "ndcg@10")
                row["sets"][name] = {"adaptive": got, "best_route": best, "best": ref,
                                     "delta_points": round(100 * (got - ref), 2), "p_holm": p}
            rows.append(row)
            print(f"seed {seed} {label:24s} {row['norm']:7s} " + " | ".join(
                f"{n} {v['adaptive']:.4f} ({v['delta_points']:+.1f})" for n, v in row["sets"].items())
                + f"  [{row['fit_s']} s]", flush=True)
    Path(args.out).write_text(json.dumps({"sets": [s.name for s in sets], "folds": args.folds,
                                          "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
