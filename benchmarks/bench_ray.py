#!/usr/bin/env python3
"""Ray against the local path on this machine: building (the static layer's pass on Ray tasks)
and the late layer's exact scan over 1 and 2 shard actors, with equality checked each time.

Run from the repository root (needs the ``ray`` extra):

    .venv/bin/python benchmarks/bench_ray.py [--docs 200] [--units 2000] [--out benchmarks/results/DATE-ray]

* **build**: ``--docs`` generated prose files; the ``static`` layer (Model2Vec distilled from the
  local MiniLM, loaded before timing) built locally and with ``executor=RayExecutor()`` on a
  local Ray cluster of ``--cpus`` CPUs, each into a fresh state. Reported: seconds for the
  build call (Ray's cluster start is timed apart), and whether the vector packs are byte-equal.
* **scan**: ``--units`` units of planted token vectors (20-200 tokens, d=128, float16
  sidecars), one 32-token query, k=10; the single-process ``scan_units`` over in-memory units
  against ``LateShards`` with 1 and 2 actors (warm: every shard loaded), median of ``--reps``
  calls. The gap at 1 shard is Ray's dispatch and merge overhead; the top k must be identical.

On a 2-core machine shared with other jobs Ray is not expected to be faster: its tasks and
actors compete for the same two cores as the driver, and each call pays a round trip through
Ray's object store. The point of the figures is the overhead, and that the answers agree.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report_io import write_results  # noqa: E402


def _corpus(root: Path, n: int) -> Path:
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(3000)]
    root.mkdir(parents=True)
    for i in range(n):
        paras = ["# Note %d" % i] + [" ".join(rng.choice(vocab, size=int(rng.integers(40, 160))))
                                       for _ in range(int(rng.integers(2, 8)))]
        (root / f"note{i:04d}.md").write_text("\n\n".join(paras) + "\n")
    return root


def bench_build(tmp: Path, docs: int, cpus: int) -> dict:
    import lar
    from lar.distributed.ray_build import RayExecutor

    corpus = _corpus(tmp / "corpus", docs)
    out = {}
    packs = {}
    for mode in ("local", "ray"):
        with lar.open(corpus, state=tmp / f"state-{mode}") as eng:
            eng.layers["static"].encoder()  # the model, loaded (distilled once) before timing
            t0 = time.perf_counter()
            rep = eng.build(timebox=3600, layers=["static"],
                            executor=RayExecutor(batch=8) if mode == "ray" else None)
            out[mode] = {"seconds": round(time.perf_counter() - t0, 2),
                         **{k: rep["layers"]["static"][k] for k in ("ok", "skipped", "pending")}}
            store = eng.layers["static"].store
            packs[mode] = b"".join(p.read_bytes() for p in sorted(store.dir.glob("vectors.*")))
    out["packs_equal"] = packs["local"] == packs["ray"]
    out["docs"] = docs
    return out


def planted_sidecars(root: Path, units: int, dim: int, rng) -> list[str]:
    """``units`` units of random unit-length float16 token vectors (20-60 per chunk, 1-4
    chunks) written as sidecars under ``root``; their hashes."""
    from lar.encoders.encoding import UnitEncoding
    from lar.layers.kits.vectors.sidecar import sidecar_path, write_sidecar

    hashes = []
    for i in range(units):
        sizes = [int(s) for s in rng.integers(20, 60, size=int(rng.integers(1, 5)))]
        n = sum(sizes)
        x = rng.standard_normal((n, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        spans = np.stack([np.arange(n) * 4, np.arange(n) * 4 + 3], axis=1).astype(np.int64)
        chunks = np.stack([starts * 4, (starts + np.array(sizes)) * 4], axis=1).astype(np.int64)
        h = f"{rng.integers(0, 2**62):016x}{i:016x}"
        write_sidecar(sidecar_path(root, h),
                      UnitEncoding("planted", "1", x.astype(np.float16), spans, starts, chunks))
        hashes.append(h)
    return hashes


def bench_scan(tmp: Path, units: int, reps: int) -> dict:
    from lar.layers.late.scan import scan_units
    from lar.layers.late.shard_source import SidecarSource
    from lar.layers.late.sharded import LateShards

    rng = np.random.default_rng(7)
    root = tmp / "sidecars"
    hashes = planted_sidecars(root, units, 128, rng)
    q = rng.standard_normal((32, 128)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = np.ones(32, dtype=np.float32)
    opts = {"backend": "numpy"}
    src = SidecarSource(root, "planted")
    load = lambda h: src.load(h)[0]  # noqa: E731
    ref = scan_units(q, w, hashes, load, 10, **opts)  # warm: every unit in memory
    from threadpoolctl import threadpool_limits

    def local(threads):
        def run():
            with threadpool_limits(limits=threads):
                return scan_units(q, w, hashes, load, 10, **opts), None
        return run

    shards = {n: LateShards(n, root, "planted") for n in (1, 2)}
    started = {}
    for n, sh in shards.items():
        t0 = time.perf_counter()
        sh.scanner.ready()
        started[n] = round(time.perf_counter() - t0, 2)
        sh.scan(q, w, hashes, 10, 120.0, **opts)  # loads every shard
    paths = {"local_default_threads": local(None), "local_1_thread": local(1),
             **{f"shards_{n}": (lambda sh=sh: sh.scan(q, w, hashes, 10, 120.0, **opts))
                for n, sh in shards.items()}}
    times = {k: [] for k in paths}
    inside = {k: [] for k in paths}
    equal = dict.fromkeys(paths, True)
    for _ in range(reps):  # round-robin: a busy spell hits every path alike
        for name, fn in paths.items():
            t0 = time.perf_counter()
            res, run = fn()
            times[name].append(time.perf_counter() - t0)
            equal[name] &= [(h, c) for _, h, c in res.top] == [(h, c) for _, h, c in ref.top]
            if run is not None:
                inside[name].append(max(st["seconds"] for st in run.per_shard))
    out = {"units": units, "tokens": ref.tokens}
    for name in paths:
        out[name] = {"median_s": round(statistics.median(times[name]), 4),
                     "top_k_equal": equal[name]}
        if inside[name]:
            n = int(name.split("_")[1])
            out[name].update(actors_start_s=started[n],
                             slowest_shard_median_s=round(statistics.median(inside[name]), 4),
                             overhead_median_s=round(statistics.median(
                                 t - i for t, i in zip(times[name], inside[name])), 4))
    for sh in shards.values():
        sh.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--units", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--out", default=f"benchmarks/results/{dt.date.today()}-ray")
    args = ap.parse_args()
    from lar.distributed.cluster import start_local_cluster

    t0 = time.perf_counter()
    ray, stop = start_local_cluster(num_cpus=args.cpus)
    cluster_s = round(time.perf_counter() - t0, 2)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lar-bench-ray-") as d:
        tmp = Path(d)
        build = bench_build(tmp / "b", args.docs, args.cpus)
        scan = bench_scan(tmp / "s", args.units, args.reps)
    stop()
    data = {"date": str(dt.date.today()), "machine": platform.machine(), "cores": os.cpu_count(),
            "loadavg_at_start": [round(x, 1) for x in load], "ray": ray.__version__,
            "ray_cpus": args.cpus, "cluster_start_s": cluster_s, "build": build, "scan": scan}
    lines = [
        f"# Ray against the local path ({data['date']})", "",
        f"`{' '.join(['.venv/bin/python'] + sys.argv)}`", "",
        f"{data['cores']} cores shared with other jobs (load {data['loadavg_at_start']} at start), "
        f"Ray {data['ray']} local cluster of {args.cpus} CPUs (started in {cluster_s} s).", "",
        "## Build: the static layer", "",
        "| path | seconds | ok | skipped | pending |", "|---|---|---|---|---|",
        *(f"| {m} | {build[m]['seconds']} | {build[m]['ok']} | {build[m]['skipped']} | "
          f"{build[m]['pending']} |" for m in ("local", "ray")),
        "", f"{build['docs']} documents; vector packs byte-equal: **{build['packs_equal']}**.", "",
        "## Scan: the late layer's exact MaxSim over planted vectors", "",
        f"{scan['units']} units, {scan['tokens']} tokens, d=128, 32 query tokens, k=10; warm; "
        f"median of {args.reps} rounds, the paths timed in turn within each round.", "",
        "| path | median s per query | slowest shard's own scan s | Ray overhead s | top 10 equal |",
        "|---|---|---|---|---|",
        *(f"| {name} | {scan[name]['median_s']} | {scan[name].get('slowest_shard_median_s', '-')} | "
          f"{scan[name].get('overhead_median_s', '-')} | {scan[name]['top_k_equal']} |"
          for name in ("local_default_threads", "local_1_thread", "shards_1", "shards_2")),
        "", "Ray overhead = the call's time minus the slowest shard's own scan: dispatch, the "
        "object store round trip and the merge.",
    ]
    write_results(args.out, data, lines)


if __name__ == "__main__":
    main()
