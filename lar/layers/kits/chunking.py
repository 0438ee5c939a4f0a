"""Chunking shared by building layers: byte spans of a Document's text that respect structure.

Chunks end at paragraph breaks (blank lines) or line ends, aim at ``target`` bytes, and never
split an atomic block (formula, theorem, proof, algorithm environments; notebook cells): such a
block is kept whole even when it is larger than ``target``. Section starts begin new chunks.
Bump ``CHUNKER_VERSION`` whenever the output for the same input changes.
"""
from __future__ import annotations

import bisect

from lar.store.extract import Document

CHUNKER_VERSION = "1"


def _breaks(text: bytes) -> list[int]:
    """Candidate cut points: after each newline (paragraph breaks preferred by the caller)."""
    out, i = [], text.find(b"\n")
    while i >= 0:
        out.append(i + 1)
        i = text.find(b"\n", i + 1)
    return out


def chunk(doc: Document, target: int = 1200, hard_max: int = 8000) -> list[tuple[int, int]]:
    text = doc.text
    n = len(text)
    if n == 0:
        return []
    # atomic ranges merged into disjoint sorted intervals; lookups by bisection (linear overall)
    merged: list[list[int]] = []
    for s, e in sorted((b.start, b.end) for b in doc.blocks if b.atomic and b.end > b.start):
        if merged and s < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = [m[0] for m in merged]
    section_starts = {b.start for b in doc.blocks if b.kind in ("section", "heading", "page", "cell")}

    def inside_atomic(pos: int) -> bool:
        i = bisect.bisect_left(starts, pos) - 1
        return i >= 0 and merged[i][0] < pos < merged[i][1]

    cuts = [p for p in _breaks(text) if p < n]
    chunks: list[tuple[int, int]] = []
    start = 0
    last_para = None
    last_line = None
    for p in cuts:
        if inside_atomic(p):
            continue
        is_para = p >= 2 and text[p - 2:p] == b"\n\n" or (p < n and text[p:p + 1] == b"\n")
        if p in section_starts and p > start:
            chunks.append((start, p))
            start, last_para, last_line = p, None, None
            continue
        if is_para:
            last_para = p
        last_line = p
        size = p - start
        if size >= target:
            cut = last_para if last_para and last_para - start >= target // 3 else p
            if size >= hard_max or cut == p or last_para:
                chunks.append((start, cut))
                start, last_para, last_line = cut, None, None
    if start < n:
        chunks.append((start, n))
    # trim pure-whitespace chunks
    return [(s, e) for s, e in chunks if text[s:e].strip()]


def split_atomic_count(doc: Document, chunks: list[tuple[int, int]]) -> int:
    """How many atomic blocks a chunking splits (the benchmark's goal is 0)."""
    chunks = sorted(chunks)
    cstarts = [s for s, _ in chunks]
    bad = 0
    for b in doc.blocks:
        if not b.atomic:
            continue
        i = bisect.bisect_right(cstarts, b.start) - 1
        if i < 0 or not (chunks[i][0] <= b.start and b.end <= chunks[i][1]):
            bad += 1
    return bad
