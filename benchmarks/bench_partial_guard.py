"""Does the partial-run guard help? Paired, from the same searches.

    python benchmarks/bench_partial_guard.py DATASET_DIR SPLIT --state STATE \
        --timeboxes 0.2,0.5,1,2 --out benchmarks/results/DATE-partial-guard

For each query and timebox the engine searches once (``fusion="rrf"``, ``k=--depth``, so that
every layer's list comes back in the hits' evidence). Each layer's list is rebuilt from that
evidence and fused twice with the default adaptive model: with the layers the timebox cut short
weighted by :func:`lar.fusion.adaptive.partial_factors` (``guard``, the default) and without (``keep``).
Both rankings come from the same layer outputs, so machine load cannot favour either; load only
changes how many runs are cut short, which is reported. nDCG@10 per timebox, with a paired
t-test (ranx) and the number of queries that had a cut-short run.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import lar
from lar_evals.anytime import check_timeboxes
from lar_evals.data import load_beir, materialise
from lar_evals.metrics import evaluate
from lar_evals.query import docs_of_hits
from lar.fusion.adaptive import adaptive_fusion, partial_factors
from report_io import write_results


def layer_lists(hits) -> dict[str, list[tuple[int, float]]]:
    """Each layer's (hit index, score) list best-first, rebuilt from the hits' evidence."""
    per: dict[str, list[tuple[int, int, float]]] = {}
    for i, h in enumerate(hits):
        for name, ev in h.evidence.items():
            per.setdefault(name, []).append((ev.rank, i, ev.score))
    return {n: [(i, s) for _, i, s in sorted(v)] for n, v in per.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("split")
    ap.add_argument("--state", required=True)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--timeboxes", default="0.2,0.5,1,2")
    ap.add_argument("--max-queries", type=int, default=30)
    ap.add_argument("--depth", type=int, default=300)
    ap.add_argument("--config", default="{}")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from ranx import Qrels, Run, compare

    data = load_beir(Path(args.dir), args.split)
    qids = data.scored_queries()[: args.max_queries]
    qrels = {q: data.qrels[q] for q in qids}
    root, mapping = materialise(data, args.cache_dir)
    rows = []
    with lar.open(root, state=args.state, config=json.loads(args.config)) as eng:
        for tb in check_timeboxes(args.timeboxes):
            ranks = {"guard": {}, "keep": {}}
            cut_queries, factors, t_fuse = 0, [], 0.0
            for q in qids:
                res = eng.search(data.queries[q]["text"], k=args.depth, timebox=tb, fusion="rrf")
                runs = layer_lists(res.hits)
                cut = [r.name for r in res.runs if r.state.value == "aborted" and r.name in runs]
                cut_queries += bool(cut)
                factors += list(partial_factors(runs, cut).values())
                for mode, partial in (("guard", cut), ("keep", [])):
                    t0 = time.perf_counter()
                    items = adaptive_fusion(runs, k=10, partial=partial)[0]
                    t_fuse += time.perf_counter() - t0
                    ranks[mode][q] = docs_of_hits([res.hits[it.key].paths for it in items], mapping)
            scores = {m: evaluate(qrels, ranks[m], ["ndcg@10"])[0]["ndcg@10"] for m in ranks}
            runs_ranx = [Run({q: {d: 10.0 - i for i, d in enumerate(v)} for q, v in ranks[m].items()},
                             name=m) for m in ("guard", "keep")]
            report = compare(Qrels({q: dict(v) for q, v in qrels.items()}), runs_ranx,
                             metrics=["ndcg@10"], stat_test="student")
            p = report.to_dict()["guard"]["comparisons"]["keep"]["ndcg@10"]
            rows.append({"timebox_s": tb, "guard": round(scores["guard"], 4),
                         "keep": round(scores["keep"], 4), "p_value": round(float(p), 4),
                         "queries_with_a_cut_run": cut_queries, "n_queries": len(qids),
                         "mean_partial_factor": round(sum(factors) / len(factors), 4) if factors else None,
                         "fusion_ms_per_query": round(1000 * t_fuse / (2 * len(qids)), 3)})
            print(rows[-1], flush=True)
    lines = [f"# Partial-run guard, paired: {data.name} {args.split} ({len(qids)} queries)", "",
             "| timebox s | guard nDCG@10 | keep nDCG@10 | p (paired t) | queries with a cut run | "
             "mean factor |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['timebox_s']} | {r['guard']} | {r['keep']} | {r['p_value']} | "
                     f"{r['queries_with_a_cut_run']}/{r['n_queries']} | {r['mean_partial_factor']} |")
    write_results(args.out, {"dataset": data.name, "split": args.split, "rows": rows}, lines)


if __name__ == "__main__":
    main()
