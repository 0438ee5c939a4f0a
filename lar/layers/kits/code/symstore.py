"""Storage of the symbols layer: one JSON sidecar per unit plus a SQLite table of names.

The sidecar (``units/<hash[:2]>/<hash>.json``, written atomically: temp file + rename) holds the
unit's full extraction (definitions with signatures and docstrings, call sites); it is what
``context_for`` reads, through a small in-memory LRU. The SQLite database (``symbols.sqlite``,
WAL) holds one row per definition and per call site so a name lookup never reads sidecars.
A unit's rows are replaced in one transaction; sidecar first, rows second, manifest last (by
``BuildingLayer``), so a build killed half-way only redoes that unit.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Sequence

from lar.core.errors import CorruptStateError
from lar.core.sqlite_repair import SqliteFile
from lar.layers.kits.code.docs import DOC_CHARS
from lar.layers.kits.code.treesitter import Extraction

ROW_DOC_CHARS = 500  # docstrings kept in the name table (the sidecar keeps up to DOC_CHARS)
LRU_SIZE = 256

_SCHEMA = """
CREATE TABLE IF NOT EXISTS defs(
    hash TEXT NOT NULL, idx INTEGER NOT NULL, name TEXT NOT NULL, lname TEXT NOT NULL,
    qual TEXT NOT NULL, lqual TEXT NOT NULL, kind TEXT NOT NULL, s INTEGER NOT NULL,
    e INTEGER NOT NULL, line INTEGER NOT NULL, last INTEGER NOT NULL, sig TEXT NOT NULL,
    doc TEXT NOT NULL, PRIMARY KEY(hash, idx)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS defs_name ON defs(name);
CREATE INDEX IF NOT EXISTS defs_lname ON defs(lname);
CREATE INDEX IF NOT EXISTS defs_qual ON defs(qual);
CREATE INDEX IF NOT EXISTS defs_lqual ON defs(lqual);
CREATE TABLE IF NOT EXISTS calls(
    hash TEXT NOT NULL, name TEXT NOT NULL, callee TEXT NOT NULL, s INTEGER NOT NULL,
    e INTEGER NOT NULL, encl INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS calls_name ON calls(name);
CREATE INDEX IF NOT EXISTS calls_hash ON calls(hash);
"""
DEF_COLUMNS = "hash, idx, name, qual, kind, s, e, line, last, sig, doc"


def _setup(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(_SCHEMA)


class SymbolStore:
    def __init__(self, directory: Path, version: str):
        self.dir = Path(directory)
        self.version = version
        self.db_path = self.dir / "symbols.sqlite"
        self._lru: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lru_lock = threading.Lock()
        self.generation = 0
        self._made: set[str] = set()  # sidecar sub-folders known to exist
        self._names: tuple[Any, list[str], list[str]] | None = None
        self._names_lock = threading.Lock()
        self.db = SqliteFile(self.db_path, label="the symbols index", setup=_setup,
                             todo="The layer rebuilds it lazily: run `lar build`.")
        try:
            self.db.open()
        except sqlite3.DatabaseError as exc:
            raise CorruptStateError(
                f"the symbols index {self.db_path} is unreadable ({exc}); delete {self.dir} and "
                "the layer rebuilds lazily") from None
        self._vconn, self._vgen = None, -1

    def conn(self) -> sqlite3.Connection:
        return self.db.conn()

    def _data_version(self) -> tuple[int, int]:
        """(file generation, PRAGMA data_version of one connection kept for it): changes when
        another connection (thread or process) commits, or the file was replaced."""
        if self._vgen != self.db.generation or self._vconn is None:
            self._vconn = sqlite3.connect(self.db_path, timeout=30, isolation_level=None,
                                          check_same_thread=False)
            self._vgen = self.db.generation
        return self._vgen, self._vconn.execute("PRAGMA data_version").fetchone()[0]

    # -- sidecars ---------------------------------------------------------------------------
    def sidecar_path(self, h: str) -> Path:
        return self.dir / "units" / h[:2] / f"{h}.json"

    def write(self, h: str, ex: Extraction) -> None:
        """Write the unit's sidecar atomically, then replace its rows in one transaction."""
        path = self.sidecar_path(h)
        if path.parent.name not in self._made:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(path.parent.name)
        body = {"version": self.version, "hash": h, **ex.to_json()}
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                           encoding="utf-8")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        defs = [(h, i, d.name, d.name.lower(), d.qualified, d.qualified.lower(), d.kind, d.start,
                 d.end, d.lines[0], d.lines[1], d.signature, d.doc[:ROW_DOC_CHARS])
                for i, d in enumerate(ex.defs)]
        calls = [(h, c.name, c.callee, c.start, c.end, c.enclosing) for c in ex.calls]
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM defs WHERE hash=?", (h,))
            conn.execute("DELETE FROM calls WHERE hash=?", (h,))
            conn.executemany("INSERT INTO defs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", defs)
            conn.executemany("INSERT INTO calls VALUES (?,?,?,?,?,?)", calls)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        with self._lru_lock:
            self._lru.pop(h, None)
            self.generation += 1

    def drop(self, hashes: Iterable[str]) -> None:
        hashes = list(hashes)
        conn = self.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM defs WHERE hash=?", [(h,) for h in hashes])
            conn.executemany("DELETE FROM calls WHERE hash=?", [(h,) for h in hashes])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for h in hashes:
            self.sidecar_path(h).unlink(missing_ok=True)
        with self._lru_lock:
            for h in hashes:
                self._lru.pop(h, None)
            self.generation += 1

    def sidecar(self, h: str) -> dict[str, Any] | None:
        """The unit's sidecar, without its call sites, if it was built with the current version
        (LRU-cached), else None."""
        with self._lru_lock:
            got = self._lru.get(h)
            if got is not None:
                self._lru.move_to_end(h)
                return got
        try:
            data = json.loads(self.sidecar_path(h).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != self.version:
            return None
        data.pop("calls", None)  # the cache serves context lookups: definitions only
        with self._lru_lock:
            self._lru[h] = data
            while len(self._lru) > LRU_SIZE:
                self._lru.popitem(last=False)
        return data

    # -- lookups ----------------------------------------------------------------------------
    def defs_where(self, where: str, args: Sequence[Any]) -> list[tuple]:
        return self.conn().execute(f"SELECT {DEF_COLUMNS} FROM defs WHERE {where}",
                                   tuple(args)).fetchall()

    def defs_named(self, names: Sequence[str]) -> list[tuple]:
        out: list[tuple] = []
        for i in range(0, len(names), 500):
            chunk = list(names[i:i + 500])
            out += self.defs_where(f"name IN ({','.join('?' * len(chunk))})", chunk)
        return out

    def distinct_names(self) -> tuple[list[str], list[str]]:
        """Every distinct definition name, and the same names lower-cased with non-alphanumerics
        as spaces (rapidfuzz's ``default_process``); cached until the table changes."""
        from rapidfuzz import utils

        with self._names_lock:
            # data_version changes when another connection (thread or process) commits
            key = (self.generation, *self._data_version())
            if self._names is not None and self._names[0] == key:
                return self._names[1], self._names[2]
        names = [r[0] for r in self.conn().execute("SELECT DISTINCT name FROM defs")]
        processed = [utils.default_process(n) for n in names]
        with self._names_lock:
            self._names = (key, names, processed)
        return names, processed

    def calls_named(self, name: str) -> list[tuple]:
        """Call sites of ``name``: (hash, name, callee, start, end, enclosing index)."""
        return self.conn().execute("SELECT hash, name, callee, s, e, encl FROM calls WHERE name = ?",
                                   (name,)).fetchall()

    def defs_at(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple]:
        """{(hash, idx): definition row} for the given keys (primary-key lookups)."""
        conn = self.conn()
        out = {}
        for h, i in set(keys):
            row = conn.execute(f"SELECT {DEF_COLUMNS} FROM defs WHERE hash = ? AND idx = ?",
                               (h, i)).fetchone()
            if row is not None:
                out[(h, i)] = row
        return out


def innermost(defs: list[dict[str, Any]], start: int, end: int) -> dict[str, Any] | None:
    """The smallest definition of a sidecar whose span contains ``[start, end)``."""
    best = None
    for d in defs:
        if d["start"] <= start and end <= d["end"] and (
                best is None or d["end"] - d["start"] <= best["end"] - best["start"]):
            best = d
    return best


__all__ = ["SymbolStore", "innermost", "DOC_CHARS"]
