#!/usr/bin/env python3
"""The sharded exact scans on 1, 2 and 4 Ray actors against the local scan, and the cost
model's prediction of their merge and dispatch overhead checked against the measured one
(docs/scale.md).

Run from the repository root (needs the ``ray`` extra), under ``nice``:

    nice -n 19 .venv/bin/python benchmarks/bench_ray_scale.py [--dense-units 20000] \
        [--late-units 2000] [--reps 7] [--out benchmarks/results/DATE-ray-scale]

* **dense**: ``--dense-units`` units of 1-6 random chunk vectors (d=384, float16) in a
  ``ChunkVectorStore``; one query, k=10. Local: ``ChunkVectorStore.search`` over every unit.
  Ray: ``ChunkShards`` with 1, 2 and 4 actors (warm: every shard loaded), the store's pack order
  sent as the layer sends it.
* **late**: ``--late-units`` units of planted token vectors (d=128, float16 sidecars,
  ``bench_ray.planted_sidecars``), 32 query tokens, k=10. Local: ``scan_units`` over in-memory
  units; Ray: ``LateShards`` with 1, 2 and 4 actors.

The local scans are timed with the default BLAS threads and with one (the actors' BLAS runs
one thread: Ray sets ``OMP_NUM_THREADS=1`` in its workers). Per Ray call: its wall time, the slowest shard's own scan (measured inside the actor), and the
**overhead** = the call minus the slowest shard's scan (dispatch, serialisation, the object
store round trip, the merge). The **model** predicts that overhead from pieces timed apart, in
the same run: ``rt(n)`` the round trip of ``n`` parallel empty actor calls, plus the driver's
split of the unit order into the shards' parts, plus the serialisation (pickle out and back in) of each shard's request (its part of the unit order, the
query) and reply (its top k and the list of units it scanned), plus the merge of the ``n``
replies. A second, **transport** model replaces the empty round trip and the pickling by one
round trip of ``n`` parallel calls that carry each shard's real request and reply but do not
scan (``ShardActor.echo``). The top k of every call must equal the local scan's.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import pickle
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ray import planted_sidecars  # noqa: E402
from report_io import write_results  # noqa: E402

SHARDS = (1, 2, 4)


def _median(xs):
    return round(statistics.median(xs), 5)


def planted_store(folder: Path, units: int, dim: int, rng) -> list[str]:
    from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

    hashes = [f"{rng.integers(0, 2**62):016x}{i:016x}" for i in range(units)]
    with ChunkVectorStore(folder, dim) as store:
        items = []
        for h in hashes:
            n = int(rng.integers(1, 7))
            spans = np.stack([np.arange(n) * 100, np.arange(n) * 100 + 99], axis=1)
            items.append((h, spans, rng.standard_normal((n, dim)).astype(np.float32)))
            if len(items) == 1000:
                store.put_many(items)
                items = []
        store.put_many(items)
    return hashes


def _ser(obj) -> tuple[float, int]:
    t0 = time.perf_counter()
    b = pickle.dumps(obj, protocol=5)
    pickle.loads(b)
    return time.perf_counter() - t0, len(b)


def _collect(ray, pending) -> None:
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=60)
        for ref in ready:
            ray.get(ref)


def _rt_payload(scanner, requests, replies, reps: int) -> float:
    """Median round trip of every actor receiving its request and sending back its reply (the
    same objects as the scan's), without scanning: Ray's transport of those bytes."""
    ray = scanner.ray
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _collect(ray, [a.echo.remote(req, rep) for a, req, rep in zip(scanner.actors, requests, replies)])
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _rt(scanner, reps: int) -> float:
    """Median round trip of one empty call to every actor at once, collected as
    ``ShardedScan.scan`` collects its answers (``ray.wait`` for one at a time, then ``ray.get``)."""
    ray = scanner.ray
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        pending = [a.ping.remote() for a in scanner.actors]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=60)
            for ref in ready:
                ray.get(ref)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_case(name: str, local, make_shards, call, ids, merge, reps: int) -> dict:
    """``local()`` -> result; ``make_shards(n)`` -> shards; ``call(sh)`` -> (result, run);
    ``ids(result)`` the top k as comparable ids; ``merge(results)`` the layer's merge."""
    from lar.distributed.shards import split

    from threadpoolctl import threadpool_limits

    ref = ids(local())
    out = {}
    for label, threads in (("local", None), ("local_1_thread", 1)):
        times = []
        with threadpool_limits(limits=threads):
            for _ in range(reps):
                t0 = time.perf_counter()
                local()
                times.append(time.perf_counter() - t0)
        out[label] = {"median_s": _median(times)}
    for n in SHARDS:
        t0 = time.perf_counter()
        sh = make_shards(n)
        sh.scanner.ready(timeout=300)
        started = round(time.perf_counter() - t0, 2)
        call(sh)  # every shard loads its units
        times, inside, equal, req_bytes, rep_bytes, model = [], [], True, 0, 0, []
        for _ in range(reps):
            t0 = time.perf_counter()
            res, run = call(sh)
            times.append(time.perf_counter() - t0)
            inside.append(max(st["seconds"] for st in run.per_shard))
            equal &= ids(res) == ref and run.coverage == 1.0
        # the model's pieces, timed apart: round trips, serialisation, merge
        rt = _rt(sh.scanner, reps)
        req, rep = sh.last_request, sh.last_replies
        ser_req = [_ser(r) for r in req]
        ser_rep = [_ser(r) for r in rep]
        t0 = time.perf_counter()
        for _ in range(5):
            merge(rep)
        merge_s = (time.perf_counter() - t0) / 5
        t0 = time.perf_counter()
        for _ in range(5):
            split(sh.last_order, n)
        split_s = (time.perf_counter() - t0) / 5
        ser_s = sum(t for t, _ in ser_req) + sum(t for t, _ in ser_rep)
        req_bytes, rep_bytes = sum(b for _, b in ser_req), sum(b for _, b in ser_rep)
        overhead = [t - i for t, i in zip(times, inside)]
        pred = rt + split_s + ser_s + merge_s
        rt_pay = _rt_payload(sh.scanner, req, rep, reps)
        pred_b = rt_pay + split_s + merge_s
        model = {"round_trip_s": round(rt, 5), "split_s": round(split_s, 5),
                 "serialise_s": round(ser_s, 5), "round_trip_with_payload_s": round(rt_pay, 5),
                 "predicted_overhead_transport_s": round(pred_b, 5),
                 "measured_over_transport_model": round(statistics.median(overhead) / pred_b, 2),
                 "merge_s": round(merge_s, 6), "predicted_overhead_s": round(pred, 5)}
        out[f"shards_{n}"] = {
            "actors_start_s": started, "median_s": _median(times),
            "slowest_shard_median_s": _median(inside), "overhead_median_s": _median(overhead),
            "top_k_equal": bool(equal), "request_bytes": req_bytes, "reply_bytes": rep_bytes,
            "units_per_shard": [len(p) for p in split(sh.last_order, n)], **model,
            "measured_over_predicted": round(statistics.median(overhead) / pred, 2) if pred else None}
        sh.close()
    out["name"] = name
    return out


class Recorded:
    """A layer's shards, keeping the last request parts and replies (for the model's pieces)."""

    def __init__(self, shards, request_of):
        self.sh, self.scanner, self.request_of = shards, shards.scanner, request_of
        self.last_request = self.last_replies = self.last_order = None

    def scan(self, *args, order, **kw):
        from lar.distributed.shards import split

        scanner = self.scanner
        real = scanner.scan

        def spy(*a, **k):
            results, run = real(*a, **k)
            self.last_replies = [(r, st) for r, st in zip(results, run.per_shard)]
            return results, run

        scanner.scan = spy
        try:
            out = self.sh.scan(*args, **kw)
        finally:
            scanner.scan = real
        self.last_order = order
        self.last_request = [self.request_of(p) for p in split(order, scanner.n)]
        return out

    def close(self):
        self.sh.close()


def bench_dense(tmp: Path, units: int, reps: int) -> dict:
    from lar.layers.kits.vectors.chunkrows import normalise
    from lar.layers.kits.vectors.chunkshard import merge_chunk_results
    from lar.layers.kits.vectors.chunkstore import ChunkVectorStore
    from lar.layers.kits.vectors.sharded import ChunkShards

    rng = np.random.default_rng(3)
    folder = tmp / "vectors"
    hashes = planted_store(folder, units, 384, rng)
    q = rng.standard_normal(384).astype(np.float32)
    store = ChunkVectorStore(folder, 384)
    rows = store.n_rows()
    t0 = time.perf_counter()
    order = store.pack_order(hashes)
    plan_s = time.perf_counter() - t0
    qn = normalise(q)

    def make(n):
        return Recorded(ChunkShards(n, folder, 384), lambda p: (qn, None, p, 10, 0.0, {}))

    out = run_case(
        "dense", lambda: store.search(q, hashes, 10), make,
        lambda sh: sh.scan(q, order, 10, 120.0, order=order),
        lambda r: [(h, s, e) for h, s, e, _ in r.hits] if hasattr(r, "hits")
        else [(h, s, e) for _, h, s, e in r.top],
        lambda reps_: merge_chunk_results([r for r, _ in reps_], 10), reps)
    out.update(units=units, rows=rows, dim=384, driver_pack_order_s=round(plan_s, 5))
    store.close()
    return out


def bench_late(tmp: Path, units: int, reps: int) -> dict:
    from lar.layers.late.scan import scan_units
    from lar.layers.late.shard_source import SidecarSource
    from lar.layers.late.sharded import LateShards, merge_results

    rng = np.random.default_rng(7)
    root = tmp / "sidecars"
    hashes = planted_sidecars(root, units, 128, rng)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = np.ones(32, dtype=np.float32)
    opts = {"backend": "numpy"}
    src = SidecarSource(root, "planted")
    ref = scan_units(q, w, hashes, lambda h: src.load(h)[0], 10, **opts)

    def make(n):
        return Recorded(LateShards(n, root, "planted"), lambda p: (q, w, p, 10, 0.0, opts))

    out = run_case(
        "late", lambda: scan_units(q, w, hashes, lambda h: src.load(h)[0], 10, **opts), make,
        lambda sh: sh.scan(q, w, hashes, 10, 120.0, order=hashes, **opts),
        lambda r: [(h, c) for _, h, c in r.top],
        lambda reps_: merge_results([r for r, _ in reps_], 10), reps)
    out.update(units=units, tokens=ref.tokens, dim=128, query_tokens=32)
    return out


def _rows(case: dict) -> list[str]:
    lines = ["| path | median s | slowest shard s | overhead s (measured) | overhead s (model) | "
             "round trip s | split s | serialise s | merge s | measured / model | "
             "round trip with payload s | overhead s (transport model) | measured / transport model | "
             "request + reply bytes | top 10 equal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
             *(f"| {p.replace('_', ' ')} | {case[p]['median_s']} | - | - | - | - | - | - | - | - | - "
               f"| - | - | - | True |" for p in ("local", "local_1_thread"))]
    for n in SHARDS:
        c = case[f"shards_{n}"]
        lines.append(f"| {n} shard{'s' if n > 1 else ''} | {c['median_s']} | "
                     f"{c['slowest_shard_median_s']} | {c['overhead_median_s']} | "
                     f"{c['predicted_overhead_s']} | {c['round_trip_s']} | {c['split_s']} | "
                     f"{c['serialise_s']} | "
                     f"{c['merge_s']} | {c['measured_over_predicted']} | "
                     f"{c['round_trip_with_payload_s']} | {c['predicted_overhead_transport_s']} | "
                     f"{c['measured_over_transport_model']} | "
                     f"{c['request_bytes'] + c['reply_bytes']:,} | {c['top_k_equal']} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dense-units", type=int, default=20000)
    ap.add_argument("--late-units", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--out", default=f"benchmarks/results/{dt.date.today()}-ray-scale")
    args = ap.parse_args()
    from lar.distributed.cluster import start_local_cluster

    t0 = time.perf_counter()
    ray, stop = start_local_cluster(num_cpus=args.cpus)
    cluster_s = round(time.perf_counter() - t0, 2)
    load = os.getloadavg()
    try:
        with tempfile.TemporaryDirectory(prefix="lar-bench-ray-scale-") as d:
            dense = bench_dense(Path(d) / "d", args.dense_units, args.reps)
            late = bench_late(Path(d) / "l", args.late_units, args.reps)
    finally:
        stop()
    data = {"date": str(dt.date.today()), "machine": platform.machine(), "cores": os.cpu_count(),
            "loadavg_at_start": [round(x, 1) for x in load],
            "loadavg_at_end": [round(x, 1) for x in os.getloadavg()], "ray": ray.__version__,
            "ray_cpus": args.cpus, "cluster_start_s": cluster_s, "reps": args.reps,
            "dense": dense, "late": late}
    lines = [
        f"# Sharded scans on 1, 2 and 4 Ray actors, and the overhead model ({data['date']})", "",
        f"`nice -n 19 {' '.join(['.venv/bin/python'] + sys.argv)}`", "",
        f"{data['cores']} cores shared with other jobs (load {data['loadavg_at_start']} at start, "
        f"{data['loadavg_at_end']} at end), Ray {data['ray']} local cluster of {args.cpus} CPUs "
        f"(started in {cluster_s} s); warm shards; medians of {args.reps} calls.", "",
        f"## dense: exact cosine, {dense['units']:,} units, {dense['rows']:,} chunk vectors, "
        f"d=384 float16, k=10", "", *_rows(dense), "",
        f"The driver's `pack_order` over the units (paid by the Ray path before dispatch; the "
        f"local search plans the same way inside `search`): {dense['driver_pack_order_s']} s.", "",
        f"## late: exact MaxSim, {late['units']:,} units, {late['tokens']:,} token vectors, d=128, "
        f"32 query tokens, k=10", "", *_rows(late), "",
        "overhead (measured) = the call minus the slowest shard's own scan; overhead (model) = "
        "round trip of n parallel empty actor calls + the driver's split of the unit order into "
        "shards + pickling out and in of every request and reply + the merge, each timed apart "
        "in the same run; overhead (transport model) = the round trip of n parallel actor calls "
        "carrying each shard's real request and reply without scanning + the split + the merge "
        "(docs/scale.md).",
    ]
    write_results(args.out, data, lines)


if __name__ == "__main__":
    main()
