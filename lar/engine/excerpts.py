"""Excerpts of a span's text, and the size of a hit as an agent reads it."""
from __future__ import annotations

import json
from typing import Sequence

from lar.core.types import Hit, Span
from lar.store.reader import decode_span

EXCERPT_CHARS = 240


def make_excerpt(data: bytes, span: Span, sub_spans: Sequence[tuple[int, int]] = ()) -> str:
    start, end = span.start, min(span.end, len(data))
    if end - start > EXCERPT_CHARS * 2 and sub_spans:
        s0 = max(start, sub_spans[0][0] - EXCERPT_CHARS // 3)
        start, end = s0, min(end, s0 + EXCERPT_CHARS * 2)
    text = decode_span(data, start, min(end, start + EXCERPT_CHARS * 4))
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def estimate_tokens(hit: Hit) -> int:
    """Tokens an agent reads for a hit's compact JSON (about 4 characters per token)."""
    return max(1, len(json.dumps(hit.to_compact(), ensure_ascii=False)) // 4)


def within_tokens(hits: list[Hit], budget: int) -> list[Hit]:
    """The longest prefix of ``hits`` whose compact form fits ``budget`` tokens (at least one)."""
    out, used = [], 0
    for h in hits:
        cost = estimate_tokens(h)
        if out and used + cost > budget:
            break
        out.append(h)
        used += cost
    return out
