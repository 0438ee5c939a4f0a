"""Per-unit derived texts and their terms for a layer that indexes them (SQLite, WAL).

One row per content hash: the unit's derived texts and, per text, its term list (zlib JSON),
written in one statement. ``get_many`` yields ``(hash, pseudo-spans, terms)`` where the i-th
pseudo-span is ``(i, i + 1)``: the text's index, not a byte range. That is the shape
``lar.lexical.index.SegmentedIndex`` builds BM25 segments from, so a segment doc names one
derived text; its real source spans are looked up here.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..errors import CorruptStateError
from .types import DerivedText, GeneratorError


class DerivedStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS units(hash TEXT PRIMARY KEY, "
                         "version TEXT NOT NULL, payload BLOB NOT NULL)")
        except sqlite3.DatabaseError as exc:
            raise CorruptStateError(
                f"the derived-text store {self.path} is unreadable ({exc}); delete "
                f"{self.path.parent} and the layer rebuilds lazily") from None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def put(self, h: str, version: str, texts: Sequence[DerivedText],
            terms: Sequence[Sequence[str]]) -> None:
        raw = json.dumps({"texts": [t.to_json() for t in texts], "terms": [list(t) for t in terms]},
                         ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._conn().execute(
            "INSERT INTO units(hash, version, payload) VALUES (?,?,?) ON CONFLICT(hash) DO "
            "UPDATE SET version=excluded.version, payload=excluded.payload",
            (h, version, zlib.compress(raw, 1)))

    def drop(self, hashes: Iterable[str]) -> None:
        self._conn().executemany("DELETE FROM units WHERE hash=?", [(h,) for h in hashes])

    @staticmethod
    def _decode(blob: bytes) -> dict:
        return json.loads(zlib.decompress(blob).decode("utf-8"))

    def _rows(self, hashes: Iterable[str], version: str) -> Iterator[tuple[str, dict]]:
        hashes = sorted(set(hashes))
        conn = self._conn()
        for i in range(0, len(hashes), 500):
            part = hashes[i:i + 500]
            rows = conn.execute(
                f"SELECT hash, payload FROM units WHERE version=? AND hash IN "
                f"({','.join('?' * len(part))})", (version, *part)).fetchall()
            for h, blob in sorted(rows):
                try:
                    yield h, self._decode(blob)
                except (zlib.error, ValueError, TypeError):
                    continue  # a corrupt row counts as not built

    def get_many(self, hashes: Iterable[str], version: str
                 ) -> Iterator[tuple[str, list[tuple[int, int]], list[list[str]]]]:
        """``(hash, [(i, i + 1), ...], terms)`` per stored unit (see the module docstring)."""
        for h, d in self._rows(hashes, version):
            terms = d.get("terms")
            if isinstance(terms, list):
                yield h, [(i, i + 1) for i in range(len(terms))], terms

    def texts(self, h: str, version: str) -> list[DerivedText] | None:
        """The derived texts of unit ``h`` (None when not stored or unreadable)."""
        for _, d in self._rows([h], version):
            try:
                return [DerivedText.from_json(t) for t in d["texts"]]
            except (KeyError, TypeError, GeneratorError):
                return None
        return None
