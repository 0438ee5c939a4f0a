#!/usr/bin/env python
"""The speed goal table (issue 26) in one command: lar and its peers side by side, interleaved.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/run_all.py [--quick] [--docs 1500] [--queries 50] [--reps 3]
        [--only names,bm25,grep,dense,deadline] [--out benchmarks/results/DATE-speed-run]
        [--profile bm25]

Rows (each figure is a median over interleaved repetitions; ratios are lar / peer per query,
then the median of the ratios; the load average is written next to every row):

- ``names``: per-call floor, ``search(q, layers=["names"])`` on a copy of the interpreter's
  ``Lib/`` (no site-packages), after a warm-up call.
- ``bm25``: ``layers=["bm25"], k=100`` on the first ``--docs`` SciFact abstracts
  (``/work/shared/benchmarks/scifact-train``, 5,183 docs in all), against tantivy ``en_stem`` and
  bm25s (called directly on the same texts), per judged query in rotating order.
- ``grep``: ``layers=["grep"]`` vs raw ``rg --json`` with the same patterns on the stdlib copy,
  30 mixed queries (identifiers and phrases, as ``bench_spine.py``).
- ``dense``: ``layers=["dense"]`` (exact scan) vs the same query encoding + bare numpy
  ``q @ M.T`` + top-k over the layer's own stored vectors.
- ``deadline``: overshoot (elapsed minus timebox) with every default layer that builds here
  (dense/late included unless ``--cheap``), timeboxes 0.05-5 s, p50/p99/max.

- ``late``, ``anytime``, ``edit``, ``build``: see ``goal_rows.py`` (the late scan against the
  same-shape GEMM; nDCG@10 of the default search at 0.1/0.2/0.5 s and unlimited against bm25
  alone; ``bench_lexical.py``'s edit-to-search and ``bench_build_speed.py``'s build ratio as
  child processes).

``--state DIR`` keeps the SciFact folder and its state (a second run reuses the builds).
``--profile ROW`` prints a cProfile of that row's lar calls (top 25 by cumulative time).

Two rows have their own closer look: ``bench_bm25_call.py`` (one bm25 call against bm25s and
tantivy, with nDCG@10 and a profile) and ``bench_late_call.py`` (a full late scan against the
same-shape fp32 GEMM, in arena order and in the previous order).
"""
from __future__ import annotations

import argparse
import cProfile
import datetime as _dt
import io
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lar  # noqa: E402
from lar.store.rg import rg_path  # noqa: E402

from bench_spine import copy_stdlib, make_queries, raw_command  # noqa: E402
from bm25_common import B, K1, METHOD, load, materialise  # noqa: E402
import goal_rows  # noqa: E402

SEED = 20261202
TIMEBOXES = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
ROWS = ("names", "bm25", "grep", "dense", "late", "deadline", "anytime", "edit", "build")


def load_avg() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    pos = (len(xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def ms(x, nd=2):
    return None if x is None else round(1000.0 * x, nd)


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return time.perf_counter() - t, out


def profiled(eng, calls, n=30) -> str:
    """cProfile of ``eng.asearch(**kw)`` for each kw in ``calls``, run on this thread with
    ``asyncio.to_thread`` inlined (cProfile sees one thread only), so the layers' thread work
    shows up; concurrency is lost, so read it for where time goes, not for wall time."""
    import asyncio

    async def inline(func, /, *args, **kwargs):
        return func(*args, **kwargs)

    async def run_all():
        for kw in calls:
            await eng.asearch(**kw)

    real = asyncio.to_thread
    asyncio.to_thread = inline
    pr = cProfile.Profile()
    try:
        pr.enable()
        asyncio.run(run_all())
        pr.disable()
    finally:
        asyncio.to_thread = real
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(n)
    return s.getvalue()


def paired(names_fns, items, reps):
    """Run each fn on each item, rotating which goes first; {name: [median per item]}."""
    per = {n: [] for n, _ in names_fns}
    for i, item in enumerate(items):
        ts = {n: [] for n, _ in names_fns}
        for r in range(reps):
            k = (i + r) % len(names_fns)
            for n, fn in names_fns[k:] + names_fns[:k]:
                ts[n].append(timed(fn, item)[0])
        for n in per:
            per[n].append(med(ts[n]))
    return per


def summarise(per, lar_name, peers) -> dict:
    out = {n: {"p50_ms": ms(med(v)), "p95_ms": ms(pct(v, 95))} for n, v in per.items()}
    for p in peers:
        ratios = [a / b for a, b in zip(per[lar_name], per[p]) if b]
        out[f"ratio_vs_{p}"] = round(med(ratios), 2) if ratios else None
    return out


# -- the stdlib rows ---------------------------------------------------------------------------
def stdlib_engine(work: Path):
    src = Path(sysconfig.get_paths()["stdlib"])
    corpus = work / "Lib"
    copy_stdlib(src, corpus)
    eng = lar.open(corpus, state=work / "state-lib")
    return eng, corpus


def row_names(eng, queries, reps, profile) -> dict:
    eng.build(timebox=600, layers=["names"])
    qs = [q["q"] for q in queries]
    eng.search(qs[0], layers=["names"])  # warm-up (loads the layer)
    per = paired([("lar", lambda q: eng.search(q, layers=["names"]))], qs, reps)
    out = summarise(per, "lar", [])
    out["queries"] = len(qs)
    if profile:
        out["profile"] = profiled(eng, [dict(query=q, layers=["names"]) for q in qs])
    return out


def row_grep(eng, corpus, queries, reps, profile) -> dict:
    layer = eng.layers["grep"]
    qs = [q["q"] for q in queries]
    cmds = {q: raw_command(layer, eng, q) for q in qs}

    def raw(q):
        subprocess.run(cmds[q], cwd=corpus, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    eng.search(qs[0], layers=["grep"], timebox=10)
    per = paired([("lar", lambda q: eng.search(q, layers=["grep"], timebox=10)), ("rg_json", raw)], qs, reps)
    out = summarise(per, "lar", ["rg_json"])
    out["queries"] = len(qs)
    if profile:
        out["profile"] = profiled(eng, [dict(query=q, layers=["grep"], timebox=10) for q in qs])
    return out


# -- SciFact rows ------------------------------------------------------------------------------
def scifact(work: Path, n_docs: int, n_queries: int):
    corpus, queries, qrels, ext = load("scifact-train")
    corpus = corpus[:n_docs]
    ids = {d["_id"] for d in corpus}
    queries = {q: t for q, t in queries.items() if any(d in ids for d in qrels[q])}
    queries = dict(list(queries.items())[:n_queries])
    root = work / "scifact"
    if root.is_dir() and len(list(root.iterdir())) == len(corpus):  # kept by --state: as written
        doc_of = {f"d{i:06d}{ext}": d["_id"] for i, d in enumerate(corpus)}
    else:
        doc_of = materialise(corpus, ext, root)
    return corpus, queries, root, qrels, doc_of


def tantivy_searcher(corpus):
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    index = tantivy.Index(sb.build())
    w = index.writer()
    for d in corpus:
        w.add_document(tantivy.Document(id=d["_id"], body=f"{d.get('title', '')}\n\n{d['text']}"))
    w.commit()
    index.reload()
    searcher = index.searcher()

    def search(text):
        clean = " ".join(re.findall(r"\w+", text))
        q = index.parse_query(clean, ["body"])
        return [searcher.doc(a)["id"][0] for _, a in searcher.search(q, 100).hits]

    return search


def bm25s_searcher(corpus):
    import bm25s
    import Stemmer

    stem = Stemmer.Stemmer("english")
    texts = [f"{d.get('title', '')}\n\n{d['text']}" for d in corpus]
    model = bm25s.BM25(k1=K1, b=B, method=METHOD)
    model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)

    def search(text):
        qt = bm25s.tokenize([text], stopwords="en", stemmer=stem, show_progress=False, return_ids=False)
        return model.retrieve(qt, k=100, show_progress=False)

    return search


def row_bm25(eng, corpus, queries, reps, profile) -> dict:
    t_build, _ = timed(eng.build, timebox=1200, layers=["bm25"])
    tv = tantivy_searcher(corpus)
    bs = bm25s_searcher(corpus)
    qs = list(queries.values())

    def lar_call(q):
        return eng.search(q, layers=["bm25"], k=100)

    lar_call(qs[0])
    per = paired([("lar", lar_call), ("tantivy", tv), ("bm25s", bs)], qs, reps)
    out = summarise(per, "lar", ["tantivy", "bm25s"])
    out.update(queries=len(qs), docs=len(corpus), lar_build_s=round(t_build, 2))
    over = [r for r in (lar_call(q) for q in qs) if r.elapsed > r.timebox]
    out["calls_past_timebox"] = len(over)
    if profile:
        out["profile"] = profiled(eng, [dict(query=q, layers=["bm25"], k=100, timebox=10) for q in qs])
    return out


def row_dense(eng, queries, reps, profile) -> dict:
    import numpy as np

    t_build, _ = timed(eng.build, timebox=1800, layers=["dense"])
    layer = eng.layers["dense"]
    qs = list(queries.values())
    eng.search(qs[0], layers=["dense"], k=10)
    hashes = sorted({r.hash for r in eng.index.live()})
    M = np.ascontiguousarray(layer.store.matrix(hashes).vectors, dtype=np.float32)
    encode = layer.encode_query

    def bare(q):
        v = np.asarray(encode(q), dtype=np.float32)
        s = M @ v
        k = min(10, len(s))
        top = np.argpartition(-s, k - 1)[:k]
        return top[np.argsort(-s[top])]

    per = paired([("lar", lambda q: eng.search(q, layers=["dense"], k=10)), ("numpy", bare)], qs, reps)
    out = summarise(per, "lar", ["numpy"])
    out.update(queries=len(qs), vectors=int(M.shape[0]), dim=int(M.shape[1]), lar_build_s=round(t_build, 2))
    if profile:
        out["profile"] = profiled(eng, [dict(query=q, layers=["dense"], k=10, timebox=10) for q in qs])
    return out


def row_deadline(eng, queries, timeboxes, cheap: bool) -> dict:
    skip = {"dense", "late", "dense-e5", "static", "rerank", "sparse"} if cheap else set()
    names = [n for n in eng.layers if n not in skip]
    t_build, rep = timed(eng.build, timebox=1800, layers=names)
    qs = list(queries.values())
    eng.search(qs[0], timebox=5, layers=names)
    out = {"layers": names, "build_s": round(t_build, 1), "by_timebox": {},
           "coverage": goal_rows.coverage(eng, set(names))}
    all_over = []
    for tb in timeboxes:
        overs, layers_late, after, late_by = [], [], [], {}
        for q in qs:
            t = time.perf_counter()
            res = eng.search(q, timebox=tb, layers=names)
            wall = time.perf_counter() - t
            overs.append(wall - tb)
            # where the overshoot went: the last layer's return against the deadline, the rest
            # (fusion, enrichment, ...) after it
            last = max((r.elapsed for r in res.runs), default=0.0)
            layers_late.append(last - tb)
            for r in res.runs:  # which layers returned more than 10 ms past the deadline
                if r.elapsed - tb > 0.01:
                    late_by[r.name] = max(late_by.get(r.name, 0.0), round(1000 * (r.elapsed - tb), 1))
            after.append(wall - last)
            del res
        all_over += overs
        out["by_timebox"][str(tb)] = {"p50_ms": ms(pct(overs, 50)), "p99_ms": ms(pct(overs, 99)),
                                      "max_ms": ms(max(overs)), "n": len(overs), "load": load_avg(),
                                      "last_layer_vs_deadline_p50_ms": ms(pct(layers_late, 50)),
                                      "last_layer_vs_deadline_p99_ms": ms(pct(layers_late, 99)),
                                      "after_layers_p50_ms": ms(pct(after, 50)),
                                      "after_layers_p99_ms": ms(pct(after, 99)),
                                      "layers_past_deadline_max_ms": late_by}
    out["all"] = {"p50_ms": ms(pct(all_over, 50)), "p99_ms": ms(pct(all_over, 99)), "max_ms": ms(max(all_over))}
    return out


# -- the table ---------------------------------------------------------------------------------
def table(R) -> list[str]:
    L = [f"# speed goal table, {R['date']}", "", f"load average at start: {R['load_start']}; "
         f"args: `{R['args']}`", "", "| metric | goal | measured | met? | load |", "|---|---|---|---|---|"]
    if "names" in R:
        r = R["names"]
        v = r["lar"]["p50_ms"]
        L.append(f"| names floor, stdlib Lib/ ({r['queries']} q) | <= 3 ms p50 | {v} ms | "
                 f"{'yes' if v <= 3 else 'no'} | {r['load']} |")
    if "bm25" in R:
        r = R["bm25"]
        x = r["ratio_vs_tantivy"]
        L.append(f"| bm25 k=100, SciFact {r['docs']} docs ({r['queries']} q) | <= 3x tantivy | lar "
                 f"{r['lar']['p50_ms']} ms, tantivy {r['tantivy']['p50_ms']} ms, bm25s {r['bm25s']['p50_ms']} ms; "
                 f"{x}x tantivy, {r['ratio_vs_bm25s']}x bm25s | {'yes' if x <= 3 else 'no'} | {r['load']} |")
    if "dense" in R and "lar" in R["dense"]:
        r = R["dense"]
        x = r["ratio_vs_numpy"]
        L.append(f"| dense exact, SciFact ({r['vectors']} vectors) | <= 5x numpy | lar {r['lar']['p50_ms']} ms, "
                 f"numpy (encode + q@M.T + top-k) {r['numpy']['p50_ms']} ms; {x}x | {'yes' if x <= 5 else 'no'} | "
                 f"{r['load']} |")
    if "grep" in R:
        r = R["grep"]
        x = r["ratio_vs_rg_json"]
        L.append(f"| grep vs rg --json, stdlib ({r['queries']} q) | <= 1.2x | lar {r['lar']['p50_ms']} ms, "
                 f"rg {r['rg_json']['p50_ms']} ms; {x}x | {'yes' if x <= 1.2 else 'no'} | {r['load']} |")
    if "deadline" in R:
        r = R["deadline"]
        a = r["all"]
        L.append(f"| deadline overshoot, {len(r['layers'])} layers, timeboxes "
                 f"{min(map(float, r['by_timebox']))}-{max(map(float, r['by_timebox']))} s | p99 <= 10 ms | "
                 f"p50 {a['p50_ms']} ms, p99 {a['p99_ms']} ms, max {a['max_ms']} ms | "
                 f"{'yes' if a['p99_ms'] <= 10 else 'no'} | {r['load']} |")
        L += ["", "overshoot by timebox (ms): " + "; ".join(
            f"{tb}s p50 {v['p50_ms']} p99 {v['p99_ms']} max {v['max_ms']}" for tb, v in r["by_timebox"].items())]
        if "coverage" in r:
            L += ["", "coverage of the deadline row's layers: " + ", ".join(
                f"{n} {c}" for n, c in sorted(r["coverage"].items()))]
        if any("after_layers_p99_ms" in v for v in r["by_timebox"].values()):
            L += ["", "where it went (ms; last layer's return minus the timebox / work after the last layer): "
                  + "; ".join(f"{tb}s p50 {v['last_layer_vs_deadline_p50_ms']}/{v['after_layers_p50_ms']} "
                              f"p99 {v['last_layer_vs_deadline_p99_ms']}/{v['after_layers_p99_ms']}"
                              for tb, v in r["by_timebox"].items())]
            L += ["", "layers that returned over 10 ms past the deadline (worst ms): " + "; ".join(
                f"{tb}s {v.get('layers_past_deadline_max_ms') or 'none'}" for tb, v in r["by_timebox"].items())]
    last_row = max(i for i, x in enumerate(L) if x.startswith("| "))
    L[last_row + 1:last_row + 1] = goal_rows.table_lines(R)
    for k in ("names", "bm25", "grep", "dense", "deadline"):
        if k in R and R[k].get("profile"):
            L += ["", f"profile of the {k} row:", "```", R[k]["profile"].strip(), "```"]
    return L


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="300 docs, 20 queries, 1 rep, fewer timeboxes")
    ap.add_argument("--docs", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default=",".join(ROWS))
    ap.add_argument("--state", default=None, help="keep the SciFact folder and state here (reused)")
    ap.add_argument("--build-docs", type=int, default=100, help="documents of the build row")
    ap.add_argument("--edits", type=int, default=5, help="edited files of the edit row")
    ap.add_argument("--cheap", action="store_true", help="deadline row without the encoder layers")
    ap.add_argument("--profile", default="", help="comma list of rows to profile")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.quick:
        a.docs, a.queries, a.reps = min(a.docs, 300), min(a.queries, 20), 1
        a.build_docs, a.edits = min(a.build_docs, 20), min(a.edits, 2)
    only = set(a.only.split(","))
    prof = set(a.profile.split(",")) - {""}
    R = {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"), "load_start": load_avg(),
         "args": " ".join(sys.argv[1:]), "nproc": os.cpu_count(), "rg": rg_path()}
    work = Path(tempfile.mkdtemp(prefix="lar-speed-"))
    try:
        if only & {"names", "grep"}:
            eng, corpus = stdlib_engine(work)
            qs = make_queries(corpus, 15, 15, SEED)
            if "names" in only:
                R["names"] = row_names(eng, qs, a.reps, "names" in prof)
                R["names"]["load"] = load_avg()
            if "grep" in only:
                R["grep"] = row_grep(eng, corpus, qs, a.reps, "grep" in prof)
                R["grep"]["load"] = load_avg()
            eng.close()
        if only & {"bm25", "dense", "late", "deadline", "anytime"}:
            sf = Path(a.state) if a.state else work
            docs, queries, root, qrels, doc_of = scifact(sf, a.docs, a.queries)
            eng = lar.open(root, state=sf / "state-sf")
            if "bm25" in only:
                R["bm25"] = row_bm25(eng, docs, queries, a.reps, "bm25" in prof)
                R["bm25"]["load"] = load_avg()
            if "dense" in only:
                R["dense"] = row_dense(eng, queries, a.reps, "dense" in prof)
                R["dense"]["load"] = load_avg()
            if "late" in only:
                R["late"] = goal_rows.row_late(eng, queries, a.reps, paired=paired, summarise=summarise,
                                               timed=timed)
                R["late"]["load"] = load_avg()
            if "deadline" in only:
                tbs = (0.05, 0.2, 1.0) if a.quick else TIMEBOXES
                dq = dict(list(queries.items())[: max(5, a.queries // 2)])
                R["deadline"] = row_deadline(eng, dq, tbs, a.cheap)
                R["deadline"]["load"] = load_avg()
            if "anytime" in only:
                if "deadline" not in only:
                    eng.build(timebox=3600)
                R["anytime"] = goal_rows.row_anytime(eng, queries, qrels, doc_of)
                R["anytime"]["load"] = load_avg()
            eng.close()
        if "edit" in only:
            R["edit"] = goal_rows.row_edit(a.edits)
            R["edit"]["load"] = load_avg()
        if "build" in only:
            R["build"] = goal_rows.row_build(a.build_docs)
            R["build"]["load"] = load_avg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = table(R)
    print("\n".join(lines))
    if a.out:
        out = Path(a.out)
        out.with_suffix(".json").write_text(json.dumps(R, indent=2) + "\n")
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
