"""Byte-span helpers for generators: first sentences, whitespace-tolerant matching of a text
back into the bytes it came from, and character-to-byte offset conversion."""
from __future__ import annotations

import re
from typing import Sequence

SENTENCE_BYTES = 300
_SENT_END = re.compile(rb"[.!?][\"')\]]*(?=\s|$)")
_ABBREV = frozenset(b"e.g i.e cf vs fig figs eq eqs al dr mr mrs sec resp approx ca vol pp"
                    .split())
_INITIALS = re.compile(rb"(?:[a-z]\.)+[a-z]")


def collapse(raw: bytes) -> str:
    """The bytes decoded (invalid bytes replaced) with whitespace runs as single spaces."""
    return " ".join(raw.decode("utf-8", errors="replace").split())


def trim(data: bytes, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` without leading and trailing whitespace (may become empty)."""
    while start < end and data[start:start + 1].isspace():
        start += 1
    while end > start and data[end - 1:end].isspace():
        end -= 1
    return start, end


def first_sentence(data: bytes, start: int, end: int, limit: int = SENTENCE_BYTES
                   ) -> tuple[int, int] | None:
    """The byte span of the first sentence of ``data[start:end]``: up to the first ``.``, ``!``
    or ``?`` followed by whitespace that does not end an abbreviation (``e.g.``, ``Fig.``,
    single letters), else the whole range; cut at a word boundary after ``limit`` bytes. None
    when the range holds only whitespace."""
    start, end = trim(data, start, end)
    if start >= end:
        return None
    stop = end
    for m in _SENT_END.finditer(data, start, end):
        word_start = max(data.rfind(b" ", start, m.start()), data.rfind(b"\n", start, m.start())) + 1
        word = data[max(word_start, start):m.start()].lower().lstrip(b"(\"'")
        if word in _ABBREV or (len(word) == 1 and word.isalpha()) or _INITIALS.fullmatch(word):
            continue
        stop = m.end()
        break
    if stop - start > limit:
        cut = data.rfind(b" ", start, start + limit)
        nl = data.rfind(b"\n", start, start + limit)
        cut = max(cut, nl)
        stop = cut if cut > start else start + limit
        while stop < end and (data[stop] & 0xC0) == 0x80:  # never cut inside a UTF-8 sequence
            stop += 1
    s, e = trim(data, start, stop)
    return (s, e) if e > s else None


def find_words(data: bytes, text: str, lo: int, hi: int, *, separators: bytes = rb"\s",
               last: bool = False) -> tuple[int, int] | None:
    """Where ``text`` occurs in ``data[lo:hi]`` with any run of ``separators`` (a regex
    character class body) between its words: the span from its first to its last word. The
    first occurrence, or the last one with ``last``. None when it does not occur."""
    words = text.split()
    if not words:
        return None
    sep = rb"[" + separators + rb"]+"
    rx = re.compile(sep.join(re.escape(w.encode("utf-8")) for w in words))
    found = None
    for m in rx.finditer(data, max(0, lo), min(len(data), hi)):
        found = (m.start(), m.end())
        if not last:
            break
    return found


def line_end(data: bytes, pos: int) -> int:
    """The offset of the end of the line holding ``pos`` (before its newline and any ``\\r``)."""
    nl = data.find(b"\n", pos)
    end = len(data) if nl < 0 else nl
    return end - 1 if end > pos and data[end - 1:end] == b"\r" else end


def char_to_byte(text: str, offsets: Sequence[int]) -> list[int]:
    """Byte offsets (UTF-8, surrogate escapes as the bytes they stand for) of character
    ``offsets`` into ``text``."""
    if text.isascii():
        return [min(max(0, o), len(text)) for o in offsets]
    out = []
    for o in offsets:
        o = min(max(0, o), len(text))
        out.append(len(text[:o].encode("utf-8", errors="surrogateescape")))
    return out


def for_reader(raw: bytes) -> tuple[str, str]:
    """``(exact, shown)``: the bytes decoded with surrogate escapes (offsets convert back to
    bytes exactly) and the same text with each escaped byte shown as U+FFFD (same length in
    characters), which is what a callable or a model is given."""
    exact = raw.decode("utf-8", errors="surrogateescape")
    if exact.isascii() or not any(0xDC80 <= ord(c) <= 0xDCFF for c in exact):
        return exact, exact
    return exact, "".join("\ufffd" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in exact)


def locate_quote(shown: str, quote: str, start: int = 0) -> tuple[int, int] | None:
    """Character span of ``quote`` in ``shown``: exactly, else with any whitespace between its
    words, else case-insensitively. None when it is not there."""
    q = quote.strip()
    if not q:
        return None
    i = shown.find(q, start)
    if i >= 0:
        return i, i + len(q)
    rx = re.compile(r"\s+".join(re.escape(w) for w in q.split()))
    m = rx.search(shown, start) or re.compile(rx.pattern, re.IGNORECASE).search(shown, start)
    return (m.start(), m.end()) if m else None
