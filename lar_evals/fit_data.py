"""One query's recorded route lists as the arrays the fusion fit works on, and the fit's
objective (mean nDCG@10), batched over many queries."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from lar.fusion.probe import probe_runs

from lar.fusion.scales import route_values
from lar.fusion.probe import EVIDENCE_CAP


@dataclass
class QueryData:
    """One query's evidence matrix (documents x routes) and probe features."""

    docs: list[str]
    ev: np.ndarray        # normalised scores; the route's floor where it did not list the document
    rrf: np.ndarray       # RRF contributions, the fallback when no route carries weight
    top: np.ndarray       # per route: top evidence / CAP
    agree: np.ndarray     # per route: agreement
    usable: np.ndarray    # per route: 1.0 when the route has a fit
    gains: np.ndarray     # relevance of each document
    idcg: float


def query_data(lists: Mapping[str, list], routes: Sequence[str], qrels: Mapping[str, int],
                norm: str = "evidence", backgrounds: Mapping[str, Any] | None = None) -> QueryData:
    runs = {r: _distinct(lists[r]) for r in routes if lists.get(r)}
    probes, fits = probe_runs(runs)
    values = route_values(runs, fits, norm, backgrounds)
    docs: dict[str, int] = {}
    for items in runs.values():
        for d, _ in items:
            docs.setdefault(d, len(docs))
    n, m = len(docs), len(routes)
    E, R = np.zeros((n, m)), np.zeros((n, m))
    top, agree, usable = np.zeros(m), np.zeros(m), np.zeros(m)
    for j, r in enumerate(routes):
        if r not in runs:
            continue
        seen = set()
        for rank, (d, _) in enumerate(runs[r], 1):
            if d not in seen:
                seen.add(d)
                R[docs[d], j] = 1.0 / (60.0 + rank)
        if r in values:
            vals, floor = values[r]
            E[:, j] = floor
            for d, e in vals.items():
                E[docs[d], j] = e
        p = probes[r]
        top[j], agree[j], usable[j] = min(p.top_evidence, EVIDENCE_CAP) / EVIDENCE_CAP, p.agreement, float(p.usable)
    gains = np.array([float(qrels.get(d, 0)) for d in docs])
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
    return QueryData(list(docs), E, R, top, agree, usable, gains, float(idcg))


def _distinct(items: Sequence) -> list:
    seen: set = set()
    out = []
    for d, s in items:
        if d not in seen:
            seen.add(d)
            out.append((d, s))
    return out


def _weights(q: QueryData, params: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, params[:, 0] + params[:, 1] * q.top + params[:, 2] * q.agree) * q.usable


def query_scores(q: QueryData, params: np.ndarray) -> np.ndarray:
    w = _weights(q, params)
    return q.ev @ w if w.any() else q.rrf.sum(axis=1)


def _ndcg10(q: QueryData, scores: np.ndarray) -> float:
    if q.idcg <= 0 or not len(scores):
        return 0.0
    order = np.argsort(-scores, kind="stable")[:10]
    g = q.gains[order]
    return float(((2 ** g - 1) / np.log2(np.arange(2, len(g) + 2))).sum() / q.idcg)


class QueryBatch:
    """Many queries' :class:`QueryData` padded into arrays, so the fit's objective is a few
    array operations instead of a loop over queries (the fit evaluates it thousands of times).

    nDCG@10 needs only the ranks of the relevant documents: a relevant document's rank is the
    number of documents scored above it plus the tied ones listed before it, which is exactly
    its position under the stable sort :func:`_ndcg10` uses."""

    def __init__(self, queries: Sequence[QueryData]) -> None:
        self.n = len(queries)
        m = queries[0].ev.shape[1] if queries else 0
        width = max((len(q.docs) for q in queries), default=0) or 1
        self.ev = np.zeros((self.n, width, m))
        self.rrf = np.zeros((self.n, width))
        self.pad = np.ones((self.n, width), dtype=bool)   # True where no document is
        self.top, self.agree, self.usable = np.zeros((self.n, m)), np.zeros((self.n, m)), np.zeros((self.n, m))
        rel_q, rel_d, rel_gain = [], [], []
        self.idcg = np.zeros(self.n)
        for i, q in enumerate(queries):
            d = len(q.docs)
            self.ev[i, :d], self.rrf[i, :d], self.pad[i, :d] = q.ev, q.rrf.sum(axis=1), False
            self.top[i], self.agree[i], self.usable[i], self.idcg[i] = q.top, q.agree, q.usable, q.idcg
            if q.idcg > 0:
                for j in np.flatnonzero(q.gains > 0):
                    rel_q.append(i), rel_d.append(j), rel_gain.append(q.gains[j])
        self.rel_q, self.rel_d = np.array(rel_q, dtype=int), np.array(rel_d, dtype=int)
        self.rel_gain = (2.0 ** np.array(rel_gain, dtype=float)) - 1.0
        self.before = np.arange(width)[None, :] < self.rel_d[:, None]   # listed before each relevant doc

    def ndcg(self, params: np.ndarray) -> np.ndarray:
        """Per query nDCG@10 of the fused ranking under ``params``."""
        w = np.maximum(0.0, params[:, 0] + params[:, 1] * self.top + params[:, 2] * self.agree) * self.usable
        scores = np.where(w.any(axis=1)[:, None], np.einsum("qdr,qr->qd", self.ev, w), self.rrf)
        scores[self.pad] = -np.inf
        out = np.zeros(self.n)
        if not len(self.rel_q):
            return out
        s = scores[self.rel_q]                       # the relevant document's query's scores
        mine = s[np.arange(len(self.rel_q)), self.rel_d][:, None]
        rank = ((s > mine) | ((s == mine) & self.before)).sum(axis=1)
        gain = np.where(rank < 10, self.rel_gain / np.log2(rank + 2.0), 0.0)
        np.add.at(out, self.rel_q, gain)
        return np.divide(out, self.idcg, out=np.zeros(self.n), where=self.idcg > 0)


def objective(queries: "Sequence[QueryData] | QueryBatch", params: np.ndarray) -> float:
    """Mean nDCG@10 of the fused rankings (pass a :class:`QueryBatch` when calling it often)."""
    batch = queries if isinstance(queries, QueryBatch) else QueryBatch(list(queries))
    return float(batch.ndcg(params).mean()) if batch.n else 0.0


__all__ = ["QueryBatch", "QueryData", "objective"]
