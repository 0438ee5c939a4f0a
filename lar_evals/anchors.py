"""Published anchors beside lar's routes: the BM25 implementations a researcher compares with,
run on the same split, the same queries and the same documents (``title\\n\\ntext``, what the
harness writes for lar), scored with the same ranx metrics.

* ``bm25s``: ``bm25s.BM25`` (method ``lucene``, ``k1`` 0.9, ``b`` 0.4: Anserini's BEIR
  settings) over ``bm25s.tokenize`` with English stopwords and the PyStemmer English stemmer.
* ``tantivy``: a tantivy index (the ``en_stem`` tokenizer; tantivy's fixed BM25, k1 1.2, b 0.75),
  the query's words OR-ed.
* ``pyserini``: Anserini's Lucene BM25 (k1 0.9, b 0.4) through pyserini, when it and a Java
  runtime are installed; otherwise it is listed as skipped with the reason.

:func:`run_anchors` returns ``{name: {"metrics", "per_query", "build_s", "query_ms",
"settings"} | {"skipped": reason}}``; ``beir --anchors bm25s,tantivy`` puts them in the summary
(``anchors``) and the report shows them in the scores table, kind ``anchor``.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable, Mapping, Sequence

from lar_evals.errors import EvalConfigError

ANCHORS = ("bm25s", "tantivy", "pyserini")
K1, B = 0.9, 0.4
_WORD = re.compile(r"\w+")

__all__ = ["ANCHORS", "check_anchors", "run_anchors"]


def check_anchors(names: Sequence[str] | str) -> list[str]:
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    bad = [n for n in names if n not in ANCHORS]
    if bad:
        raise EvalConfigError(f"unknown anchor {', '.join(bad)}; choose from {', '.join(ANCHORS)}")
    return list(dict.fromkeys(names))


def _bm25s(ids: list[str], texts: list[str]):
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)

    def search(text: str, k: int) -> list[tuple[str, float]]:
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = retriever.retrieve(tokens, k=min(k, len(ids)), show_progress=False)
        return [(ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]

    return search, {"method": "lucene", "k1": K1, "b": B, "stopwords": "en",
                    "stemmer": "PyStemmer english", "version": bm25s.__version__}


def _tantivy(ids: list[str], texts: list[str]):
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
    index = tantivy.Index(sb.build())
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    for i, t in zip(ids, texts):
        writer.add_document(tantivy.Document(id=i, body=t))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(text: str, k: int) -> list[tuple[str, float]]:
        words = _WORD.findall(text.lower())
        if not words:
            return []
        query = index.parse_query(" ".join(words), ["body"])  # words only: no query syntax
        return [(searcher.doc(addr)["id"][0], float(score))
                for score, addr in searcher.search(query, k).hits]

    return search, {"tokenizer": "en_stem", "k1": 1.2, "b": 0.75, "query": "words OR-ed",
                    "version": getattr(tantivy, "__version__", None)}


def _pyserini(ids: list[str], texts: list[str]):
    raise ImportError("pyserini needs a Java runtime and an on-disk Lucene index; not wired here")


_BUILDERS: dict[str, Callable] = {"bm25s": _bm25s, "tantivy": _tantivy, "pyserini": _pyserini}
_MODULES = {"bm25s": "bm25s", "tantivy": "tantivy", "pyserini": "pyserini"}


def run_anchors(corpus: Mapping[str, Mapping[str, str]], queries: Mapping[str, str],
                qrels: Mapping[str, Mapping[str, int]], names: Sequence[str], metrics: Sequence[str],
                k: int = 100) -> dict[str, Any]:
    """Index ``corpus`` (``{doc: {"title", "text"}}``) with each anchor, search every query of
    ``queries`` (``{qid: text}``) for ``k`` documents and score them against ``qrels``."""
    import importlib.util

    from lar_evals.metrics import evaluate, latency, rounded

    names = check_anchors(names)
    ids = list(corpus)
    texts = [f"{corpus[d].get('title', '')}\n\n{corpus[d].get('text', '')}" for d in ids]
    out: dict[str, Any] = {}
    for name in names:
        if importlib.util.find_spec(_MODULES[name]) is None:
            out[name] = {"skipped": f"{_MODULES[name]} is not installed"}
            continue
        t0 = time.perf_counter()
        try:
            search, settings = _BUILDERS[name](ids, texts)
        except ImportError as exc:
            out[name] = {"skipped": str(exc)}
            continue
        build_s = time.perf_counter() - t0
        rankings, scores, times = {}, {}, []
        for qid, text in queries.items():
            t0 = time.perf_counter()
            got = search(text, k)
            times.append(time.perf_counter() - t0)
            rankings[qid] = [d for d, _ in got]
            scores[qid] = dict(got)
        means, per_q = evaluate(qrels, rankings, metrics, name=name)
        out[name] = {"metrics": rounded(means), "per_query": per_q, "rankings": rankings,
                     "scores": scores, "build_s": round(build_s, 3),
                     "query_ms": latency(times),
                     "settings": settings}
    return out
