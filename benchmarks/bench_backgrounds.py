"""What reporting a score background (lar.core.background) costs a search, side by side in one run.

    python benchmarks/bench_backgrounds.py --out benchmarks/results/DATE-backgrounds

* bm25: one bm25s segment of ``--docs`` synthetic documents (Zipf-distributed terms), searched
  for ``--queries`` 3-term queries with and without ``moments`` (with them the segment scores
  every allowed document from the query terms' score columns instead of calling bm25s's
  ``retrieve``);
* dense: a ``ChunkVectorStore`` of ``--docs`` x 384-dim vectors, searched with the moments as
  shipped and with ``ScoreMoments.add`` replaced by a no-op.

Each pair is timed interleaved (A, B, A, B, ...) and reported as medians and their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from report_io import write_results  # noqa: E402

from lar.core.background import ScoreMoments  # noqa: E402
from lar.layers.kits.lexical.segments import SegmentParams, SegmentStore  # noqa: E402
from lar.layers.kits.vectors.chunkstore import ChunkVectorStore  # noqa: E402


def paired(fa, fb, reps: int) -> tuple[float, float]:
    ta, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter(); fa(); ta.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); fb(); tb.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    vocab = [f"t{i}" for i in range(20000)]
    zipf = np.minimum(rng.zipf(1.3, size=(a.docs, 60)), len(vocab)) - 1
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SegmentStore(Path(tmp) / "seg", SegmentParams("bench"))
        docs = [[vocab[i] for i in row] for row in zipf]
        units = [(f"{u:032x}", [(j, j + 1) for j in range(100)], docs[u * 100:(u + 1) * 100])
                 for u in range(a.docs // 100)]
        seg = store.build(units)
        allowed = {u for u, _, _ in units}
        queries = [[vocab[int(i)] for i in rng.integers(5, 2000, 3)] for _ in range(a.queries)]

        def bm25(with_moments: bool):
            def run():
                for q in queries:
                    seg.search(q, 100, allowed, None, ScoreMoments() if with_moments else None)
            return run

        off, on = paired(bm25(False), bm25(True), 7)
        rows["bm25"] = {"without_ms_per_query": 1000 * off / a.queries,
                        "with_ms_per_query": 1000 * on / a.queries, "ratio": on / off}

        vs = ChunkVectorStore(Path(tmp) / "vec", 384)
        vecs = rng.standard_normal((a.docs, 384)).astype(np.float32)
        for u in range(a.docs // 100):
            vs.put(f"{u:032x}", np.array([[10 * i, 10 * i + 5] for i in range(100)]), vecs[u * 100:(u + 1) * 100])
        qv = rng.standard_normal((a.queries, 384)).astype(np.float32)
        real_add = ScoreMoments.add

        def dense(with_moments: bool):
            def run():
                ScoreMoments.add = real_add if with_moments else (lambda self, scores: None)
                try:
                    for q in qv:
                        vs.search(q, k=100)
                finally:
                    ScoreMoments.add = real_add
            return run

        off, on = paired(dense(False), dense(True), 7)
        rows["dense"] = {"without_ms_per_query": 1000 * off / a.queries,
                         "with_ms_per_query": 1000 * on / a.queries, "ratio": on / off}
    lines = [f"# Cost of score backgrounds ({a.docs} documents, {a.queries} queries, medians of 7 interleaved runs)",
             "", "| search | without (ms/query) | with (ms/query) | ratio |", "|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['without_ms_per_query']:.3f} | {r['with_ms_per_query']:.3f} | {r['ratio']:.2f} |")
    write_results(a.out, {"docs": a.docs, "queries": a.queries, "rows": rows}, lines)


if __name__ == "__main__":
    main()
