"""The ``sparse`` layer against ``bm25`` on judged BEIR sets, side by side in one run.

Per set (``DIR:SPLIT``): the corpus is written as the harness writes it (``lar_evals.data``), then,
in a fresh state folder,

1. **build**: ``bm25`` then ``sparse`` (the model loaded first, not timed), each timed alone:
   units/s, and for sparse the model's content tokens/s (from the layer's manifest);
2. **bytes per document**: each layer's stored artefacts (unit store + segment folders) over the
   corpus's documents;
3. **latency**: ``eng.search(q, layers=[route], k=100)`` for a seeded sample of queries, bm25 and
   sparse interleaved (their order alternating query by query), ``--reps`` times, the sparse
   layer's query cache cleared before each of its searches (so its model pass is timed):
   medians, p90 and the median of the per-query ratio;
4. **quality**: ``lar_evals.evaluate_beir(routes=["bm25", "sparse"])`` on the same state (every
   judged query unless ``--max-queries``): nDCG@10 and Recall@100, the paired test, and the route
   lists (``route-lists.jsonl.gz``) for ``lar eval fit``.

    python benchmarks/bench_sparse.py ../shared/benchmarks/scifact-train:train \\
        ../shared/benchmarks/cosqa-dev:dev ../shared/benchmarks/squad2-mini:test \\
        --model splade-tiny --out benchmarks/results/2026-12-02-sparse.json --runs-root RUNS

The machine's load average is recorded before and after each set.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def layer_bytes(state: Path, name: str) -> int:
    """Everything the layer stored except its manifest (units.sqlite with its WAL, segments)."""
    d = state / "layers" / name
    return sum(folder_bytes(p) if p.is_dir() else p.stat().st_size
               for p in d.iterdir() if not p.name.startswith("manifest")) if d.exists() else 0


def build_timed(eng, name: str, timebox: float) -> dict:
    t0 = time.perf_counter()
    rep = eng.build(timebox=timebox, layers=[name])
    secs = time.perf_counter() - t0
    info = rep.get("layers", {}).get(name, {})
    return {"seconds": round(secs, 2), "ok": info.get("ok"), "skipped": info.get("skipped"),
            "failed": info.get("failed"), "coverage": info.get("coverage")}


def manifest_totals(layer) -> dict:
    tokens = chunks = terms = 0
    for h in layer.manifest.all_hashes():
        e = layer.manifest.entry(h) or {}
        i = e.get("info") or {}
        tokens += int(i.get("tokens", 0))
        chunks += int(i.get("chunks", 0))
        terms += int(i.get("terms", 0))
    return {"tokens": tokens, "chunks": chunks, "terms": terms}


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency(eng, queries: list[str], reps: int) -> dict:
    layer = eng.layers["sparse"]
    times: dict[str, list[float]] = {"bm25": [], "sparse": []}
    ratios = []
    for r in range(reps):
        for i, q in enumerate(queries):
            order = ["bm25", "sparse"] if (i + r) % 2 == 0 else ["sparse", "bm25"]
            got = {}
            for route in order:
                if route == "sparse":
                    layer.clear_query_cache()
                t0 = time.perf_counter()
                eng.search(q, layers=[route], k=100, timebox=30)
                got[route] = time.perf_counter() - t0
                times[route].append(got[route])
            ratios.append(got["sparse"] / got["bm25"])
    enc = layer.encoder()
    t_enc = []
    for q in queries[: min(len(queries), 50)]:
        t0 = time.perf_counter()
        enc.encode_query(q)
        t_enc.append(time.perf_counter() - t0)
    out = {r: {"median_ms": round(1000 * statistics.median(v), 2), "p90_ms": round(1000 * pct(v, 0.9), 2),
               "n": len(v)} for r, v in times.items()}
    out["ratio_sparse_over_bm25_median"] = round(statistics.median(ratios), 2)
    out["sparse_query_encoding_median_ms"] = round(1000 * statistics.median(t_enc), 2)
    return out


def run_set(spec: str, args) -> dict:
    import lar
    from lar_evals.data import load_beir, materialise
    from lar_evals.run import evaluate_beir

    directory, split = spec.rsplit(":", 1)
    data = load_beir(directory, split)
    root, _ = materialise(data, args.cache_dir)
    state = root.parent / f"bench-sparse-state-{args.tag}"
    if state.exists() and not args.reuse:
        import shutil

        shutil.rmtree(state)
    config = {"sparse_model": args.model, "freshness": 3600, "call_log": False}
    if args.doc_terms:
        config["sparse_doc_terms"] = args.doc_terms
    load_before = os.getloadavg()
    eng = lar.open(root, state=state, config=config)
    res: dict = {"set": data.name, "split": split, "docs": len(data.corpus), "state": str(state)}
    try:
        t0 = time.perf_counter()
        eng.warm(["sparse"])
        res["model_load_s"] = round(time.perf_counter() - t0, 2)
        res["build"] = {n: build_timed(eng, n, args.build_timebox) for n in ("bm25", "sparse")}
        tot = manifest_totals(eng.layers["sparse"])
        for n in ("bm25", "sparse"):
            b = res["build"][n]
            b["units_per_s"] = round((b["ok"] or 0) / max(b["seconds"], 1e-9), 1)
            b["bytes"] = layer_bytes(state, n)
            b["bytes_per_doc"] = round(b["bytes"] / max(1, len(data.corpus)), 1)
        res["build"]["sparse"].update(tot)
        res["build"]["sparse"]["tokens_per_s"] = round(tot["tokens"] / max(res["build"]["sparse"]["seconds"], 1e-9), 1)
        res["build"]["sparse"]["terms_per_chunk"] = round(tot["terms"] / max(1, tot["chunks"]), 1)
        qids = sorted(data.qrels)
        random.Random(0).shuffle(qids)
        sample = [data.queries[q]["text"] for q in qids[: args.latency_queries] if q in data.queries]
        eng.search(sample[0], layers=["bm25"], k=10, timebox=30)  # segments loaded before timing
        eng.search(sample[0], layers=["sparse"], k=10, timebox=30)
        res["latency"] = latency(eng, sample, args.reps)
    finally:
        eng.close()
    res["load_avg"] = {"before": [round(x, 2) for x in load_before],
                       "after": [round(x, 2) for x in os.getloadavg()]}
    if args.skip_quality:
        return res
    runs = Path(args.runs_root) / f"{data.name}-{split}" if args.runs_root else None
    ev = evaluate_beir(data, routes=["bm25", "sparse"], state_dir=state, config=config, k=100,
                       timebox=60.0, build_timebox=args.build_timebox, max_queries=args.max_queries,
                       cache_root=args.cache_dir, runs_dir=runs, attribution_k=100)
    s = ev.summary
    res["quality"] = {r: {m: s["routes"][r].get(m) for m in ("ndcg@10", "recall@100", "mrr@10")}
                      for r in ("bm25", "sparse")}
    res["quality"]["n_queries"] = s["n_queries"]
    res["quality"]["tests"] = [t for t in s.get("comparisons", {}).get("significance", {}).get("tests", [])
                               if {t.get("a"), t.get("b")} == {"route:bm25", "route:sparse"}]
    res["runs_dir"] = str(runs) if runs else None
    res["load_avg"]["after_quality"] = [round(x, 2) for x in os.getloadavg()]
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", help="BEIR_DIR:SPLIT")
    ap.add_argument("--model", default="splade-tiny")
    ap.add_argument("--doc-terms", type=int, default=None)
    ap.add_argument("--tag", default="default", help="names the state folder")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--runs-root", default=None, help="route lists per set go to RUNS_ROOT/<set>-<split>")
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--latency-queries", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--build-timebox", type=float, default=7200.0)
    ap.add_argument("--reuse", action="store_true", help="keep an existing state folder")
    ap.add_argument("--skip-quality", action="store_true", help="build and latency only")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads (on a machine shared past its cores, 1 measured faster)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    out = {"model": args.model, "doc_terms": args.doc_terms, "cpus": os.cpu_count(),
           "torch_threads": args.torch_threads,
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sets": []}
    for spec in args.sets:
        out["sets"].append(run_set(spec, args))
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(json.dumps(out["sets"][-1], indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
