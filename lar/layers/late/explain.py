"""Token-level explanations of a late-interaction hit and span localisation.

For a chunk that scored ``sum_i w_i * max_t q_i . d_t``, each query token's contribution, the
document token it matched (row, byte span, text) and its similarity are reported. Localisation
trims the chunk to the shortest run of sentences (lines, for code and lists) that carries at
least ``LOCALISE_MASS`` of the positive contribution: the hit's span becomes that run, and the
matched tokens are the hit's sub-spans.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["TokenMatch", "token_matches", "sentence_spans", "localise", "LOCALISE_MASS"]

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
    cs, ce = chunk
    sents = sentence_spans(text, cs, ce)
    if len(sents) <= 1:
        return _strip(text, cs, ce) if ce > cs else (cs, ce)
    starts = np.array([s for s, _ in sents])
    weight = np.zeros(len(sents))
    for m in matches:
        if m.contribution > 0:
            j = int(np.searchsorted(starts, m.start, side="right")) - 1
            weight[max(j, 0)] += m.contribution
    total = weight.sum()
    if total <= 0:
        return _strip(text, cs, ce)
    need = mass * total - 1e-12
    prefix = np.concatenate([[0.0], np.cumsum(weight)])
    best = None
    j = 0
    for i in range(len(sents)):  # two pointers: for each start, the first end reaching ``need``
        j = max(j, i)
        while j < len(sents) and prefix[j + 1] - prefix[i] < need:
            j += 1
        if j == len(sents):
            break
        key = (j - i, sents[j][1] - sents[i][0])
        if best is None or key < best[0]:
            best = (key, i, j)
    if best is None:
        return _strip(text, cs, ce)
    s, e = _strip(text, sents[best[1]][0], sents[best[2]][1])
    return (s, e) if e > s else (cs, ce)
