#!/usr/bin/env python
"""One full exact ``late`` scan through lar against the same-shape fp32 GEMM (issue 26, item 2).

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_late_call.py [--docs 300] [--queries 10] [--reps 3]
        [--state DIR] [--full-pool] [--out benchmarks/results/DATE-late-call]

Builds (or reuses) the ``late`` layer over the first ``--docs`` SciFact abstracts, then per query,
rotating which goes first: ``search(q, layers=["late"], k=100)`` with the scan in arena order (the
layer's order now), the same call with the previous order (candidates, then by usage, then by
path: the blocks are gathered by copy once usage has moved), and a bare fp32 GEMM of the query's
token matrix against every stored token (``Q @ X.T`` with X already fp32 in RAM: the arithmetic
limit). Prints medians, the share of the GEMM rate, and each variant's gathered tokens per call.
``--full-pool`` adds ``lar_full``: the arena-order call on the path before issue 26 (every pooled hit
explained in the layer, ``lar.engine.finishing.DEFER = False``, BLAS threads as they are).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import lar  # noqa: E402
from lar.layers.late import layer as late_layer  # noqa: E402

from bm25_common import load, materialise  # noqa: E402
from run_all import load_avg, med, ms, paired, timed  # noqa: E402


ARENA_ORDER = late_layer.scan_order


def usage_order(hashes, candidates, resident, usage, paths):
    """The order before issue 26: candidates, then by usage, then by path (``resident`` unused)."""
    return ARENA_ORDER(hashes, candidates, {}, usage, paths)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--state", default=None)
    ap.add_argument("--full-pool", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    work = Path(a.state) if a.state else Path(tempfile.mkdtemp(prefix="lar-late-call-"))
    corpus, queries, qrels, ext = load("scifact-train")
    corpus = corpus[: a.docs]
    ids = {d["_id"] for d in corpus}
    qs = [t for q, t in queries.items() if any(d in ids for d in qrels[q])][: a.queries]
    root = work / "scifact"
    if not root.exists():
        materialise(corpus, ext, root)
    eng = lar.open(root, state=work / "state")
    t_build, _ = timed(eng.build, timebox=3600, layers=["late"])
    layer = eng.layers["late"]
    hashes = sorted(layer.searchable(eng.scope_view()))
    X = np.concatenate([np.asarray(layer.load(h).tokens, dtype=np.float32) for h in hashes])
    real = late_layer.scan_order
    gathered = {"arena": [], "usage": [], "full": []}

    def call(kind):
        def run(q):
            from contextlib import nullcontext

            from lar.engine import finishing
            from lar.layers.late import hits as late_hits_mod

            late_layer.scan_order = real if kind != "usage" else usage_order
            one_thread = late_hits_mod.one_blas_thread
            if kind == "full":
                finishing.DEFER = False
                late_hits_mod.one_blas_thread = nullcontext
            try:
                res = eng.search(q, layers=["late"], k=100, timebox=60)
            finally:
                late_layer.scan_order = real
                finishing.DEFER = True
                late_hits_mod.one_blas_thread = one_thread
            run_ = {r.name: r for r in res.runs}["late"]
            gathered[kind].append((run_.details or {}).get("gathered_tokens"))
            return res
        return run

    def gemm(q):
        Q = layer.encode_query(q)[1]
        return (Q @ X.T).max(axis=0)

    variants = [("lar_arena", call("arena")), ("lar_usage", call("usage"))]
    if a.full_pool:
        variants.append(("lar_full", call("full")))
    for q in qs[:2]:
        for _, fn in variants:
            fn(q)
    gathered = {"arena": [], "usage": [], "full": []}
    per = paired(variants + [("gemm", gemm)], qs, a.reps)
    R = {"load_start": load_avg(), "docs": len(corpus), "queries": len(qs), "reps": a.reps,
         "tokens": int(X.shape[0]), "dim": int(X.shape[1]), "late_build_s": round(t_build, 1)}
    for n, v in per.items():
        R[f"{n}_p50_ms"] = ms(med(v))
    for n, _ in variants:
        R[f"{n}_share_of_gemm_rate"] = round(med([g / x for g, x in zip(per["gemm"], per[n])]), 3)
    R["gathered_tokens_per_call"] = {k: med([x for x in v if x is not None]) for k, v in gathered.items() if v}
    R["load_end"] = load_avg()
    print(json.dumps(R, indent=2))
    if a.out:
        Path(a.out).with_suffix(".json").write_text(json.dumps(R, indent=2) + "\n")
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
