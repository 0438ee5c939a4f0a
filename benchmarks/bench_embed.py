#!/usr/bin/env python3
"""Embedding layers on judged data: nDCG@10 / Recall@100 of static, dense and late (and late at
each size lever), build cost against raw sentence-transformers, and the shared-pass saving.

    .venv/bin/python benchmarks/bench_embed.py [--sets scifact-train,cosqa-dev]
        [--queries 300] [--out benchmarks/results/DATE-embed]

Per data set (BEIR layout under $LAR_BENCHMARKS, default /work/shared/benchmarks; one file per
document): one engine with the variants ``late-pool2`` (ward), ``late-pool3`` (ward),
``late-pca128``, ``late-int8`` and ``late-pca128-int8`` beside ``late``; every layer is built
completely, then queried alone through ``Engine.search`` (k=100, generous timebox), and hits are
mapped to document ids (best rank per document). Queries: a seeded sample of ``--queries``
(the same for every layer). Build throughput: lar's per-unit build (read, chunk, one encoder
pass for token + pooled vectors, sidecar + vector store) against ``SentenceTransformer.encode``
on exactly the same chunk texts, on a subset of documents.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bm25_common import evaluate, lat, load, materialise, paired_tests  # noqa: E402

VARIANTS = {
    "late-pool2": {"base": "late", "pool": 2, "pool_method": "ward"},
    "late-pool3": {"base": "late", "pool": 3, "pool_method": "ward"},
    "late-pca128": {"base": "late", "pca": 128},
    "late-int8": {"base": "late", "int8": True},
    "late-pca128-int8": {"base": "late", "pca": 128, "int8": True},
}
LAYERS = ["static", "dense", "late", *VARIANTS]


def layer_bytes(layer) -> dict:
    """Stored bytes of a late layer's sidecars per *document* token (the unpooled token count of
    the shared encodings), and how many token vectors it stores."""
    from lar.layers.kits.vectors.sidecar import open_sidecar

    ok = [h for h, st in layer.built().items() if st == "ok"]
    total, doc_tokens, stored = 0, 0, 0
    for h in ok:
        base = layer.shared.path(h)
        p = layer._derived_path(h) if layer.levers else base
        if p.exists() and base.exists():
            total += p.stat().st_size
            stored += open_sidecar(p).encoding.n_tokens
            doc_tokens += open_sidecar(base).encoding.n_tokens
    return {"bytes": total, "doc_tokens": doc_tokens, "stored_tokens": stored,
            "bytes_per_doc_token": round(total / max(doc_tokens, 1), 1)}


def run_queries(eng, name, queries, paths, k=100):
    run, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        res = eng.search(text, layers=[name], k=k, timebox=120)
        times.append(time.perf_counter() - t0)
        ranked: dict[str, float] = {}
        for i, h in enumerate(res.hits):
            did = paths.get(h.path)
            if did is not None and did not in ranked:
                ranked[did] = float(k - i)
        run[qid] = ranked
    return run, times


def build_cost(root: Path, paths: dict, n_docs: int, state: Path) -> dict:
    """lar's dense build (the shared pass) and late build (reuse) against raw ST encode."""
    import lar
    from lar.encoders.encoder import get_encoder
    from lar.layers.kits.vectors.shared import embedding_chunks

    sub = root.parent / (root.name + "-sub")
    sub.mkdir(exist_ok=True)
    for rel in sorted(paths)[:n_docs]:
        (sub / rel).write_bytes((root / rel).read_bytes())
    out = {"docs": n_docs}
    with lar.open(sub, state=state / "sub") as eng:
        enc = get_encoder(None)
        texts, tokens = [], 0
        for u in eng.scope_view().units():
            doc = eng.reader.document(u.hash, u.path)
            for s, e in embedding_chunks(doc, eng.layers["dense"].shared.target):
                texts.append(doc.text[s:e].decode("utf-8", errors="replace"))
        t0 = time.perf_counter()
        enc._model.encode(texts, batch_size=32)
        out["raw_st_encode_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        eng.build(timebox=10_000, layers=["dense"])
        out["lar_dense_build_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        eng.build(timebox=10_000, layers=["late"])
        out["lar_late_build_after_dense_s"] = round(time.perf_counter() - t0, 2)
        shared = eng.layers["dense"].shared
        out["encoder_passes"] = shared.encoded + eng.layers["late"].shared.encoded
        for u in eng.scope_view().units():
            e = shared.get(u.hash)
            tokens += e.n_tokens if e is not None else 0
        out["chunks"] = len(texts)
        out["tokens"] = tokens
        out["lar_tokens_per_s"] = round(tokens / out["lar_dense_build_s"], 1)
        out["overhead_vs_raw_encode"] = round(out["lar_dense_build_s"] / out["raw_st_encode_s"], 3)
        two_pass = 2 * out["lar_dense_build_s"]
        one_pass = out["lar_dense_build_s"] + out["lar_late_build_after_dense_s"]
        out["shared_pass_saving"] = round(1 - one_pass / two_pass, 3)
    return out


def one_set(name: str, n_queries: int, work: Path, seed: int = 7, n_docs: int = 0,
            build_docs: int = 300) -> dict:
    import lar

    corpus, queries, qrels, ext = load(name)
    rng = random.Random(seed)
    qids = sorted(queries)
    if n_queries and n_queries < len(qids):
        qids = sorted(rng.sample(qids, n_queries))
    queries = {q: queries[q] for q in qids}
    qrels = {q: qrels[q] for q in qids}
    if n_docs and n_docs < len(corpus):  # smoke runs: the judged documents plus a random rest
        judged = {d for r in qrels.values() for d in r}
        rest = [d for d in corpus if d["_id"] not in judged]
        corpus = [d for d in corpus if d["_id"] in judged] + rng.sample(rest, max(0, n_docs - len(judged)))
    root = work / name
    paths = materialise(corpus, ext, root)
    out: dict = {"dataset": name, "docs": len(corpus), "queries": len(queries), "layers": {}}
    out["build_cost"] = build_cost(root, paths, min(build_docs, len(paths)), work / f"{name}-state")
    cfg = {"layer_variants": VARIANTS, "late_cache_mb": 4096}
    runs = {}
    with lar.open(root, state=work / f"{name}-state" / "full", config=cfg) as eng:
        for layer in LAYERS:
            t0 = time.perf_counter()
            eng.build(timebox=100_000, layers=[layer])
            built = time.perf_counter() - t0
            st = eng.status().layer(layer)
            run, times = run_queries(eng, layer, queries, paths)
            runs[layer] = run
            res = {"build_s": round(built, 1), "coverage": st.coverage, **evaluate(qrels, run),
                   **lat(times)}
            if layer.startswith("late"):
                res.update(layer_bytes(eng.layers[layer]))
            out["layers"][layer] = res
            print(name, layer, res, flush=True)
    out["significance_vs_late"] = paired_tests(qrels, {"lar-late": runs["late"],
                                                      **{k: v for k, v in runs.items() if k != "late"}})
    return out


def render(results: list[dict], argv: list[str]) -> str:
    import platform

    lines = [f"# Embedding layers: quality, size and build cost ({date.today().isoformat()})", "",
             f"Command: `.venv/bin/python benchmarks/bench_embed.py {' '.join(argv)}`  ",
             f"Machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}; "
             "model: packaged all-MiniLM-L6-v2 (dense, late), Model2Vec distilled from it "
             "(static, PCA 256).", ""]
    for r in results:
        lines += [f"## {r['dataset']} ({r['docs']} documents, {r['queries']} sampled queries)", "",
                  "| layer | nDCG@10 | Recall@100 | bytes per doc token | stored tokens | build s | query mean ms | p95 ms |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, m in r["layers"].items():
            lines.append(f"| {name} | {m['ndcg@10']} | {m['recall@100']} | "
                         f"{m.get('bytes_per_doc_token', '')} | {m.get('stored_tokens', '')} | {m['build_s']} | {m['mean_ms']} | "
                         f"{m['p95_ms']} |")
        b = r.get("build_cost")
        if not b:
            lines += ["", "Build cost: not measured in this run.", ""]
            continue
        lines += ["", f"Build cost on the first {b['docs']} documents ({b['chunks']} chunks, "
                      f"{b['tokens']} tokens): raw `SentenceTransformer.encode` {b['raw_st_encode_s']} s; "
                      f"lar dense build (one pass: token + pooled vectors, sidecars, vector store) "
                      f"{b['lar_dense_build_s']} s (x{b['overhead_vs_raw_encode']} of raw, "
                      f"{b['lar_tokens_per_s']} tokens/s); late build after it "
                      f"{b['lar_late_build_after_dense_s']} s ({b['encoder_passes']} encoder passes for "
                      f"two layers): the shared pass saves {round(100 * b['shared_pass_saving'])}% "
                      "of a second pass." + (f" ({r['build_cost_note']})" if r.get("build_cost_note") else ""), ""]
        sig = r.get("significance_vs_late") or {}
        if sig:
            lines += ["Paired t-test of each layer against `late` (nDCG@10, ranx):", ""]
            for k, v in sig.items():
                lines.append(f"- {k}: {v}")
            lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="scifact-train,cosqa-dev")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--docs", type=int, default=0, help="subsample the corpus (smoke runs)")
    ap.add_argument("--build-docs", type=int, default=300)
    ap.add_argument("--out", default=f"benchmarks/results/{date.today().isoformat()}-embed")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="lar-bench-embed-") as tmp:
        for name in args.sets.split(","):
            results.append(one_set(name, args.queries, Path(tmp), n_docs=args.docs,
                                   build_docs=args.build_docs))
            Path(args.out + ".json").write_text(json.dumps(results, indent=1))
    Path(args.out + ".md").write_text(render(results, argv))
    print(render(results, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
