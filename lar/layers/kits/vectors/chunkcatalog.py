"""The chunk vector store's row catalogue, ``rows.sqlite`` (WAL): which pack rows each unit
owns, its chunks' byte spans and checksum, and the store's meta (dim, dtype, generation, live
row count). Every write is one transaction; the caller holds the store's writer lock."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from lar.core.errors import CorruptStateError
from lar.layers.kits.vectors.chunkrows import UnitRows

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows(hash TEXT PRIMARY KEY, first INTEGER NOT NULL,
    n INTEGER NOT NULL, spans BLOB NOT NULL, checksum TEXT NOT NULL);
"""


class RowCatalog:
    def __init__(self, db: Path):
        self.db = db
        try:
            self.conn = sqlite3.connect(db, timeout=30, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise self.unreadable(exc) from None

    def unreadable(self, exc: Exception) -> CorruptStateError:
        return CorruptStateError(f"the chunk vector index {self.db} is unreadable ({exc}); delete "
                                 f"{self.db.parent} and lar rebuilds it")

    def initialise(self, dim: int, dtype: str) -> dict[str, str]:
        """Create the tables (once) and return the meta; writer lock held."""
        try:
            self.conn.executescript(SCHEMA)
            self.conn.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", [
                ("format", "1"), ("dim", str(dim)), ("dtype", dtype),
                ("generation", "0"), ("live", "0")])
            return dict(self.conn.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as exc:
            raise self.unreadable(exc) from None

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        self.conn.execute(f"BEGIN {mode}")
        try:
            yield self.conn
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def meta_int(self, key: str) -> int:
        return int(self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0])

    def data_version(self) -> int:
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def load(self) -> tuple[int, dict[str, UnitRows]]:
        """(generation, every unit's rows), read in one snapshot."""
        with self.transaction("DEFERRED") as conn:
            gen = self.meta_int("generation")
            rows = {h: UnitRows(f, n, np.frombuffer(sp, dtype="<i8").reshape(n, 2), c)
                    for h, f, n, sp, c in conn.execute(
                        "SELECT hash, first, n, spans, checksum FROM rows")}
        return gen, rows

    def insert(self, prepared: list[tuple[str, np.ndarray, np.ndarray, str]],
               first: int) -> dict[str, UnitRows]:
        """Point each unit ``(hash, spans, raw rows, checksum)`` at the rows appended from
        ``first`` on, replacing what it had; returns the new rows."""
        new = {}
        with self.transaction() as conn:
            delta = 0
            for h, s, raw, ck in prepared:
                old = conn.execute("SELECT n FROM rows WHERE hash=?", (h,)).fetchone()
                n = raw.shape[0]
                conn.execute("INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?)",
                             (h, first, n, s.tobytes(), ck))
                delta += n - (old[0] if old else 0)
                new[h] = UnitRows(first, n, s, ck)
                first += n
            conn.execute("UPDATE meta SET value=CAST(value AS INTEGER)+? WHERE key='live'",
                         (delta,))
        return new

    def delete(self, ident: dict[str, tuple[int, int, str] | None]) -> list[str]:
        """Delete units (only those still matching ``(generation, first, checksum)`` when one is
        given); returns the hashes deleted."""
        with self.transaction() as conn:
            gen, freed, gone = self.meta_int("generation"), 0, []
            for h, want in ident.items():
                got = conn.execute("SELECT first, n, checksum FROM rows WHERE hash=?",
                                   (h,)).fetchone()
                if got is None or (want is not None and (gen, got[0], got[2]) != want):
                    continue
                conn.execute("DELETE FROM rows WHERE hash=?", (h,))
                freed += got[1]
                gone.append(h)
            conn.execute("UPDATE meta SET value=CAST(value AS INTEGER)-? WHERE key='live'",
                         (freed,))
        return gone

    def in_pack_order(self) -> list[tuple[str, int, int, str]]:
        return self.conn.execute("SELECT hash, first, n, checksum FROM rows ORDER BY first").fetchall()

    def commit_compaction(self, gen: int, moves: list[tuple[int, str]], lost: list[tuple],
                          live: int) -> None:
        """Point the moved units at the new pack (generation ``gen``), forget the lost ones."""
        with self.transaction() as conn:
            conn.executemany("UPDATE rows SET first=? WHERE hash=?", moves)
            conn.executemany("DELETE FROM rows WHERE hash=?", [(x[0],) for x in lost])
            conn.execute("UPDATE meta SET value=? WHERE key='generation'", (str(gen),))
            conn.execute("UPDATE meta SET value=? WHERE key='live'", (str(live),))
