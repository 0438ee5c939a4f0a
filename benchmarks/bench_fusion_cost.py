#!/usr/bin/env python
"""What the fusion of one call costs, on the lists the layers really returned (issue 26).

Plain script (not collected by pytest)::

    PYTHONPATH=<tree> .venv/bin/python benchmarks/bench_fusion_cost.py --state DIR
        [--docs 400] [--queries 10] [--reps 20] [--layers bm25 | bm25,grep,names] [--profile]

Reuses (or builds) the corpus and state of ``bench_bm25_call.py --state DIR``, runs each query
once through ``eng.search(q, layers=..., k=100)`` while recording every
``lar.fusion.pipeline.fuse_hits`` call the orchestrator makes (its per-layer lists, settings and
runs), then times those recorded calls alone, ``--reps`` times each: the process CPU (this thread
only: fusion runs on the caller's thread) per search's worth of fusion calls, median over reps.
``--profile`` prints a cProfile of one pass over the recorded calls instead. Run it under two
trees (``PYTHONPATH``) alternately for a before/after on the same lists.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lar  # noqa: E402
from lar.engine import orchestrator  # noqa: E402

from bm25_common import load, materialise  # noqa: E402


def recorded_calls(eng, qs, layers):
    calls = []
    real = orchestrator.fuse_hits

    def spy(per_layer, settings, runs=None):
        calls.append((dict(per_layer), settings, dict(runs) if runs is not None else None))
        return real(per_layer, settings, runs)

    orchestrator.fuse_hits = spy
    try:
        for q in qs:
            eng.search(q, layers=layers, k=100, timebox=30)
    finally:
        orchestrator.fuse_hits = real
    return calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=400)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--layers", default="bm25")
    ap.add_argument("--state", required=True)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    from lar.fusion.pipeline import fuse_hits

    work = Path(a.state)
    corpus, queries, qrels, ext = load("scifact-train")
    corpus = corpus[: a.docs]
    ids = {d["_id"] for d in corpus}
    qs = [t for q, t in queries.items() if any(d in ids for d in qrels[q])][: a.queries]
    root = work / "scifact"
    if not root.exists():
        materialise(corpus, ext, root)
    layers = a.layers.split(",")
    eng = lar.open(root, state=work / "state")
    eng.build(timebox=1200, layers=layers)
    calls = recorded_calls(eng, qs, layers)
    eng.close()
    sizes = [sum(len(h) for h in pl.values()) for pl, _, _ in calls]
    if a.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            for pl, st, runs in calls:
                fuse_hits(pl, st, runs)
        pr.disable()
        s = io.StringIO()
        st = pstats.Stats(pr, stream=s).sort_stats("tottime"); st.print_stats(25); st.print_callers("collect|_sum|posix.stat|replace|fit_tail")
        print(s.getvalue())
        return 0
    per_rep = []
    for _ in range(a.reps):
        t = time.thread_time()
        for pl, st, runs in calls:
            fuse_hits(pl, st, runs)
        per_rep.append((time.thread_time() - t) / len(qs) * 1e3)
    print(json.dumps({"layers": layers, "queries": len(qs), "fuse_calls": len(calls),
                      "hits_per_call_median": statistics.median(sizes),
                      "fusion_cpu_ms_per_search_p50": round(statistics.median(per_rep), 3),
                      "load": "%.2f %.2f %.2f" % os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
