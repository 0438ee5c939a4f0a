"""Lexical verification of generated queries against their targets.

Tokens are lar's own BM25 terms (``lar.layers.kits.lexical.tokenize``, the code tokenizer with English
stopwords dropped and Snowball stemming): identifiers are split at ``_`` and case changes and
also kept whole, so ``parseDuration`` in a query meets ``parse_duration`` in a target. Two
measures per query:

* ``jaccard``: |Q ∩ T| / |Q ∪ T| over the term *sets* of query and target;
* ``rare_leak``: the fraction of the target's rare terms (document frequency <= ``RARE_DF`` in
  the corpus) that the query contains (0 when the target has none);
* ``idf_leak``: the share of the query's IDF mass that the target holds, over all the query's
  content terms (stopwords out, stemmed; each distinct term once, weighted by lar's BM25 IDF,
  ``lucene`` formula, over the corpus): ``sum(idf(t) for t in Q & T) / sum(idf(t) for t in Q)``
  (0 for a query without content terms). It catches queries that repeat their answer's
  *common* content words, which the rare-term check lets through and BM25 still matches.

A paraphrase query is rejected when it leaks any rare term, its ``idf_leak`` exceeds the set's
threshold (``MAX_IDF_LEAK`` unless the caller gives another; recorded in the report's
``thresholds``) or its Jaccard exceeds ``MAX_PARAPHRASE_JACCARD``; a rare-term query is rejected
when it lacks its term. Every
rejection is counted by reason, and both measures are summarised (quantiles and a 10-bin
histogram over [0, 1]) for the written queries and for everything the generator produced.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

from lar.layers.kits.lexical.corpus_stats import idf as bm25_idf
from lar.layers.kits.lexical.tokenize import Tokenizer

from lar_evals.generators.common import WORD, Doc, contains_word, word_key

RARE_DF = 2
MAX_PARAPHRASE_JACCARD = 0.5
# chosen by measurement: benchmarks/results/2026-12-03-harness-2.md (lexical routes' nDCG@10
# per idf_leak bin on the stdlib and papers sets, and the share of pair queries kept)
MAX_IDF_LEAK = 0.5
HIST_BINS = 10

_TOKENIZER: Tokenizer | None = None


def tokenizer() -> Tokenizer:
    """The shared tokenizer (``code-v1`` with stemming; needs ``lar[lexical]``)."""
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = Tokenizer("code-v1", stem=True)
    return _TOKENIZER


def terms(text: str) -> set[str]:
    """The term set of ``text`` (code tokenizer, stopwords dropped, stemmed)."""
    return set(tokenizer().code(text, stop=True))


def term_of(word: str) -> str | None:
    """The term of a single word (lower-cased, stemmed), or None for a stopword."""
    return tokenizer().norm(word.lower())


class CorpusStats:
    """Document frequencies over a corpus: of terms (``term_df``) and of whole words and
    identifiers (``word_df``, keyed by ``word_key``), plus for every rare word the documents
    holding it."""

    def __init__(self, docs: Sequence[Doc]):
        self.n_docs = len(docs)
        self.term_df: dict[str, int] = {}
        self.word_df: dict[str, int] = {}
        word_docs: dict[str, list[str]] = {}
        for doc in docs:
            for t in terms(doc.text):
                self.term_df[t] = self.term_df.get(t, 0) + 1
            for w in {word_key(m) for m in WORD.findall(doc.text)}:
                n = self.word_df.get(w, 0) + 1
                self.word_df[w] = n
                if n <= RARE_DF:
                    word_docs.setdefault(w, []).append(doc.id)
                else:
                    word_docs.pop(w, None)
        self._word_docs = word_docs

    def docs_with_word(self, word: str) -> list[str]:
        """Ids of the documents holding the rare ``word`` (empty when it is not rare)."""
        return sorted(self._word_docs.get(word_key(word), ()))

    def is_rare_word(self, word: str) -> bool:
        """Whether ``word`` is in at most ``RARE_DF`` documents both as a whole word
        (``word_key``) and as a term (its whole term: ``parse_url`` -> ``parseurl``)."""
        if not 0 < self.word_df.get(word_key(word), 0) <= RARE_DF:
            return False
        whole = tokenizer().code_word(word, stop=True)
        return bool(whole) and self.term_df.get(whole[0], 0) <= RARE_DF

    def rare_terms(self, term_set: Iterable[str]) -> set[str]:
        """The members of ``term_set`` with document frequency <= ``RARE_DF``."""
        return {t for t in term_set if self.term_df.get(t, 0) <= RARE_DF}

    def idf(self, term: str) -> float:
        return math.log((1 + self.n_docs) / (1 + self.term_df.get(term, 0))) + 1.0

    def bm25_idf(self, term: str) -> float:
        """lar's BM25 IDF of ``term`` (the ``lucene`` formula) over this corpus."""
        return bm25_idf("lucene", self.term_df.get(term, 0), self.n_docs)


def idf_leak(query_terms: set[str], target_terms: set[str], stats: CorpusStats) -> float:
    """The share of the IDF mass of ``query_terms`` found in ``target_terms``."""
    mass = {t: stats.bm25_idf(t) for t in query_terms}
    total = sum(mass.values())
    return sum(w for t, w in mass.items() if t in target_terms) / total if total > 0 else 0.0


def overlap(query: str, target: str, stats: CorpusStats) -> dict[str, float]:
    """``{"jaccard", "rare_leak", "idf_leak", "n_rare"}`` of ``query`` against ``target``."""
    q, t = terms(query), terms(target)
    union = q | t
    rare = stats.rare_terms(t)
    return {"jaccard": len(q & t) / len(union) if union else 0.0,
            "rare_leak": len(rare & q) / len(rare) if rare else 0.0,
            "idf_leak": idf_leak(q, t, stats),
            "n_rare": float(len(rare))}


def rejection(kind: str, query: str, ov: dict[str, float], term: str = "",
              max_idf_leak: float = MAX_IDF_LEAK) -> str | None:
    """Why a query of ``kind`` is rejected, or None: a rare-term or mixed query must hold its
    term; any other (paraphrase) query must leak no rare term, hold at most ``max_idf_leak`` of
    its IDF mass in the target and stay under the Jaccard cap."""
    if kind in ("rare-term", "mixed"):
        return None if term and contains_word(query, term) else "missing-term"
    if ov["rare_leak"] > 0:
        return "rare-token-leak"
    if ov["idf_leak"] > max_idf_leak:
        return "idf-leak"
    if ov["jaccard"] > MAX_PARAPHRASE_JACCARD:
        return "high-jaccard"
    return None


def _quantile(sorted_vals: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) of sorted values."""
    pos = (len(sorted_vals) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def distribution(values: Sequence[float], bins: int = HIST_BINS) -> dict:
    """Quantiles (min, p25, median, p75, max), mean and a ``bins``-bin histogram over [0, 1]
    (the last bin includes 1.0) of ``values``; numbers rounded to 4 decimals."""
    vals = sorted(float(v) for v in values)
    edges = [round(i / bins, 4) for i in range(bins + 1)]
    counts = [0] * bins
    for v in vals:
        counts[min(bins - 1, max(0, int(v * bins)))] += 1
    out: dict = {"n": len(vals)}
    if vals:
        for name, q in (("min", 0.0), ("p25", 0.25), ("median", 0.5), ("p75", 0.75),
                        ("max", 1.0)):
            out[name] = round(_quantile(vals, q), 4)
        out["mean"] = round(sum(vals) / len(vals), 4)
    else:
        out.update({k: None for k in ("min", "p25", "median", "p75", "max", "mean")})
    out["histogram"] = {"edges": edges, "counts": counts}
    return out
