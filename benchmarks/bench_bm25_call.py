#!/usr/bin/env python
"""One bm25 call through lar against bm25s and tantivy on the same texts (issue 26, item 1).

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_bm25_call.py [--docs 1500] [--queries 50] [--reps 5]
        [--state DIR] [--profile N] [--full-pool] [--out benchmarks/results/DATE-bm25-call]

Builds (or reuses, with ``--state``) a lar index of the first ``--docs`` SciFact abstracts, then
times ``lar.open(root).search(q, layers=["bm25"], k=100)``, bm25s (``retrieve`` with the same
k1/b/method, stemming and stopwords) and tantivy ``en_stem`` per judged query, rotating which goes
first, ``--reps`` times; prints the medians, the median per-query ratios, the nDCG@10 of each and
the load average. ``--profile N`` adds a cProfile of N lar calls (the layer's thread work inlined,
see ``run_all.profiled``), top 30 by cumulative time. ``--full-pool`` adds ``lar_full``, the same
call on the path before issue 26 (``lar.engine.finishing.DEFER = False``: the layer reads every
pooled unit and marks sub-spans for its first 100 hits itself), interleaved with the others.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lar  # noqa: E402

from bm25_common import evaluate, load, materialise  # noqa: E402
from run_all import bm25s_searcher, load_avg, med, ms, paired, profiled, tantivy_searcher, timed  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--state", default=None, help="keep the corpus and lar's state here (reused)")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--full-pool", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    work = Path(a.state) if a.state else Path(tempfile.mkdtemp(prefix="lar-bm25-call-"))
    corpus, queries, qrels, ext = load("scifact-train")
    corpus = corpus[: a.docs]
    ids = {d["_id"] for d in corpus}
    queries = {q: t for q, t in queries.items() if any(d in ids for d in qrels[q])}
    queries = dict(list(queries.items())[: a.queries])
    root = work / "scifact"
    if not root.exists():
        materialise(corpus, ext, root)
    by_path = {f"d{i:06d}{ext}": d["_id"] for i, d in enumerate(corpus)}
    eng = lar.open(root, state=work / "state")
    t_build, _ = timed(eng.build, timebox=1200, layers=["bm25"])
    tv, bs = tantivy_searcher(corpus), bm25s_searcher(corpus)
    qs = list(queries.values())

    def lar_call(q):
        return eng.search(q, layers=["bm25"], k=100)

    def lar_full(q):
        from lar.engine import finishing

        finishing.DEFER = False
        try:
            return eng.search(q, layers=["bm25"], k=100)
        finally:
            finishing.DEFER = True

    lar_call(qs[0])
    fns = [("lar", lar_call), ("tantivy", tv), ("bm25s", bs)]
    if a.full_pool:
        lar_full(qs[0])
        fns.insert(1, ("lar_full", lar_full))
    R = {"load_start": load_avg(), "docs": len(corpus), "queries": len(qs), "reps": a.reps,
         "lar_build_s": round(t_build, 2)}
    per = paired(fns, qs, a.reps)
    R["load_end"] = load_avg()
    for n, v in per.items():
        R[f"{n}_p50_ms"] = ms(med(v))
    for p in ("tantivy", "bm25s"):
        R[f"ratio_vs_{p}"] = round(med([x / y for x, y in zip(per["lar"], per[p]) if y]), 2)
        if a.full_pool:
            R[f"full_ratio_vs_{p}"] = round(med([x / y for x, y in zip(per["lar_full"], per[p]) if y]), 2)
    if a.full_pool:
        R["full_over_lazy"] = round(med([x / y for x, y in zip(per["lar_full"], per["lar"]) if y]), 3)
    run = {}
    for qid, q in queries.items():
        res = eng.search(q, layers=["bm25"], k=100, timebox=30)
        docs: dict[str, float] = {}
        for h in res.hits:
            d = by_path.get(h.path)
            if d is not None and d not in docs:
                docs[d] = float(h.score)
        run[qid] = docs
    R["lar_ndcg@10"] = evaluate({q: qrels[q] for q in queries}, run)["ndcg@10"]
    R["past_timebox"] = sum(1 for q in qs if (r := lar_call(q)).elapsed > r.timebox)
    print(json.dumps(R, indent=2))
    if a.profile:
        print(profiled(eng, [dict(query=q, layers=["bm25"], k=100, timebox=10) for q in qs[: a.profile]], 30))
    if a.out:
        Path(a.out).with_suffix(".json").write_text(json.dumps(R, indent=2) + "\n")
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
