"""Deadlines and lifecycle (issue 18, items 12-15, 18): wall time of calls that used to overrun.

    python benchmarks/bench_deadlines.py            # all scenarios, about a minute
    python benchmarks/bench_deadlines.py --only lock,structural

- ``structural``: an ast-grep pattern with an explicit language over a 10 MB Python file at a
  1 s timebox (the big file is parsed in a worker process killed at the deadline);
- ``lock``: 0.3 s searches while another process holds the writer lock after an edit;
- ``share``: units the background builder builds in 4 s while 8 threads search non-stop;
- ``exit``: a script that searches with a 0.05 s timebox and exits without ``close()``, on a
  fresh state, five times: return codes and wall time.
Prints one JSON line per scenario.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import lar


def corpus(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"f{i}.py").write_text(f"def alpha_{i}(beta):\n    return beta * {i}\n")
    return root


def structural(tmp: Path) -> dict:
    root = tmp / "structural"
    root.mkdir()
    line, parts, size, i = "def f{0}(x):\n    return print(x + {0})\n", [], 0, 0
    while size < 10_000_000:
        parts.append(line.format(i))
        size += len(parts[-1])
        i += 1
    (root / "big.py").write_text("".join(parts))
    with lar.open(root, state=tmp / "s1", spare_build=False) as eng:
        t0 = time.monotonic()
        res = eng.search({"structural": {"pattern": "print($A)", "lang": "python"}}, timebox=1.0)
        wall = time.monotonic() - t0
    return {"scenario": "structural 10 MB, timebox 1 s", "wall_s": round(wall, 2),
            "state": res.run("structural").state.value}


def lock(tmp: Path) -> dict:
    root = corpus(tmp / "lock", 20)
    state = tmp / "s2"
    walls, skipped = [], 0
    with lar.open(root, state=state, spare_build=False) as eng:
        eng.build(timebox=30, layers=["bm25"])
        holder = subprocess.Popen([sys.executable, "-c", "import sys, fcntl, time; "
                                   f"fh = open({str(state / 'writer.lock')!r}, 'a+'); "
                                   "fcntl.flock(fh.fileno(), fcntl.LOCK_EX); print('held', "
                                   "flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
        holder.stdout.readline()
        try:
            for i in range(5):
                (root / f"f{i}.py").write_text(f"def alpha_{i}(beta):\n    return beta + {i}\n")
                t0 = time.monotonic()
                res = eng.search(f"alpha_{i}", timebox=0.3, layers=["grep", "bm25"])
                walls.append(time.monotonic() - t0)
                skipped += any("change detection skipped" in n for r in res.runs for n in r.notes)
        finally:
            holder.kill()
            holder.wait()
    return {"scenario": "0.3 s search, writer lock held elsewhere", "max_wall_s": round(max(walls), 2),
            "searches": len(walls), "said_skipped": skipped}


def share(tmp: Path) -> dict:
    root = corpus(tmp / "share", 400)
    with lar.open(root, state=tmp / "s3", spare_build=False) as eng:
        stop, n = threading.Event(), [0]

        def loop(i: int) -> None:
            while not stop.is_set():
                eng.search({"grep": f"alpha_{i}", "names": {"fuzzy": f"f{i}"}}, timebox=1.0)
                n[0] += 1

        threads = [threading.Thread(target=loop, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        eng.start_background_build()
        time.sleep(4.0)
        built = eng.builder.built_in_background
        stop.set()
        for t in threads:
            t.join(30)
    return {"scenario": "background build, 8 threads searching, 4 s", "units_built": built,
            "searches": n[0]}


def exits(tmp: Path) -> dict:
    root = corpus(tmp / "exit", 40)
    script = ("import sys, lar\neng = lar.open(sys.argv[1], state=sys.argv[2])\n"
              "for q in ('alpha', 'beta function', 'return beta'):\n"
              "    eng.search(q, timebox=0.05, layers=['grep', 'names', 'trigram'])\n")
    rcs, walls = [], []
    for i in range(5):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-c", script, str(root), str(tmp / f"s4-{i}")],
                           capture_output=True, env={**os.environ, "LAR_SPARE_BUILD": "0"})
        walls.append(time.monotonic() - t0)
        rcs.append(p.returncode)
    return {"scenario": "search, exit without close (fresh state)", "rcs": rcs,
            "max_wall_s": round(max(walls), 2)}


SCENARIOS = {"structural": structural, "lock": lock, "share": share, "exit": exits}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(SCENARIOS))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        for name in args.only.split(","):
            sub = Path(d) / name
            sub.mkdir()
            print(json.dumps(SCENARIOS[name](sub)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
