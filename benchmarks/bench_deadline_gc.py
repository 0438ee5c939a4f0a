#!/usr/bin/env python
"""Deadline overshoot with the garbage collector managed (``LAR_GC_FREEZE=1``, the default:
``lar.engine.collector``) and left alone (``=0``), side by side.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_deadline_gc.py [--docs 300] [--queries 40]
        [--timeboxes 0.05,0.1,0.2,0.5] [--rounds 2] [--cheap] [--out benchmarks/results/X]

One state is built first (SciFact abstracts from ``../shared/benchmarks/scifact-train``, every
default layer that builds here, or only the cheap ones with ``--cheap``). Then child processes
alternate the two settings (on, off, on, off, ...), each opening that state and running every
query at every timebox; overshoot is the call's wall time minus its timebox. Each child also
records the collector's pauses (``gc.callbacks``) during the timed calls."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

CHEAP_SKIP = {"dense", "late", "dense-e5", "static", "rerank", "sparse"}

CHILD = r"""
import gc, json, sys, time
import lar
root, state, layers, timeboxes, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), \
    json.loads(sys.argv[4]), json.loads(sys.argv[5])
eng = lar.open(root, state=state)
eng.search(queries[0], timebox=5, layers=layers)  # warm: models loaded, caches filled
pauses, start = [], {}
def watch(phase, info):
    if phase == "start":
        start["t"] = time.perf_counter()
    else:
        pauses.append((info["generation"], time.perf_counter() - start["t"]))
gc.callbacks.append(watch)
out = {"over": {}, "freeze_count": gc.get_freeze_count()}
for tb in timeboxes:
    overs = []
    for q in queries:
        t = time.perf_counter()
        eng.search(q, timebox=tb, layers=layers)
        overs.append(time.perf_counter() - t - tb)
    out["over"][str(tb)] = overs
gc.callbacks.remove(watch)
out["pauses"] = pauses
eng.close()
print(json.dumps(out))
"""


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def load_avg() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--timeboxes", default="0.05,0.1,0.2,0.5")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cheap", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from run_all import scifact  # the same corpus and queries as the goal table

    import lar

    work = Path(tempfile.mkdtemp(prefix="lar-deadline-gc-"))
    docs, queries, root = scifact(work, a.docs, a.queries)
    state = work / "state"
    with lar.open(root, state=state) as eng:
        layers = [n for n in eng.layers if not (a.cheap and n in CHEAP_SKIP)]
        t0 = time.perf_counter()
        eng.build(timebox=3600, layers=layers)
        build_s = time.perf_counter() - t0
    tbs = [float(x) for x in a.timeboxes.split(",")]
    qs = list(queries.values())
    runs = {"on": [], "off": []}
    loads = []
    for _ in range(a.rounds):
        for setting in ("on", "off"):
            env = dict(os.environ, LAR_GC_FREEZE="1" if setting == "on" else "0",
                       LAR_SPARE_BUILD="0", PYTHONPATH=str(ROOT))
            loads.append(load_avg())
            p = subprocess.run([sys.executable, "-c", CHILD, str(root), str(state), json.dumps(layers),
                                json.dumps(tbs), json.dumps(qs)], capture_output=True, text=True,
                               env=env, timeout=3600)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            runs[setting].append(json.loads(p.stdout.strip().splitlines()[-1]))
    R = {"docs": len(docs), "queries": len(qs), "layers": layers, "timeboxes": tbs,
         "rounds": a.rounds, "build_s": round(build_s, 1), "loads": loads, "nproc": os.cpu_count(),
         "settings": {}}
    for setting, rs in runs.items():
        allo = [o for r in rs for v in r["over"].values() for o in v]
        pauses = [p for r in rs for _, p in r["pauses"]]
        full = [p for r in rs for g, p in r["pauses"] if g == 2]
        R["settings"][setting] = {
            "p50_ms": round(1000 * pct(allo, 50), 1), "p99_ms": round(1000 * pct(allo, 99), 1),
            "max_ms": round(1000 * max(allo), 1), "n": len(allo),
            "by_timebox": {tb: {"p50_ms": round(1000 * statistics.median(
                [o for r in rs for o in r["over"][tb]]), 1), "p99_ms": round(1000 * pct(
                    [o for r in rs for o in r["over"][tb]], 99), 1)} for tb in rs[0]["over"]},
            "collections": len(pauses), "pauses_over_5ms": sum(p > 0.005 for p in pauses),
            "full_collections": len(full), "longest_full_ms": round(1000 * max(full), 1) if full else 0.0,
            "frozen_at_open": [r["freeze_count"] for r in rs]}
    lines = [f"deadline overshoot, {len(layers)} layers ({', '.join(layers)}), {len(docs)} SciFact docs, "
             f"{len(qs)} queries x timeboxes {a.timeboxes}, {a.rounds} rounds alternating; load {loads}",
             "", "| collector | p50 | p99 | max | collections (> 5 ms) | full collections, longest |",
             "|---|---|---|---|---|---|"]
    for s, v in R["settings"].items():
        lines.append(f"| {'managed (LAR_GC_FREEZE=1)' if s == 'on' else 'left alone (=0)'} | {v['p50_ms']} ms | "
                     f"{v['p99_ms']} ms | {v['max_ms']} ms | {v['collections']} ({v['pauses_over_5ms']}) | "
                     f"{v['full_collections']}, {v['longest_full_ms']} ms |")
    lines += ["", "by timebox (p50 / p99 ms): " + "; ".join(
        f"{tb}s on {R['settings']['on']['by_timebox'][tb]['p50_ms']}/{R['settings']['on']['by_timebox'][tb]['p99_ms']}, "
        f"off {R['settings']['off']['by_timebox'][tb]['p50_ms']}/{R['settings']['off']['by_timebox'][tb]['p99_ms']}"
        for tb in R["settings"]["on"]["by_timebox"])]
    print("\n".join(lines))
    if a.out:
        Path(a.out).with_suffix(".json").write_text(json.dumps(R, indent=2) + "\n")
        Path(a.out).with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
