"""``fuzzy``: rapidfuzz rescoring of candidate spans from earlier layers (role: refine).

Tolerant of typos and word order: each candidate's text (its lines) is scored with
``partial_ratio`` (best-aligned substring) and ``token_set_ratio``; the alignment gives the
sub-span that matched. Candidates below ``min_score`` (default 60 of 100) are dropped.
"""
from __future__ import annotations

import asyncio
from typing import Any

from lar.core.errors import QueryError
from lar.core.layer import BaseLayer, Budget, Candidate, ScopeView
from lar.store.reader import expand_to_lines
from lar.core.types import Hit

MAX_CHARS = 4000


def same_length_fold(text: str) -> str:
    """Lower-case, and every non-alphanumeric character a space, one character for one (rapidfuzz's
    ``default_process`` also strips the ends, which would shift the match offsets)."""
    out = []
    for c in text:
        low = c.lower()
        c = low if len(low) == 1 else c
        out.append(c if c.isalnum() else " ")
    return "".join(out)


def parse_query(query: Any) -> tuple[str, float]:
    if isinstance(query, str) and query.strip():
        return query.strip(), 60.0
    if isinstance(query, dict) and isinstance(query.get("text"), str) and query["text"].strip():
        extra = set(query) - {"text", "min_score"}
        if extra:
            raise QueryError("fuzzy", f"unknown keys {sorted(extra)}; use 'text' and 'min_score'")
        ms = query.get("min_score", 60.0)
        if not isinstance(ms, (int, float)) or not 0 <= ms <= 100:
            raise QueryError("fuzzy", f"min_score must be a number in [0, 100], got {ms!r}")
        return query["text"].strip(), float(ms)
    raise QueryError("fuzzy", f"give text or {{'text': ..., 'min_score': 60}}; got {query!r}")


class FuzzyLayer(BaseLayer):
    name = "fuzzy"
    version = "1"
    roles = frozenset({"refine"})
    origin = "text"
    granularity = "line (the candidate's lines)"
    query_format = "free text, typos tolerated; {'text': ..., 'min_score': 0-100}"
    cost = "no index; rescoring of the candidate pool only"
    cost_rank = 60

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        text, min_score = parse_query(query)
        if not candidates:
            budget.set_coverage(1.0)
            return []
        return await asyncio.to_thread(self._score, text, min_score, list(candidates), scope, budget)

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def _score(self, text, min_score, candidates: list[Candidate], scope: ScopeView, budget: Budget):
        from rapidfuzz import fuzz, utils

        scored = []
        done = 0
        query_folded = same_length_fold(text).strip()
        for cand in candidates:
            if budget.expired():
                break
            done += 1
            try:
                data = self.ctx.reader.read(cand.span.hash)
            except Exception:  # unit vanished since the candidate was found: skip it
                continue
            s, e = expand_to_lines(data, cand.span.start, min(cand.span.end, len(data)))
            # surrogateescape keeps a 1:1 map between characters and undecodable bytes
            chunk = data[s:e][: MAX_CHARS * 4].decode("utf-8", errors="surrogateescape")[:MAX_CHARS]
            if not chunk.strip():
                continue
            folded = same_length_fold(chunk)
            pr = fuzz.partial_ratio_alignment(query_folded, folded)
            ts = fuzz.token_set_ratio(text, chunk, processor=utils.default_process)
            score = max(pr.score if pr else 0.0, ts)
            if score < min_score:
                continue
            sub = ()
            if pr is not None and pr.dest_end > pr.dest_start:
                # same_length_fold keeps every character in place, so offsets map back to the chunk
                bs = s + len(chunk[: pr.dest_start].encode("utf-8", errors="surrogateescape"))
                be = s + len(chunk[: pr.dest_end].encode("utf-8", errors="surrogateescape"))
                sub = ((bs, be),)
            scored.append((score, cand, sub))
        budget.set_coverage(done / len(candidates))
        if done < len(candidates):
            budget.mark_partial()
        scored.sort(key=lambda t: (-t[0], t[1].span.hash, t[1].span.start))
        hits = []
        for rank, (score, cand, sub) in enumerate(scored[: budget.pool], start=1):
            hits.append(Hit.single(self.name, cand.span, rank=rank, score=score,
                                   score_kind="rapidfuzz max(partial_ratio, token_set_ratio) 0-100",
                                   query={"text": text, "min_score": min_score}, sub_spans=sub))
        return hits
