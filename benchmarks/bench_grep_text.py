#!/usr/bin/env python
"""What reading every file as text (``rg --text``, issue 18 item 11) costs the grep layer.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_grep_text.py [--binaries 20] [--mib 4] [--reps 5]

Corpus: a copy of the interpreter's ``Lib/`` (no site-packages, no tests) plus ``--binaries``
random binary files of ``--mib`` MiB each (NUL bytes in the first 8 KiB: the scanner skips
them). Rows (median wall time per query over interleaved repetitions): the grep layer's own
ripgrep command (``--text`` with the scanner's ``binary.ignore``), the same without the ignore
file, the command before (ripgrep's binary detection, no ignore file), and
``search(q, layers=["grep"])``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

QUERIES = ["def __init__", "TimeoutError", "import os", "raise ValueError", "zzz_absent_word"]


def make_corpus(dest: Path, binaries: int, mib: int) -> Path:
    src = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("site-packages", "test", "tests",
                                                             "__pycache__", "*.pyc"))
    rnd = os.urandom(mib << 20)
    for i in range(binaries):
        (dest / f"blob_{i}.bin").write_bytes(b"\0" + rnd[i:] + rnd[:i])
    return dest


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binaries", type=int, default=20)
    ap.add_argument("--mib", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    import lar
    from lar.layers.grep import parse_query
    from lar.store.binaryignore import ignore_path

    tmp = Path(tempfile.mkdtemp(prefix="lar-bench-grep-"))
    try:
        root = make_corpus(tmp / "corpus", args.binaries, args.mib)
        with lar.open(root, state=tmp / "state") as eng:
            layer, view = eng.layers["grep"], eng.scope_view()
            times = {"rg --text + binary.ignore": [], "rg --text": [],
                     "rg (binary detection)": [], "search grep": []}
            turn = 0
            for _ in range(args.reps):
                for q in QUERIES:
                    cmd = layer.command(parse_query(q, default_form=True), view)
                    i = cmd.index(str(ignore_path(eng.state_dir))) - 1
                    bare = cmd[:i] + cmd[i + 2:]
                    rows = [("rg --text + binary.ignore", cmd), ("rg --text", bare),
                            ("rg (binary detection)", [a for a in bare if a != "--text"])]
                    turn = (turn + 1) % len(rows)  # rotate the order: no row always runs first
                    for name, c in rows[turn:] + rows[:turn]:
                        t0 = time.perf_counter()
                        subprocess.run(c, cwd=root, capture_output=True)
                        times[name].append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    eng.search(q, layers=["grep"], timebox=10)
                    times["search grep"].append(time.perf_counter() - t0)
        files = sum(1 for _ in root.rglob("*") if _.is_file())
        print(f"corpus: {files} files, {args.binaries} binaries x {args.mib} MiB; "
              f"{len(QUERIES)} queries x {args.reps} reps; load {os.getloadavg()[0]:.1f}")
        for name, ts in times.items():
            print(f"{name:24s} median {statistics.median(ts) * 1000:8.1f} ms   "
                  f"p90 {sorted(ts)[int(0.9 * len(ts))] * 1000:8.1f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
