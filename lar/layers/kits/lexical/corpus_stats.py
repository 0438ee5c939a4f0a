"""BM25 with corpus-wide statistics over segments: the scores a clean build would give.

A bm25s segment stores ``idf * tfc`` per (term, doc), computed with *its own* doc count,
document frequencies and average doc length. Over a main segment plus deltas, and with
tombstoned docs still inside the segments until a merge, those differ from a clean build's, so
results depended on the index's edit history. Each segment therefore also keeps the raw term
frequency of every stored entry (``tf``, aligned with bm25s's score matrix) and every doc's
length (``doclen``); a search recomputes the query terms' columns with the statistics of the
*live* docs of all segments together: their number, each term's document frequency and their
average length, using the BM25 formulas bm25s uses (Kamphuis et al., ECIR 2020). Docs of units
no longer live count nowhere, so the result equals a single segment built from the live units.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

# bm25s's default delta for BM25L and BM25+
DELTA = 0.5


def idf(method: str, df: float, n: float) -> float:
    """bm25s's IDF formula for ``method`` (``df`` docs of ``n`` hold the term)."""
    if df <= 0 or n <= 0:
        return 0.0
    if method == "robertson":
        return math.log(max((n - df + 0.5) / (df + 0.5), 1.0))  # bm25s clamps it at 0
    if method == "atire":
        return math.log(n / df)
    if method == "bm25l":
        return math.log((n + 1) / (df + 0.5))
    if method == "bm25+":
        return math.log((n + 1) / df)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def tfc(method: str, tf: np.ndarray, dl: np.ndarray, avgdl: float, k1: float, b: float) -> np.ndarray:
    """bm25s's term-frequency component for ``method``, less its non-occurrence part (as bm25s
    stores it for BM25L and BM25+)."""
    norm = (1 - b) + b * dl / avgdl
    if method == "atire":
        return tf * (k1 + 1) / (tf + k1 * norm)
    if method == "bm25l":
        c = tf / norm
        zero = (k1 + 1) * DELTA / (k1 + DELTA)
        return (k1 + 1) * (c + DELTA) / (k1 + c + DELTA) - zero
    if method == "bm25+":
        return (k1 + 1) * tf / (k1 * norm + tf)
    return tf / (k1 * norm + tf)  # robertson, lucene


def term_frequencies(model: Any, corpus: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """``(tf, doclen)`` for a bm25s model indexed from ``corpus``: the count of each stored
    (term, doc) entry of ``model.scores``, in its order, and each doc's number of tokens."""
    vocab, sc = model.vocab_dict, model.scores
    indptr = np.asarray(sc["indptr"], dtype=np.int64)
    n = len(corpus)
    keys, counts = [], []
    for d, terms in enumerate(corpus):
        for t, c in Counter(terms).items():
            keys.append(int(vocab[t]) * n + d)
            counts.append(c)
    mine = np.asarray(keys, dtype=np.int64)
    order = np.argsort(mine, kind="stable")
    mine, tf_sorted = mine[order], np.asarray(counts, dtype=np.int32)[order]
    cols = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    theirs = cols * n + np.asarray(sc["indices"], dtype=np.int64)
    at = np.searchsorted(mine, theirs)
    if len(theirs) != len(mine) or (at >= len(mine)).any() or (mine[np.minimum(at, len(mine) - 1)] != theirs).any():
        raise ValueError("bm25s's score matrix does not match the corpus's terms")
    doclen = np.fromiter((len(t) for t in corpus), dtype=np.int32, count=n)
    return tf_sorted[at], doclen


@dataclass(frozen=True)
class CorpusStats:
    """The live docs of a set of segments: per segment a 0/1 mask over its docs (a unit held
    by two segments counts once), their number and their average length."""

    alive: tuple[np.ndarray, ...]
    n_docs: int
    avgdl: float

    def df(self, segments: Sequence[Any], term: str) -> int:
        """Live docs holding ``term`` over every segment."""
        total = 0
        for seg, alive in zip(segments, self.alive):
            cols = seg.term_docs(term)
            if cols is not None:
                total += int(alive[cols].sum())
        return total


def corpus_stats(segments: Sequence[Any], live: set[str] | frozenset[str]) -> CorpusStats:
    """Statistics of the docs of ``live`` units in ``segments`` (main first)."""
    seen: set[str] = set()
    masks, n, length = [], 0, 0
    for seg in segments:
        unit_alive = np.fromiter((h in live and h not in seen for h in seg.units), dtype=bool,
                                 count=len(seg.units))
        seen.update(seg.units)
        alive = unit_alive[seg.docs[:, 0]] if seg.n_docs else np.zeros(0, dtype=bool)
        masks.append(alive)
        n += int(alive.sum())
        if seg.n_docs and seg.doclen is not None:
            length += int(np.asarray(seg.doclen)[alive].sum())
    return CorpusStats(tuple(masks), n, length / n if n else 1.0)


def live_scores(seg: Any, terms: Sequence[str], idfs: dict[str, float], avgdl: float, k1: float,
                b: float, method: str) -> np.ndarray:
    """Every doc of ``seg`` scored for ``terms`` with the corpus-wide ``idfs`` and ``avgdl``."""
    sc = seg.model.scores
    out = np.zeros(seg.n_docs, dtype=np.float32)
    for t in terms:
        w = idfs.get(t, 0.0)
        tid = seg.model.vocab_dict.get(t)
        if not w or tid is None or tid >= len(sc["indptr"]) - 1:
            continue
        a, e = int(sc["indptr"][tid]), int(sc["indptr"][tid + 1])
        docs = np.asarray(sc["indices"][a:e])
        tf = np.asarray(seg.tf[a:e], dtype=np.float64)
        dl = np.asarray(seg.doclen, dtype=np.float64)[docs]
        out[docs] += (w * tfc(method, tf, dl, avgdl, k1, b)).astype(np.float32)
    return out


def query_idfs(segments: Sequence[Any], terms: Sequence[str], stats: CorpusStats, method: str
               ) -> dict[str, float]:
    return {t: idf(method, stats.df(segments, t), stats.n_docs) for t in dict.fromkeys(terms)}


__all__ = ["CorpusStats", "DELTA", "corpus_stats", "idf", "live_scores", "query_idfs", "term_frequencies", "tfc"]
