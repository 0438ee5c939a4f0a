"""Token-level explanations of a late-interaction hit and span localisation.

For a chunk that scored ``sum_i w_i * max_t q_i . d_t``, each query token's contribution, the
document token it matched (row, byte span, text) and its similarity are reported. Localisation
trims the chunk to the shortest run of sentences (lines, for code and lists) that carries at
least ``LOCALISE_MASS`` of the positive contribution: the hit's span becomes that run, and the
matched tokens are the hit's sub-spans.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

__all__ = ["TokenMatch", "token_matches", "token_dicts", "sentence_spans", "localise",
           "localise_weights", "LOCALISE_MASS"]

LOCALISE_MASS = 0.6
_SENTENCE_END = re.compile(rb"[.!?][\)\]\"']*\s+(?=\S)|\n")


@dataclass(frozen=True)
class TokenMatch:
    query_token: str
    weight: float
    contribution: float  # weight * similarity; the contributions sum to the hit's score
    similarity: float
    doc_row: int  # row of the matched token within the unit's sidecar
    start: int  # byte span of the matched document token in the unit text
    end: int
    doc_token: str

    def to_dict(self) -> dict:
        return {"q": self.query_token, "w": round(self.weight, 4),
                "contrib": round(self.contribution, 5), "sim": round(self.similarity, 5),
                "match": self.doc_token, "span": [self.start, self.end]}


def token_matches(query_tokens, weights, contrib, argmax, sim_max, row0: int,
                  token_spans, text: bytes) -> list[TokenMatch]:
    """Pair each query token with the document token it matched (``argmax`` is relative to the
    chunk's first row ``row0``)."""
    out = []
    for i, qt in enumerate(query_tokens):
        row = row0 + int(argmax[i])
        s, e = (int(x) for x in token_spans[row])
        piece = text[s:e].decode("utf-8", errors="replace")
        out.append(TokenMatch(str(qt), float(weights[i]), float(contrib[i]), float(sim_max[i]),
                              row, s, e, piece))
    return out


def token_dicts(query_tokens, weights, contrib, sim_max, rows, token_spans, text: bytes,
                s: int, e: int) -> tuple[list[dict], list[tuple[int, int]]]:
    """``[m.to_dict() for m in matches]`` and the hit's sub-spans (the positively contributing
    matched tokens inside ``[s, e)``, sorted, distinct) for the matches that
    :func:`token_matches` gives, from arrays (``rows``: the matched rows of the unit)."""
    spans = token_spans[rows].tolist()
    ws, cs_, ss = weights.tolist(), contrib.tolist(), sim_max.tolist()
    toks, subs = [], set()
    for i, qt in enumerate(query_tokens):
        a, b = spans[i]
        c = cs_[i]
        toks.append({"q": qt, "w": round(ws[i], 4), "contrib": round(c, 5), "sim": round(ss[i], 5),
                     "match": text[a:b].decode("utf-8", errors="replace"), "span": [a, b]})
        if c > 0 and s <= a and b <= e and b > a:
            subs.add((a, b))
    return toks, sorted(subs)


def sentence_spans(text: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Sentences (or lines) of ``text[start:end]`` as byte spans that tile the range."""
    cuts = [start]
    for m in _SENTENCE_END.finditer(text, start, end):
        if start < m.end() < end:
            cuts.append(m.end())
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def _strip(text: bytes, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s:s + 1].isspace():
        s += 1
    while e > s and text[e - 1:e].isspace():
        e -= 1
    return s, e


def localise(text: bytes, chunk: tuple[int, int], matches: list[TokenMatch],
             mass: float = LOCALISE_MASS) -> tuple[int, int]:
    """The shortest run of sentences of ``chunk`` holding ``mass`` of the positive contribution
    (ties: fewer bytes); the whole chunk when nothing positive matched."""
    starts = np.array([m.start for m in matches], dtype=np.int64)
    contrib = np.array([m.contribution for m in matches], dtype=np.float64)
    return localise_weights(text, chunk, starts, contrib, mass)


def localise_weights(text: bytes, chunk: tuple[int, int], starts, contrib,
                     mass: float = LOCALISE_MASS, sents=None) -> tuple[int, int]:
    """:func:`localise` from arrays: each matched token's byte ``starts`` and ``contrib``
    (weight x similarity), in query-token order (``sents``: the chunk's
    :func:`sentence_spans`, when the caller has them)."""
    cs, ce = chunk
    if sents is None:
        sents = sentence_spans(text, cs, ce)
    if len(sents) <= 1:
        return _strip(text, cs, ce) if ce > cs else (cs, ce)
    # plain Python on these few numbers (a chunk's sentences, the query's tokens): the same
    # additions, in the same order, as the array form (one sum left to numpy, which pairs its terms)
    sent_starts = [a for a, _ in sents]
    weight = [0.0] * len(sents)
    for st, c in zip(np.asarray(starts).tolist(), np.asarray(contrib, dtype=np.float64).tolist()):
        if c > 0:
            weight[max(bisect_right(sent_starts, st) - 1, 0)] += c
    total = float(np.array(weight).sum())
    if total <= 0:
        return _strip(text, cs, ce)
    need = mass * total - 1e-12
    prefix = [0.0, *accumulate(weight)]
    best = None
    j = 0
    n = len(sents)
    for i in range(n):  # two pointers: for each start, the first end reaching ``need``
        j = max(j, i)
        while j < n and prefix[j + 1] - prefix[i] < need:
            j += 1
        if j == n:
            break
        key = (j - i, sents[j][1] - sents[i][0])
        if best is None or key < best[0]:
            best = (key, i, j)
    if best is None:
        return _strip(text, cs, ce)
    s, e = _strip(text, sents[best[1]][0], sents[best[2]][1])
    return (s, e) if e > s else (cs, ce)
