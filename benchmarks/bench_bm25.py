#!/usr/bin/env python
"""bm25 layer benchmark: quality and latency against bm25s and tantivy, segment IDF, update cost.

Plain script (not collected by pytest; shared parts in ``bm25_common.py``)::

    .venv/bin/python benchmarks/bench_bm25.py [--out benchmarks/results/DATE-bm25] [--quick]
        [--sets scifact-train,cosqa-dev] [--variants "lar auto-v1;lar auto-v1, k1=1.2"]
        [--only studies]

Data: ``/work/shared/benchmarks/{scifact-train,cosqa-dev}`` (BEIR layout), read at run time.
Each corpus is written to a temp folder, one file per doc (``title\\n\\ntext``; cosqa as ``.py``,
scifact as ``.txt``). Sections:

1. lar: for each tokenizer setting (and chunk-size variant), open an engine on the folder, build
   the bm25 layer (timed), run every judged query with ``eng.search(q, layers=["bm25"], k=100,
   timebox=10)``; hits map back to doc ids (best chunk per doc); nDCG@10 and Recall@100 (ranx).
2. peers on the same texts: bm25s (same k1, b, method; its default tokenizer, English stopwords,
   PyStemmer English stemmer) and tantivy (``en_stem`` tokenizer on title+text).
3. segment-local IDF on scifact: single segment vs main + one delta with 10% of the docs, and
   vs 100 one-doc deltas (the "just edited" case), each with segment-local and global IDF.
4. update cost on scifact: edit one file and time until a search returns it (delta segment);
   time a full merge and a delta compaction.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import logging
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
_TMP_HOME = tempfile.mkdtemp(prefix="lar-bench-home-")
for _var in ("XDG_CACHE_HOME", "IR_DATASETS_HOME", "NUMBA_CACHE_DIR", "MPLCONFIGDIR"):
    os.environ.setdefault(_var, os.path.join(_TMP_HOME, _var.lower()))

import lar  # noqa: E402
from lar.core.layer import Budget  # noqa: E402
from lar.layers.bm25 import BM25Layer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bm25_common import (K1, METHOD, SETS, B, bm25s_peer, evaluate, lat, load,  # noqa: E402
                         materialise, paired_tests, tantivy_peer)

SEED = 20261129
LAYER_TIMING_QUERIES = 200  # layer-only latency is measured on the first 200 judged queries


# -- lar -------------------------------------------------------------------------------------
def lar_run(eng, queries, paths, k=100) -> tuple[dict, list[float]]:
    run, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        res = eng.search(text, layers=["bm25"], k=k, timebox=10)
        times.append(time.perf_counter() - t0)
        ranked: dict[str, float] = {}
        for h in res.hits:
            did = paths.get(h.path or "")
            if did is not None and did not in ranked:  # best chunk per doc
                ranked[did] = float(k - len(ranked))
        run[qid] = ranked
    return run, times


def layer_run(eng, queries, paths, k=100) -> dict:
    """Like ``lar_run`` but through the bm25 layer alone (no engine overhead): for the studies."""
    layer = eng.layers["bm25"]
    by_hash = {r.hash: paths.get(r.path) for r in eng.index.live()}
    run = {}
    for qid, text in queries.items():
        hits = asyncio.run(layer.search(text, eng.scope_view(), Budget.seconds(30, pool=k)))
        ranked: dict[str, float] = {}
        for h in hits:
            did = by_hash.get(h.hash)
            if did is not None and did not in ranked:
                ranked[did] = float(k - len(ranked))
        run[qid] = ranked
    return run


def lar_setting(root, paths, queries, qrels, cfg: dict, state: Path) -> dict:
    eng = lar.open(root, state=state, config=cfg)
    try:
        t0 = time.perf_counter()
        rep = eng.build(timebox=3600, layers=["bm25"])
        build_s = time.perf_counter() - t0
        layer = eng.layers["bm25"]
        run, times = lar_run(eng, queries, paths)
        layer_times = []
        for text in list(queries.values())[:LAYER_TIMING_QUERIES]:  # the layer alone (pool 500)
            t0 = time.perf_counter()
            asyncio.run(layer.search(text, eng.scope_view(), Budget.seconds(10, pool=500)))
            layer_times.append(time.perf_counter() - t0)
        st = layer.status(eng.scope_view())
        lt = lat(layer_times)
        return {"_run": run, "config": cfg, "build_s": round(build_s, 2), "units": st.units,
                "segments": layer.index.describe(), "build_report": rep["layers"]["bm25"],
                **evaluate(qrels, run), **lat(times),
                "layer_mean_ms": lt["mean_ms"], "layer_p95_ms": lt["p95_ms"]}
    finally:
        eng.close()


# -- segments: IDF and update cost -------------------------------------------------------------
def idf_study(root, paths, queries, qrels, cfg, state: Path) -> dict:
    """nDCG@10 of one segment vs main + delta(s), with segment-local and global IDF."""
    out = {}
    base = {**cfg, "bm25_max_deltas": 10 ** 6, "bm25_delta_fraction": 1e9, "bm25_dead_fraction": 1e9,
            "bm25_idf": "segment"}
    rng = random.Random(SEED)
    eng = lar.open(root, state=state, config=base)
    eng.build(timebox=3600, layers=["bm25"])
    layer = eng.layers["bm25"]
    ok = sorted(layer.ok_hashes())
    layer.merge()
    out["single segment"] = evaluate(qrels, layer_run(eng, queries, paths))
    tenth = set(rng.sample(ok, len(ok) // 10))
    layer.index.merge(set(ok) - tenth)
    layer.index.add(tenth)
    out["main 90% + 1 delta 10%, segment idf"] = evaluate(qrels, layer_run(eng, queries, paths))
    eng.close()
    eng = lar.open(root, state=state, config={**base, "bm25_idf": "global"})
    out["main 90% + 1 delta 10%, global idf"] = evaluate(qrels, layer_run(eng, queries, paths))
    # the "just edited" case: 100 judged docs, each alone in a one-doc delta
    by_id = {v: k for k, v in paths.items()}
    judged = sorted({d for q in qrels.values() for d in q})
    picked = set(rng.sample(judged, min(100, len(judged))))
    hashes = {eng.index.get_many([by_id[d]])[by_id[d]].hash for d in picked}
    sub_q = {q: t for q, t in queries.items() if set(qrels[q]) & picked}
    sub_rel = {q: qrels[q] for q in sub_q}
    layer = eng.layers["bm25"]
    layer.merge()
    out["edited-docs queries, single segment"] = evaluate(sub_rel, layer_run(eng, sub_q, paths))
    layer.index.merge(set(ok) - hashes)
    for h in sorted(hashes):
        layer.index.add({h})
    out["edited-docs queries, 100 one-doc deltas, global idf"] = evaluate(
        sub_rel, layer_run(eng, sub_q, paths))
    eng.close()
    eng = lar.open(root, state=state, config=base)
    out["edited-docs queries, 100 one-doc deltas, segment idf"] = evaluate(
        sub_rel, layer_run(eng, sub_q, paths))
    out["edited-docs queries"] = len(sub_q)
    eng.close()
    return out


def update_cost(root, paths, cfg, state: Path, n: int = 5) -> dict:
    eng = lar.open(root, state=state, config=cfg)
    eng.build(timebox=3600, layers=["bm25"])
    layer = eng.layers["bm25"]
    layer.merge()
    rng = random.Random(SEED)
    edits = []
    for i, rel in enumerate(rng.sample(sorted(paths), n)):
        word = f"zqxedit{i}marker"
        p = root / rel
        p.write_text(p.read_text(encoding="utf-8") + f"\n{word} appended\n", encoding="utf-8")
        t0 = time.perf_counter()
        res = eng.search(word, layers=["bm25"], k=10, timebox=10)
        total = time.perf_counter() - t0
        found = bool(res.hits) and res.hits[0].path == rel
        edits.append({"search_after_edit_s": total, "found": found,
                      "delta_build_s": layer.index.timings.get("last_add_s")})
        t0 = time.perf_counter()
        eng.search(word, layers=["bm25"], k=10, timebox=10)
        edits[-1]["next_search_s"] = time.perf_counter() - t0
    layer.index.wait()
    compact_s = layer.index.timings.get("last_compact_s")
    t0 = time.perf_counter()
    layer.merge()
    merge_s = time.perf_counter() - t0
    unit = next(iter(eng.index.live()))
    t0 = time.perf_counter()
    layer.index_unit(lar.Unit(unit.path, unit.hash, unit.size), eng.reader.document(unit.hash, unit.path))
    one_unit_s = time.perf_counter() - t0
    eng.close()

    def med(key):
        vals = [e[key] for e in edits if e[key] is not None]
        return round(statistics.median(vals), 4) if vals else None

    return {"edits": n, "found_all": all(e["found"] for e in edits),
            "edit_to_search_s_median": med("search_after_edit_s"),
            "delta_build_s_median": med("delta_build_s"),
            "next_search_s_median": med("next_search_s"),
            "index_one_unit_s": round(one_unit_s, 4), "full_merge_s": round(merge_s, 3),
            "delta_compaction_s": round(compact_s, 4) if compact_s is not None else None,
            "chunks": layer.index.segments()[0].n_docs if layer.index.segments() else 0}


# -- report ----------------------------------------------------------------------------------
def render_md(res: dict) -> str:
    lines = [f"# lar bm25 layer benchmark — {res['date']}", "", res["machine"], ""]
    for ds, block in res["datasets"].items():
        lines += [f"## {ds} ({block['docs']} docs, {block['queries']} judged queries)", "",
                  "| system | nDCG@10 | Recall@100 | mean ms | p95 ms | layer mean ms | layer p95 ms "
                  "| build s |", "|---|---|---|---|---|---|---|---|"]
        for name, r in block["systems"].items():
            lines.append(f"| {name} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} | "
                         f"{r['mean_ms']} | {r['p95_ms']} | {r.get('layer_mean_ms', '')} | "
                         f"{r.get('layer_p95_ms', '')} | {r['build_s']} |")
        lines.append("")
        if not block.get("paired_tests"):
            continue
        lines += ["Paired two-sided t-test on per-query nDCG@10 (ranx), lar setting vs peer: "
                  "Δ (p-value)", "", "| lar setting | " + " | ".join(
                      next(iter(block["paired_tests"].values()), {}).keys()) + " |",
                  "|---|" + "---|" * len(next(iter(block["paired_tests"].values()), {}))]
        for label, cmp in block["paired_tests"].items():
            lines.append(f"| {label} | " + " | ".join(
                f"{c['delta_ndcg@10']:+.4f} ({c['p_value']})" for c in cmp.values()) + " |")
        lines.append("")
    if res.get("idf"):
        lines += ["## Segment-local IDF (scifact, bm25 layer alone, auto-v1)", "",
                  "| layout | nDCG@10 | Recall@100 |", "|---|---|---|"]
        for k, v in res["idf"].items():
            if isinstance(v, dict):
                lines.append(f"| {k} | {v['ndcg@10']:.4f} | {v['recall@100']:.4f} |")
        lines.append("")
    if res.get("update"):
        lines += ["## Update cost (scifact)", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in res["update"].items()]
        lines.append("")
    lines += res.get("notes", [])
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=f"benchmarks/results/{_dt.date(2026, 11, 29).isoformat()}-bm25")
    ap.add_argument("--quick", action="store_true", help="100 queries per set, fewer variants")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--variants", default="",
                    help="';'-separated lar variant labels to run (default: all)")
    ap.add_argument("--only", choices=["all", "studies"], default="all",
                    help="'studies': only the segment-IDF study and the update cost (scifact)")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    lar.register_layer(BM25Layer)
    variants = {
        "lar auto-v1": {"bm25_tokenizer": "auto-v1"},
        "lar code-v1": {"bm25_tokenizer": "code-v1"},
        "lar prose-v1": {"bm25_tokenizer": "prose-v1"},
        "lar plain-v1": {"bm25_tokenizer": "plain-v1"},
        "lar plain-v1, no stem": {"bm25_tokenizer": "plain-v1", "bm25_stem": False},
        "lar auto-v1, k1=1.2": {"bm25_tokenizer": "auto-v1", "bm25_k1": 1.2},
        "lar auto-v1, chunks 400 B": {"bm25_tokenizer": "auto-v1", "bm25_chunk_bytes": 400,
                                      "bm25_code_chunk_bytes": 400},
        "lar auto-v1, chunks 4000 B": {"bm25_tokenizer": "auto-v1", "bm25_chunk_bytes": 4000,
                                       "bm25_code_chunk_bytes": 4000},
    }
    if args.variants:
        keep = [v.strip() for v in args.variants.split(";")]
        unknown = [v for v in keep if v not in variants]
        if unknown:
            ap.error(f"unknown variants {unknown}; choose from {list(variants)}")
        variants = {k: v for k, v in variants.items() if k in keep}
    if args.quick:
        variants = dict(list(variants.items())[:2])
    res: dict = {"date": "2026-11-29", "datasets": {}, "notes": [],
                 "machine": f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()} "
                            f"({platform.platform()}); k1={K1}, b={B}, method={METHOD}."}
    t_all = time.perf_counter()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every step, so a killed run keeps what it measured
        res["total_s"] = round(time.perf_counter() - t_all, 1)
        clean = json.loads(json.dumps(res, default=lambda o: None))
        for block in clean["datasets"].values():
            for r in block["systems"].values():
                r.pop("_run", None)
        out.with_suffix(".json").write_text(json.dumps(clean, indent=1))
        out.with_suffix(".md").write_text(render_md(clean))

    with tempfile.TemporaryDirectory(prefix="lar-bench-bm25-") as tmp:
        tmp = Path(tmp)
        for name in args.sets.split(","):
            corpus, queries, qrels, ext = load(name)
            if args.quick:
                queries = dict(list(queries.items())[:100])
                qrels = {q: qrels[q] for q in queries}
            root = tmp / name / "corpus"
            paths = materialise(corpus, ext, root)
            if args.only == "studies":
                if name == "scifact-train":
                    res["update"] = update_cost(root, paths, {"bm25_tokenizer": "auto-v1"},
                                                tmp / name / "state-update")
                    save()
                    res["idf"] = idf_study(root, paths, queries, qrels,
                                           {"bm25_tokenizer": "auto-v1"}, tmp / name / "state-idf")
                    save()
                continue
            systems = {"bm25s (default tokenizer + stemmer)": bm25s_peer(corpus, queries, qrels),
                       "tantivy (en_stem)": tantivy_peer(corpus, queries, qrels)}
            block = res["datasets"][name] = {"docs": len(corpus), "queries": len(queries),
                                             "systems": systems, "paired_tests": {}}
            for label, cfg in variants.items():
                systems[label] = lar_setting(root, paths, queries, qrels, cfg,
                                             tmp / name / f"state-{len(systems)}")
                print(name, label, {k: systems[label][k] for k in ("ndcg@10", "recall@100", "mean_ms", "build_s")},
                      flush=True)
                save()
            block["paired_tests"] = paired_tests(qrels, {k: v["_run"] for k, v in systems.items()})
            save()
            if name == "scifact-train" and not args.quick:
                res["update"] = update_cost(root, paths, {"bm25_tokenizer": "auto-v1"},
                                            tmp / name / "state-update")
                save()
                res["idf"] = idf_study(root, paths, queries, qrels, {"bm25_tokenizer": "auto-v1"},
                                       tmp / name / "state-idf")
                save()
    save()
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
