"""Shared parts of the bm25 benchmark: BEIR data, scoring with ranx, and the two peers
(bm25s called directly, tantivy). Imported by ``bench_bm25.py``; not a benchmark itself."""
from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

BENCH = Path(os.environ.get("LAR_BENCHMARKS", "/work/shared/benchmarks"))
SETS = {"scifact-train": (".txt", "train"), "cosqa-dev": (".py", "dev")}
K1, B, METHOD = 1.5, 0.75, "lucene"


# -- data and scoring --------------------------------------------------------------------------
def load(name: str):
    ext, split = SETS[name]
    d = BENCH / name
    corpus = [json.loads(line) for line in open(d / "corpus.jsonl", encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(d / "queries.jsonl", encoding="utf-8"))}
    qrels: dict[str, dict[str, int]] = {}
    with open(d / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, {})[did] = int(score)
    queries = {q: t for q, t in queries.items() if q in qrels}
    return corpus, queries, qrels, ext


def materialise(corpus, ext: str, root: Path) -> dict[str, str]:
    """One file per doc; returns {relative path: doc id}."""
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for i, doc in enumerate(corpus):
        rel = f"d{i:06d}{ext}"
        (root / rel).write_text(f"{doc.get('title', '')}\n\n{doc['text']}", encoding="utf-8")
        paths[rel] = doc["_id"]
    return paths


def evaluate(qrels, run) -> dict[str, float]:
    from ranx import Qrels, Run
    from ranx import evaluate as rx_eval

    run = {q: (r if r else {"__none__": 0.0}) for q, r in run.items()}
    for q in qrels:
        run.setdefault(q, {"__none__": 0.0})
    res = rx_eval(Qrels.from_dict(qrels), Run.from_dict(run), ["ndcg@10", "recall@100"])
    return {"ndcg@10": round(float(res["ndcg@10"]), 4), "recall@100": round(float(res["recall@100"]), 4)}


def lat(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"mean_ms": round(1000 * statistics.fmean(xs), 2),
            "p95_ms": round(1000 * xs[int(0.95 * (len(xs) - 1))], 2)}


def paired_tests(qrels, runs: dict[str, dict]) -> dict[str, dict]:
    """Two-sided paired t-tests (ranx ``compare``) of each lar setting against each peer."""
    from ranx import Qrels, Run, compare

    def mk(name, run):
        run = {q: (r if r else {"__none__": 0.0}) for q, r in run.items()}
        for q in qrels:
            run.setdefault(q, {"__none__": 0.0})
        return Run.from_dict(run, name=name)

    peers = [k for k in runs if not k.startswith("lar")]
    out: dict[str, dict] = {}
    for label, run in runs.items():
        if not label.startswith("lar"):
            continue
        rep = compare(Qrels.from_dict(qrels), [mk(label, run)] + [mk(p, runs[p]) for p in peers],
                      ["ndcg@10"], stat_test="student", max_p=0.05).to_dict()
        out[label] = {p: {"delta_ndcg@10": round(rep[label]["scores"]["ndcg@10"]
                                                 - rep[p]["scores"]["ndcg@10"], 4),
                          "p_value": round(float(rep[label]["comparisons"][p]["ndcg@10"]), 4)}
                      for p in peers}
    return out



# -- peers ---------------------------------------------------------------------------------
def bm25s_peer(corpus, queries, qrels) -> dict:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    ids = [d["_id"] for d in corpus]
    texts = [f"{d.get('title', '')}\n\n{d['text']}" for d in corpus]
    t0 = time.perf_counter()
    toks = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    model = bm25s.BM25(k1=K1, b=B, method=METHOD)
    model.index(toks, show_progress=False)
    build_s = time.perf_counter() - t0
    run, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        qt = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False,
                            return_ids=False)
        docs, scores = model.retrieve(qt, k=100, show_progress=False)
        times.append(time.perf_counter() - t0)
        run[qid] = {ids[int(i)]: float(s) for i, s in zip(docs[0], scores[0]) if s > 0}
    return {"build_s": round(build_s, 2), **evaluate(qrels, run), **lat(times), "_run": run}


def tantivy_peer(corpus, queries, qrels) -> dict:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    schema = sb.build()
    t0 = time.perf_counter()
    index = tantivy.Index(schema)
    writer = index.writer()
    for d in corpus:
        writer.add_document(tantivy.Document(id=d["_id"], body=f"{d.get('title', '')}\n\n{d['text']}"))
    writer.commit()
    index.reload()
    build_s = time.perf_counter() - t0
    searcher = index.searcher()
    run, times = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        clean = " ".join(re.findall(r"\w+", text))  # no query syntax: words only, OR-ed
        ranked = {}
        if clean:
            q = index.parse_query(clean, ["body"])
            for score, addr in searcher.search(q, 100).hits:
                ranked[searcher.doc(addr)["id"][0]] = float(score)
        times.append(time.perf_counter() - t0)
        run[qid] = ranked
    return {"build_s": round(build_s, 2), **evaluate(qrels, run), **lat(times), "_run": run}
