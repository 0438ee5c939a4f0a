"""Shared pieces of the test-set generators: the corpus document, a candidate query target,
the error type, word helpers and span helpers.

Offsets inside the generators are *character* offsets into ``Doc.text``; ``Doc.byte_offset``
turns them into byte offsets into ``Doc.text.encode("utf-8")`` (what ``corpus.jsonl`` holds,
and the file's own bytes whenever the file is valid UTF-8) when a query is written.
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lar.layers.kits.lexical.tokenize import STOPWORDS_EN

from lar_evals.errors import EvalDataError


class GenerateError(EvalDataError):
    """Test-set generation cannot go on: bad arguments, an unreadable corpus, a generator
    callable that cannot be imported or returns something other than a string or None."""


# identifiers and words: a letter or underscore first, then word characters (Unicode aware)
WORD = re.compile(r"[^\W\d]\w*")
ALPHA = re.compile(r"[^\W\d_]+")
_HEX = re.compile(r"(?:0x)?[0-9a-f]+", re.I)
# words that say nothing about a definition (syntax of the formats we read)
SYNTAX_WORDS: frozenset[str] = frozenset(
    {k.lower() for k in keyword.kwlist}
    | {"self", "cls", "none", "true", "false", "print", "begin", "label", "newcommand",
       "renewcommand", "providecommand", "emph", "textbf", "textit", "section", "subsection",
       "function", "return", "const", "static", "void", "struct", "public", "private"})


def is_term_word(word: str, min_len: int = 5) -> bool:
    """Whether ``word`` can be a rare-term query: at least ``min_len`` characters, some letter,
    not a number or hex string, not mostly digits, not a stopword or syntax keyword."""
    if len(word) < min_len or not any(c.isalpha() for c in word):
        return False
    low = word.lower()
    if low in STOPWORDS_EN or low in SYNTAX_WORDS or low.strip("_") in SYNTAX_WORDS:
        return False
    if _HEX.fullmatch(low) and any(c.isdigit() for c in low):
        return False
    if sum(c.isdigit() for c in word) * 2 > len(word):
        return False
    return len(low.strip("_")) >= min_len


def word_key(word: str) -> str:
    """How a word is counted in document frequencies: lower-cased, outer ``_`` stripped
    (``_qsize`` and ``qsize`` are one word to a tokenizer)."""
    return word.lower().strip("_")


def contains_word(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` as a whole word (case-insensitive)."""
    return re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", text, re.I) is not None


@dataclass
class Doc:
    """One corpus document: ``id`` is the relative POSIX path, ``text`` the decoded file."""

    id: str
    text: str
    _data: bytes | None = field(default=None, repr=False)
    _byte_starts: Any = field(default=None, repr=False)

    @property
    def data(self) -> bytes:
        """The UTF-8 bytes of ``text`` (byte offsets of answers point into these)."""
        if self._data is None:
            self._data = self.text.encode("utf-8")
        return self._data

    def _starts(self):
        """Byte offset of every character (and of the end), computed once for non-ASCII text."""
        if self._byte_starts is None:
            cps = np.frombuffer(self.text.encode("utf-32-le"), dtype=np.uint32)
            sizes = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
            self._byte_starts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        return self._byte_starts

    def byte_offset(self, char: int) -> int:
        """Byte offset of character offset ``char``."""
        if self.text.isascii():
            return char
        return int(self._starts()[char])

    def char_offset(self, byte: int) -> int:
        """Character offset of byte offset ``byte`` (a byte inside a character rounds down)."""
        if self.text.isascii():
            return byte
        return int(np.searchsorted(self._starts(), byte, side="right")) - 1


@dataclass
class Target:
    """A place a query is generated for: the answer span ``[start, end)`` (characters) in
    ``doc``, what the query is made from (``source``: kind, text, name), and for rare-term
    targets the ``term`` itself."""

    doc: Doc
    start: int
    end: int
    kind: str
    source_text: str = ""
    name: str = ""
    term: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    aux: Any = field(default=None, repr=False)  # generator-private material, never written
    # character ranges of ``doc`` the written corpus blanks out (the query's own source text)
    redact: tuple[tuple[int, int], ...] = ()

    @property
    def text(self) -> str:
        """The answer span as the written corpus holds it (redacted ranges blanked)."""
        text = self.doc.text[self.start:self.end]
        for a, b in self.redact:
            lo, hi = max(a, self.start) - self.start, min(b, self.end) - self.start
            if lo < hi:
                text = text[:lo] + blank(text[lo:hi]) + text[hi:]
        return text

    def source(self, limit: int = 300) -> dict[str, Any]:
        """The ``metadata.source`` record of a query made for this target."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.name:
            out["name"] = self.name
        if self.source_text:
            text = " ".join(self.source_text.split())
            out["text"] = text if len(text) <= limit else text[: limit - 1] + "…"
        out.update(self.extra)
        return out


def blank(text: str) -> str:
    """``text`` with every character but line breaks replaced by spaces, one per UTF-8 byte,
    so byte offsets after it stay where they were."""
    return "".join(c if c in "\r\n" else " " * len(c.encode("utf-8")) for c in text)


def line_bounds(text: str, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the line holding character ``pos`` (end excludes the newline)."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    if end > start and text[end - 1] == "\r":
        end -= 1
    return start, end


# sentence ends: ``.!?`` before white space, a blank line, the end of a LaTeX command line
# (``\label{...}``), and the line break before a heading or a LaTeX structure command
_SENT_END = re.compile(r"[.!?](?=\s)|\n[ \t]*\n|\}[ \t]*(?=\r?\n)"
                       r"|\n(?=[ \t]*(?:#|\\(?:begin|end|item|section|subsection|label)\b))")


def sentence_bounds(text: str, pos: int, limit: int = 600) -> tuple[int, int]:
    """``(start, end)`` of the sentence around ``pos``: from after the previous sentence end
    (``_SENT_END``) to the next one (its end punctuation included), at most ``limit``
    characters either side; leading and trailing whitespace trimmed."""
    lo = max(0, pos - limit)
    start = lo
    for m in _SENT_END.finditer(text, lo, pos):
        start = m.end()
    m = _SENT_END.search(text, pos, min(len(text), pos + limit))
    end = min(len(text), pos + limit) if m is None else (
        m.start() + 1 if m.group()[0] in ".!?}" else m.start())
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def round_robin(groups: list[list[Target]]) -> list[Target]:
    """Interleave ``groups``: the first of each, then the second of each, ..."""
    out: list[Target] = []
    depth = max((len(g) for g in groups), default=0)
    for i in range(depth):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def spread(targets: list[Target], rng) -> list[Target]:
    """``targets`` in a seeded order that spreads over documents: each document's targets are
    shuffled, documents are shuffled, and documents take turns (round robin)."""
    by_doc: dict[str, list[Target]] = {}
    for t in targets:
        by_doc.setdefault(t.doc.id, []).append(t)
    groups = []
    for doc_id in sorted(by_doc):
        group = sorted(by_doc[doc_id], key=lambda t: (t.start, t.end, t.kind, t.term, t.name))
        rng.shuffle(group)
        groups.append(group)
    rng.shuffle(groups)
    return round_robin(groups)
