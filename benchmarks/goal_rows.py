"""The goal table's rows beyond the per-call ones (issue 26), for ``run_all.py``.

- ``late``: ``layers=["late"], k=100`` full exact scan, against the same-shape fp32 GEMM of the
  query's token matrix with every stored token (``Q @ X.T``, X already fp32 in RAM), per query
  in rotating order; the share of the GEMM rate is the median of GEMM time / lar time.
- ``anytime``: nDCG@10 (ranx) of the default search (every default layer built) at timeboxes
  0.1, 0.2, 0.5 s and an unlimited one (30 s), and of ``layers=["bm25"]`` alone at 0.1 and
  0.2 s, on the judged queries; each layer's coverage is written next to it.
- ``edit``: ``bench_lexical.py`` (edit one file -> every lexical layer reflects it), run as a
  child process, its one-call figure read back.
- ``build``: ``bench_build_speed.py`` (dense + late build against raw
  ``SentenceTransformer.encode``), run as a child process, its ratio read back.

Plain script module (not collected by pytest).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def coverage(eng, layers=None) -> dict[str, float]:
    """Each layer's coverage now (``eng.status()``), rounded."""
    return {s.name: round(float(s.coverage), 3) for s in eng.status().layers
            if layers is None or s.name in layers}


def row_late(eng, queries, reps, *, paired, summarise, timed) -> dict:
    t_build, _ = timed(eng.build, timebox=3600, layers=["late"])
    layer = eng.layers["late"]
    hashes = sorted(layer.searchable(eng.scope_view()))
    X = np.concatenate([np.asarray(layer.load(h).tokens, dtype=np.float32) for h in hashes])
    qs = list(queries.values())

    def lar_call(q):
        return eng.search(q, layers=["late"], k=100, timebox=60)

    def gemm(q):
        Q = layer.encode_query(q)[1]
        return (Q @ X.T).max(axis=0)

    for q in qs[:2]:
        lar_call(q)
        gemm(q)
    per = paired([("lar", lar_call), ("gemm", gemm)], qs, reps)
    out = summarise(per, "lar", ["gemm"])
    out["share_of_gemm_rate"] = round(float(np.median([g / x for g, x in zip(per["gemm"], per["lar"])])), 3)
    out.update(queries=len(qs), tokens=int(X.shape[0]), dim=int(X.shape[1]),
               lar_build_s=round(t_build, 1), coverage=coverage(eng, {"late"}))
    return out


def row_anytime(eng, queries, qrels, doc_of, timeboxes=(0.1, 0.2, 0.5, 30.0),
                bm25_timeboxes=(0.1, 0.2)) -> dict:
    """``doc_of``: {relative path: document id}."""
    from bm25_common import evaluate

    def run_of(**kw):
        run, walls = {}, []
        for qid, text in queries.items():
            t = time.perf_counter()
            res = eng.search(text, k=100, **kw)
            walls.append(time.perf_counter() - t)
            ranked: dict[str, float] = {}
            for i, h in enumerate(res.hits):
                for p in h.paths:
                    d = doc_of.get(p)
                    if d is not None and d not in ranked:
                        ranked[d] = float(len(res.hits) - i)
            run[qid] = ranked
        judged = {q: qrels[q] for q in queries}
        return {**evaluate(judged, run), "mean_wall_ms": round(1000 * float(np.mean(walls)), 1)}

    out = {"coverage": coverage(eng), "default": {}, "bm25": {}}
    for tb in timeboxes:
        out["default"][str(tb)] = run_of(timebox=tb)
    for tb in bm25_timeboxes:
        out["bm25"][str(tb)] = run_of(timebox=tb, layers=["bm25"])
    return out


def _child(script: str, args: list[str], out_json: Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, str(HERE / script), *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        return {"error": f"{script} exited {p.returncode}: {p.stderr.strip()[-600:]}"}
    got = json.loads(out_json.read_text())
    got["child_s"] = round(time.perf_counter() - t, 1)
    return got


def row_edit(edits: int = 5, timeout: float = 1800) -> dict:
    with tempfile.TemporaryDirectory(prefix="lar-edit-row-") as d:
        out = Path(d) / "lexical"
        got = _child("bench_lexical.py", ["--out", str(out), "--edits", str(edits)],
                     out.with_suffix(".json"), timeout)
    if "error" in got:
        return got
    one = got["edit_to_one_call_summary"]
    return {"ms_median": one["ms_median"], "ms_max": one["ms_max"],
            "all_layers_found": one["all_layers_found"],
            "per_layer_ms_median": got["edit_to_search_summary"]["per_layer_ms_median"],
            "child_s": got["child_s"]}


def row_build(docs: int = 100, reps: int = 2, timeout: float = 3600) -> dict:
    with tempfile.TemporaryDirectory(prefix="lar-build-row-") as d:
        out = Path(d) / "build.json"
        got = _child("bench_build_speed.py", ["--docs", str(docs), "--reps", str(reps),
                                              "--variants", "raw,lar", "--out", str(out)], out, timeout)
    if "error" in got:
        return got
    return {"docs": got.get("docs"), "chunks": got.get("chunks"), "windows": got.get("windows"),
            "median_s": got.get("median_s"), "ratio_lar_vs_raw": got.get("ratio_lar_vs_raw"),
            "child_s": got["child_s"]}


def table_lines(R) -> list[str]:
    """The markdown rows of these four (same columns as run_all's table)."""
    L = []
    if "late" in R and "lar" in R["late"]:
        r = R["late"]
        x = r["share_of_gemm_rate"]
        L.append(f"| late full exact scan, SciFact ({r['tokens']} tokens x {r['dim']}) | >= 60 % of the fp32 "
                 f"GEMM rate | lar {r['lar']['p50_ms']} ms, GEMM {r['gemm']['p50_ms']} ms; {100 * x:.0f} % | "
                 f"{'yes' if x >= 0.6 else 'no'} | {r['load']} |")
    if "anytime" in R:
        r = R["anytime"]
        d, b = r["default"], r["bm25"]
        full = d[max(d, key=float)]["ndcg@10"]
        at = d.get("0.5", {}).get("ndcg@10")
        if at is not None:
            L.append(f"| default at 0.5 s vs unlimited ({max(d, key=float)} s), nDCG@10 | within 1 point | "
                     f"{at} vs {full} ({100 * (at - full):+.1f}) | {'yes' if at >= full - 0.01 else 'no'} | "
                     f"{r['load']} |")
        cells = [(tb, d[tb]["ndcg@10"], b[tb]["ndcg@10"]) for tb in b if tb in d]
        if cells:
            ok = all(x >= y for _, x, y in cells)
            L.append("| default vs bm25 alone at 0.1-0.2 s, nDCG@10 | never below | " + "; ".join(
                f"{tb} s: {x} vs {y}" for tb, x, y in cells) + f" | {'yes' if ok else 'no'} | {r['load']} |")
    if "edit" in R:
        r = R["edit"]
        if "error" in r:
            L.append(f"| edit one file -> every lexical layer | < 0.2 s | failed: {r['error'][:120]} | ? | |")
        else:
            L.append(f"| edit one file -> every lexical layer reflects it (one call) | < 0.2 s | median "
                     f"{r['ms_median']} ms, max {r['ms_max']} ms, all found {r['all_layers_found']} | "
                     f"{'yes' if r['ms_median'] < 200 and r['all_layers_found'] else 'no'} | {r['load']} |")
    if "build" in R:
        r = R["build"]
        if "error" in r:
            L.append(f"| dense + late build / raw encode | <= 1.1x | failed: {r['error'][:120]} | ? | |")
        else:
            x = r["ratio_lar_vs_raw"]
            L.append(f"| dense + late build / raw SentenceTransformer.encode ({r['docs']} docs) | <= 1.1x | "
                     f"{x}x (medians {r['median_s']}) | {'yes' if x is not None and x <= 1.1 else 'no'} | "
                     f"{r['load']} |")
    return L
