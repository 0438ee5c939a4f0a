#!/usr/bin/env python
"""bm25 after edits vs a clean build: do scores depend on the index's edit history?

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_bm25_history.py [--files 1000] [--rounds 5] [--out FILE.md]

A synthetic corpus (one file per doc, words drawn from a fixed vocabulary with a Zipf-like
law, seeded) is built with the bm25 layer under a configuration that never merges; then
``--rounds`` rounds of edits (2 % of the files rewritten, 1 % deleted, 1 % added), each followed
by the queries, leave a main segment, deltas and tombstones. The same queries run on a clean
build of the final folder. Reported per scoring path: queries whose top-10 (paths and spans)
differ from the clean build's, the largest relative score difference, and the median query
time of the layer's ``SegmentedIndex.search`` (corpus-wide statistics: ``live`` given; legacy
IDF rescaling: ``live=None``).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
os.environ.setdefault("LAR_SPARE_BUILD", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lar  # noqa: E402
from lar.core.background import ScoreMoments  # noqa: E402

STILL = {"bm25_max_deltas": 10 ** 6, "bm25_delta_fraction": 1e9, "bm25_dead_fraction": 1e9}


def vocabulary(n: int = 3000) -> list[str]:
    rng = random.Random(7)
    letters = "abcdefghijklmnoprstuvw"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(n)]


def doc(rng: random.Random, vocab: list[str]) -> str:
    paras = []
    for _ in range(rng.randint(1, 4)):
        n = rng.randint(20, 120)
        paras.append(" ".join(vocab[min(int(rng.paretovariate(1.1)) - 1, len(vocab) - 1)]
                              if rng.random() < 0.5 else rng.choice(vocab) for _ in range(n)))
    return "\n\n".join(paras) + "\n"


def top(eng, queries, k=10):
    out = {}
    for q in queries:
        hits = eng.search(q, timebox=30, layers=["bm25"], k=k).hits
        out[q] = [(h.path, h.span.start, h.span.end, h.evidence["bm25"].score) for h in hits]
    return out


def legacy_top(eng, queries, k=10):
    """The same queries through the old scoring (each term rescaled to the IDF over all
    segments, segment-local lengths, tombstones counted)."""
    layer = eng.layers["bm25"]
    view = eng.scope_view(None)
    paths = {u.hash: u.path for u in view.units()}
    allowed = layer.searchable(view)
    out = {}
    for q in queries:
        res, _ = layer.index.search(layer.tokenizer.query(q), k, allowed, moments=ScoreMoments(), live=None)
        out[q] = [(paths.get(h), s, e, score) for score, h, s, e in res]
    return out


def compare(a, b):
    differ, worst = 0, 0.0
    for q in a:
        if [x[:3] for x in a[q]] != [x[:3] for x in b[q]]:
            differ += 1
        ref = {x[:3]: x[3] for x in b[q]}
        for x in a[q]:
            if x[:3] in ref and ref[x[:3]]:
                worst = max(worst, abs(x[3] - ref[x[:3]]) / ref[x[:3]])
    return differ, worst


def timed(eng, queries, live: bool, reps=5):
    layer = eng.layers["bm25"]
    view = eng.scope_view(None)
    allowed = layer.searchable(view)
    lv = layer.live_built(view) if live else None
    times = []
    for _ in range(reps):
        for q in queries:
            terms = layer.tokenizer.query(q)
            t0 = time.perf_counter()
            layer.index.search(terms, 100, allowed, moments=ScoreMoments(), live=lv)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rng, vocab = random.Random(11), vocabulary()
    queries = [" ".join(rng.choice(vocab[:600]) for _ in range(rng.randint(1, 4)))
               for _ in range(args.queries)]
    tmp = Path(tempfile.mkdtemp(prefix="lar-bm25-history-"))
    root = tmp / "root"
    root.mkdir()
    for i in range(args.files):
        (root / f"d{i:05d}.txt").write_text(doc(rng, vocab))
    with lar.open(root, state=tmp / "hist", config=STILL) as eng:
        t0 = time.monotonic()
        eng.build(timebox=600, layers=["bm25"])
        build_s = time.monotonic() - t0
        names = sorted(p.name for p in root.iterdir())
        added = 0
        for _ in range(args.rounds):
            for name in rng.sample(names, max(1, args.files // 50)):
                (root / name).write_text(doc(rng, vocab))
            for name in rng.sample(names, max(1, args.files // 100)):
                (root / name).unlink()
                names.remove(name)
            for _ in range(max(1, args.files // 100)):
                name = f"n{added:05d}.txt"
                added += 1
                (root / name).write_text(doc(rng, vocab))
                names.append(name)
            top(eng, queries)
        layout = eng.layers["bm25"].index.layout
        history = top(eng, queries)
        legacy = legacy_top(eng, queries)
        ms_new, ms_old = timed(eng, queries, True), timed(eng, queries, False)
    with lar.open(root, state=tmp / "clean", config=STILL) as eng:
        eng.build(timebox=600, layers=["bm25"])
        clean = top(eng, queries)
    d_new, w_new = compare(history, clean)
    d_old, w_old = compare(legacy, clean)
    lines = [
        f"# bm25 after edits vs a clean build ({time.strftime('%Y-%m-%d')})", "",
        f"`{' '.join([Path(sys.executable).name, *sys.argv])}`", "",
        f"{args.files} files, build {build_s:.1f} s; {args.rounds} rounds of edits leave "
        f"{len(layout.deltas)} deltas beside the main segment (no merge); {len(queries)} queries, top 10.", "",
        "| scoring | queries whose top 10 differ from a clean build | max relative score difference | median search (ms, k=100) |",
        "| --- | --- | --- | --- |",
        f"| corpus-wide statistics (now) | {d_new}/{len(queries)} | {w_new:.2e} | {ms_new:.2f} |",
        f"| IDF rescaling only (before) | {d_old}/{len(queries)} | {w_old:.2e} | {ms_old:.2f} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
