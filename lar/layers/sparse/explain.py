"""Why a chunk matched a sparse query: its matching terms, their weights and contributions.

A hit's score is ``sum over shared terms t of q_t * d_t``. ``term_matches`` lists every shared
term with the query's weight, the chunk's weight and their product (the contributions sum to the
score), best first, and marks *expansion* terms: a term the model added that is not one of the
query's own tokens (``query_expansion``) or not one of the chunk's own tokens
(``doc_expansion``) -- e.g. the query "child diabetes" matching a chunk on *children* through
the expansion term ``children``. ``token_spans`` gives the byte spans of the chunk's own tokens
that carry a matching term (the hit's sub-spans).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from lar.layers.sparse.vectors import SparseVec

__all__ = ["TermMatch", "term_matches", "token_spans"]


@dataclass(frozen=True)
class TermMatch:
    term: str
    term_id: int
    query_weight: float
    doc_weight: float
    contribution: float  # query_weight * doc_weight; the contributions sum to the hit's score
    query_expansion: bool  # not one of the query's own tokens
    doc_expansion: bool  # not one of the chunk's own tokens

    def to_dict(self) -> dict:
        return {"term": self.term, "id": self.term_id, "query_weight": round(self.query_weight, 6),
                "doc_weight": round(self.doc_weight, 6), "contribution": round(self.contribution, 6),
                "query_expansion": self.query_expansion, "doc_expansion": self.doc_expansion}


def term_matches(q: SparseVec, d: SparseVec, query_tokens: Iterable[int], doc_tokens: Iterable[int],
                 names: Callable[[Sequence[int]], list[str]]) -> list[TermMatch]:
    """Every term both vectors weigh, by contribution (highest first, then by id)."""
    common, qi, di = np.intersect1d(q.ids, d.ids, assume_unique=True, return_indices=True)
    if not common.size:
        return []
    qw = q.weights[qi].astype(np.float64)
    dw = d.weights[di].astype(np.float64)
    contrib = qw * dw
    q_exp = ~np.isin(common, np.fromiter(query_tokens, dtype=np.int64))
    d_exp = ~np.isin(common, np.fromiter(doc_tokens, dtype=np.int64))
    order = np.lexsort((common, -contrib))  # by contribution, then by id
    labels = names(common[order].tolist())
    return [TermMatch(labels[n], int(common[j]), float(qw[j]), float(dw[j]), float(contrib[j]),
                      bool(q_exp[j]), bool(d_exp[j])) for n, j in enumerate(order)]


def token_spans(token_ids: np.ndarray, byte_spans: np.ndarray, wanted: Iterable[int],
                cap: int = 20) -> list[tuple[int, int]]:
    """Byte spans (in order, at most ``cap``) of the tokens whose id is in ``wanted``; adjacent
    or overlapping spans are joined (the word pieces of one word make one span)."""
    want = np.fromiter((int(t) for t in wanted), dtype=np.int64)
    if not want.size or not len(token_ids):
        return []
    rows = np.flatnonzero(np.isin(token_ids, want))
    out: list[tuple[int, int]] = []
    for r in rows:
        s, e = int(byte_spans[r, 0]), int(byte_spans[r, 1])
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif len(out) >= cap:
            break
        else:
            out.append((s, e))
    return out
