#!/usr/bin/env python
"""CPU per single-layer call through lar, per thread, beside bm25s and tantivy (issue 26).

Plain script (not collected by pytest)::

    PYTHONPATH=<tree> .venv/bin/python benchmarks/bench_call_cpu.py --state DIR
        [--docs 1500] [--queries 30] [--reps 3] [--layer bm25] [--full-pool] [--out FILE]

Wall-clock figures on a shared machine measure the scheduler as much as lar (every thread hop
of a call waits for a core), so this reports CPU: the process's CPU per call (every thread,
the engine's background threads and the call log's writer included, read from
``/proc/self/task`` around a block of back-to-back calls plus a short settle), split by thread
name, and the CPU per query of bm25s and tantivy on the same texts. Reuses the corpus and state
of ``bench_bm25_call.py --state DIR`` (builds them when missing). ``--full-pool`` adds
``lar_full_cpu_ms``: the same calls on the path before issue 26 (every layer completes its whole
pool: ``lar.engine.finishing.DEFER = False``, late's BLAS threads as they are), in blocks
alternating with the deferring path's (``lar_cpu_ms`` is then the median of its blocks).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lar  # noqa: E402

from bm25_common import load, materialise  # noqa: E402
from run_all import bm25s_searcher, load_avg, tantivy_searcher  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by native id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        f = stat[stat.rindex(")") + 2:].split()
        out[tid] = (int(f[11]) + int(f[12])) / TICK
    return out


def per_thread(fn, items, reps: int, settle: float = 0.3, flush=None) -> tuple[float, dict[str, float]]:
    """(CPU ms per call of the whole process, {thread kind: ms per call}); ``flush`` (optional)
    waits for work the calls queued (the call log's writer)."""
    names = {}
    before, c0 = thread_cpu(), time.process_time()
    n = 0
    for _ in range(reps):
        for it in items:
            fn(it)
            n += 1
            names.update({str(t.native_id): t.name for t in threading.enumerate()})
    if flush is not None:
        flush()
    time.sleep(settle)  # the background work the calls left (call log, snapshots) lands here
    after, total = thread_cpu(), time.process_time() - c0
    kinds: dict[str, float] = {}
    for tid, t in after.items():
        d = t - before.get(tid, 0.0)
        if d > 0:
            kind = names.get(tid, "other").rstrip("0123456789_")
            kinds[kind] = kinds.get(kind, 0.0) + d
    return 1000 * total / n, {k: round(1000 * v / n, 2) for k, v in sorted(kinds.items(), key=lambda x: -x[1])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--layer", default="bm25")
    ap.add_argument("--state", required=True)
    ap.add_argument("--full-pool", action="store_true")
    ap.add_argument("--blocks", type=int, default=3, help="alternating blocks with --full-pool")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    work = Path(a.state)
    corpus, queries, qrels, ext = load("scifact-train")
    corpus = corpus[: a.docs]
    ids = {d["_id"] for d in corpus}
    qs = [t for q, t in queries.items() if any(d in ids for d in qrels[q])][: a.queries]
    root = work / "scifact"
    if not root.exists():
        materialise(corpus, ext, root)
    eng = lar.open(root, state=work / "state")
    eng.build(timebox=1200, layers=[a.layer])
    R = {"load_start": load_avg(), "layer": a.layer, "docs": len(corpus), "queries": len(qs), "reps": a.reps}

    def lar_call(q):
        return eng.search(q, layers=[a.layer], k=100)

    def flush():
        if eng.call_log is not None:
            eng.call_log.flush()

    for q in qs[:3]:
        lar_call(q)
    flush()
    if a.full_pool:
        import statistics
        from contextlib import nullcontext

        from lar.engine import finishing
        from lar.layers.late import hits as late_hits_mod

        one_thread = late_hits_mod.one_blas_thread

        def full_call(q):
            finishing.DEFER, late_hits_mod.one_blas_thread = False, nullcontext
            try:
                return lar_call(q)
            finally:
                finishing.DEFER, late_hits_mod.one_blas_thread = True, one_thread

        full_call(qs[0])
        lazy_ms, full_ms = [], []
        pair = [("lazy", lar_call, lazy_ms), ("full", full_call, full_ms)]
        for b in range(a.blocks):  # alternating which goes first
            for name, fn, out in (pair if b % 2 == 0 else pair[::-1]):
                cpu, threads = per_thread(fn, qs, a.reps, flush=flush)
                out.append(cpu)
                if name == "lazy":
                    R["lar_threads_ms"] = threads
        R["lar_cpu_ms"], R["lar_full_cpu_ms"] = statistics.median(lazy_ms), statistics.median(full_ms)
        R["lar_cpu_blocks_ms"], R["lar_full_cpu_blocks_ms"] = lazy_ms, full_ms
        R["full_over_lazy_cpu"] = round(R["lar_full_cpu_ms"] / R["lar_cpu_ms"], 3)
    else:
        R["lar_cpu_ms"], R["lar_threads_ms"] = per_thread(lar_call, qs, a.reps, flush=flush)
    if eng.call_log is not None:
        log, eng.call_log = eng.call_log, None
        R["lar_no_call_log_cpu_ms"], _ = per_thread(lar_call, qs, a.reps)
        eng.call_log = log
    if a.layer == "bm25":
        for name, fn in (("tantivy", tantivy_searcher(corpus)), ("bm25s", bm25s_searcher(corpus))):
            R[f"{name}_cpu_ms"], _ = per_thread(fn, qs, a.reps, settle=0.0)
            R[f"cpu_ratio_vs_{name}"] = round(R["lar_cpu_ms"] / R[f"{name}_cpu_ms"], 1)
            if a.full_pool:
                R[f"full_cpu_ratio_vs_{name}"] = round(R["lar_full_cpu_ms"] / R[f"{name}_cpu_ms"], 1)
    R["load_end"] = load_avg()
    R = {k: round(v, 3) if isinstance(v, float) else v for k, v in R.items()}
    print(json.dumps(R, indent=2))
    if a.out:
        Path(a.out).write_text(json.dumps(R, indent=2) + "\n")
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
