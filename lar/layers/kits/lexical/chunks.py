"""Chunk spans for lexical layers, the per-unit artefact store, and query-term highlighting.

* ``chunk_spans(doc, mode, ...)``: byte ranges of a unit's text. Prose and LaTeX use the shared
  chunker (``lar.layers.kits.chunking.chunk``: paragraph cuts, atomic blocks kept whole). Code is first cut
  at *top-level* blank lines (a blank line followed by a line that starts in column 0 and does
  not close a bracket), so functions and classes stay together; neighbouring blocks are packed
  up to ``target`` bytes and a block larger than ``hard_max`` is cut by the shared chunker.
* ``UnitStore``: one row per content hash (SQLite, WAL) holding the unit's chunk spans and their
  term lists, zlib-compressed JSON, written in one transaction (the expensive, per-unit part of
  a build; segments are rebuilt from it without re-tokenising).
* ``Highlighter``: byte ranges of the query's words (and their stems) inside a chunk.
"""
from __future__ import annotations

import json
import re
import sqlite3
import zlib
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from lar.layers.kits.chunking import chunk
from lar.core.errors import CorruptStateError
from lar.core.sqlite_repair import SqliteFile
from lar.store.extract import Document, plain

CODE_CHUNKER_VERSION = "1"
MAX_SUB_SPANS = 20

_TOP_LEVEL = re.compile(rb"\n[ \t]*\r?\n(?=[^\s)\]}])")


def code_blocks(text: bytes) -> list[tuple[int, int]]:
    """Top-level blocks of source text: cuts after blank lines followed by a column-0 line."""
    cuts = [0] + [m.end() for m in _TOP_LEVEL.finditer(text)] + [len(text)]
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def code_chunks(text: bytes, target: int, hard_max: int) -> list[tuple[int, int]]:
    """Pack top-level blocks into chunks of about ``target`` bytes; cut oversized blocks with
    the shared chunker."""
    out: list[tuple[int, int]] = []
    start = end = None
    for a, b in code_blocks(text):
        if b - a > hard_max:
            if start is not None:
                out.append((start, end))
                start = end = None
            out.extend((a + s, a + e) for s, e in chunk(plain(text[a:b]), target, hard_max))
            continue
        if start is None:
            start, end = a, b
        elif b - start <= target:
            end = b
        else:
            out.append((start, end))
            start, end = a, b
    if start is not None:
        out.append((start, end))
    return [(s, e) for s, e in out if text[s:e].strip()]


def chunk_spans(doc: Document, mode: str, target: int, code_target: int,
                hard_max: int = 8000) -> list[tuple[int, int]]:
    """The chunk byte ranges of ``doc`` for a unit read with tokenizer ``mode``."""
    if mode == "code" and not doc.blocks:
        return code_chunks(doc.text, code_target, max(hard_max, code_target))
    return chunk(doc, target, max(hard_max, target))


class UnitStore:
    """Per-unit artefacts: ``{hash: (spans, term lists)}`` in ``<dir>/units.sqlite``."""

    label = "bm25 unit store"  # named in the error a damaged file raises

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a damaged file is set aside and started afresh: its units' artefacts are missing then,
        # which the segment index reports (``on_lost``) and the layer rebuilds lazily
        self.db = SqliteFile(self.path, label=f"the {self.label}", setup=self._setup,
                             todo="The layer rebuilds its units lazily: run `lar build`.")
        try:
            self.db.open()
        except sqlite3.DatabaseError as exc:
            raise CorruptStateError(
                f"the {self.label} {self.path} is unreadable ({exc}); delete "
                f"{self.path.parent} and the layer rebuilds lazily") from None

    @staticmethod
    def _setup(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS units(hash TEXT PRIMARY KEY, "
                     "version TEXT NOT NULL, payload BLOB NOT NULL)")

    def _conn(self) -> sqlite3.Connection:
        return self.db.conn()

    @staticmethod
    def encode(spans: Sequence[tuple[int, int]], terms: Sequence[Sequence[str]]) -> bytes:
        raw = json.dumps({"spans": [list(s) for s in spans], "terms": [list(t) for t in terms]},
                         ensure_ascii=False, separators=(",", ":"))
        return zlib.compress(raw.encode("utf-8"), 1)

    @staticmethod
    def decode(blob: bytes) -> tuple[list[tuple[int, int]], list[list[str]]]:
        d = json.loads(zlib.decompress(blob).decode("utf-8"))
        return [tuple(s) for s in d["spans"]], d["terms"]

    def put(self, h: str, version: str, spans: Sequence[tuple[int, int]],
            terms: Sequence[Sequence[str]]) -> None:
        """Store one unit's artefact (one statement: atomic)."""
        self.put_blob(h, version, self.encode(spans, terms))

    def put_blob(self, h: str, version: str, blob: bytes) -> None:
        self._conn().execute(
            "INSERT INTO units(hash, version, payload) VALUES (?,?,?) ON CONFLICT(hash) DO "
            "UPDATE SET version=excluded.version, payload=excluded.payload",
            (h, version, blob))

    def drop(self, hashes: Iterable[str]) -> None:
        self._conn().executemany("DELETE FROM units WHERE hash=?", [(h,) for h in hashes])

    def get_many(self, hashes: Iterable[str], version: str
                 ) -> Iterator[tuple[str, list[tuple[int, int]], list[list[str]]]]:
        """``(hash, spans, terms)`` of the given units stored with ``version`` (others are left
        out: the caller treats them as not built). A corrupt row is skipped."""
        for h, blob in self.blobs(hashes, version):
            try:
                spans, terms = self.decode(blob)
            except (zlib.error, ValueError, KeyError, TypeError):
                continue
            yield h, spans, terms

    def blobs(self, hashes: Iterable[str], version: str) -> Iterator[tuple[str, bytes]]:
        """``(hash, payload)`` of the given units stored with ``version``, by hash."""
        hashes = sorted(set(hashes))
        conn = self._conn()
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            rows = conn.execute(
                f"SELECT hash, payload FROM units WHERE version=? AND hash IN "
                f"({','.join('?' * len(part))})", (version, *part)).fetchall()
            yield from sorted(rows)


class Highlighter:
    """Finds the query's words in chunk text, case-insensitively, as absolute byte ranges.

    A match must start at a word start, after ``_`` or at a lower/digit-to-upper case change
    (``Duration`` in ``parseDuration``); a match is extended to the end of its lower-case run
    (the stem ``durat`` marks ``duration``, ``duration`` marks ``durations``); overlapping
    matches keep the longest."""

    def __init__(self, words: Sequence[str], stems: Sequence[str]):
        self._terms = sorted(set(words) | set(stems), key=len, reverse=True)
        self._rx = None
        if self._terms:
            self._rx = re.compile(r"(?:(?<![^\W_])|(?-i:(?<=[a-z0-9])(?=[A-Z])))(?:"
                                  + "|".join(re.escape(t) for t in self._terms) + ")",
                                  re.IGNORECASE)

    def _raw(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, term) in character offsets, in no particular order."""
        low = text.lower()
        if len(low) != len(text) or self._rx is None:  # lower() moved offsets: use the regex
            return [(m.start(), m.end(), m.group(0).lower()) for m in self._rx.finditer(text)] \
                if self._rx is not None else []
        out = []
        for term in self._terms:
            pos = low.find(term)
            while pos >= 0:
                p = text[pos - 1] if pos else " "
                if not p.isalnum() or ((p.islower() or p.isdigit()) and text[pos].isupper()):
                    out.append((pos, pos + len(term), term))
                pos = low.find(term, pos + 1)
        return out

    def find(self, data: bytes, start: int, end: int, cap: int = MAX_SUB_SPANS
             ) -> list[tuple[int, int]]:
        if not self._terms:
            return []
        raw = data[start:end]
        text = raw.decode("utf-8", errors="surrogateescape")
        spans: list[tuple[int, int]] = []
        last_end = -1
        for a, b, term in sorted(self._raw(text), key=lambda t: (t[0], -t[1])):
            if a < last_end:
                continue
            if text[b - 1].islower():  # to the end of the word part: "durat" -> "duration"
                while b < len(text) and text[b].islower():
                    b += 1
            spans.append((a, b))
            last_end = b
            if len(spans) >= cap:
                break
        if len(text) == len(raw):
            return [(start + a, start + b) for a, b in spans]
        out = []
        for a, b in spans:
            ba = len(text[:a].encode("utf-8", errors="surrogateescape"))
            out.append((start + ba, start + ba + len(text[a:b].encode("utf-8", errors="surrogateescape"))))
        return out
