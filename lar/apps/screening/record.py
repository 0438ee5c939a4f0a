"""The record of one screening run: ``<state>/screening/<run>.sqlite``.

It holds the run's settings, its snapshot (units with hash and path), the planned batches and
their items, each batch's state (pending, processed, failed) with counts, error text, elapsed
time and the screener that ran it, and every returned outcome. The file is created whole
(written to a temporary file, then renamed); afterwards each batch's result is one committed
transaction (SQLite WAL), so a killed process loses at most the batch it was screening. A
``<run>.lock`` file (flock) keeps two processes from screening the same run at once.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from lar.apps.screening.batches import PlannedItem
from lar.apps.screening.candidates import Outcome
from lar.apps.screening.errors import CorruptRunError, RunLockedError, RunNotFoundError, ScreeningConfigError

SCHEMA_VERSION = "1"
BATCH_STATES = ("pending", "processed", "failed")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE units(pos INTEGER PRIMARY KEY, path TEXT NOT NULL, hash TEXT NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, text_bytes INTEGER NOT NULL,
    note TEXT NOT NULL DEFAULT '');
CREATE TABLE skipped(path TEXT PRIMARY KEY, reason TEXT NOT NULL);
CREATE TABLE batches(id INTEGER PRIMARY KEY, state TEXT NOT NULL, n_items INTEGER NOT NULL,
    bytes INTEGER NOT NULL, n_candidates INTEGER NOT NULL DEFAULT 0,
    n_invalid INTEGER NOT NULL DEFAULT 0, n_unknown INTEGER NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '', elapsed REAL NOT NULL DEFAULT 0,
    screener TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0, finished REAL);
CREATE TABLE items(batch INTEGER NOT NULL, idx INTEGER NOT NULL, unit INTEGER NOT NULL,
    address TEXT NOT NULL UNIQUE, path TEXT NOT NULL, hash TEXT NOT NULL, start INTEGER NOT NULL,
    "end" INTEGER NOT NULL, line_a INTEGER NOT NULL, line_b INTEGER NOT NULL,
    digest TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY(batch, idx));
CREATE TABLE outcomes(id INTEGER PRIMARY KEY, batch INTEGER NOT NULL, seq INTEGER NOT NULL,
    kind TEXT NOT NULL, address TEXT, path TEXT, hash TEXT, start INTEGER, "end" INTEGER,
    line_a INTEGER, line_b INTEGER, note TEXT NOT NULL DEFAULT '', score REAL,
    reason TEXT NOT NULL DEFAULT '', excerpt TEXT NOT NULL DEFAULT '',
    returned TEXT NOT NULL DEFAULT '');
CREATE INDEX outcomes_batch ON outcomes(batch);
"""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ScreeningConfigError(
            f"run name {name!r}: use 1-80 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit (or leave run=None for a new generated name)")
    return name


def runs_dir(engine) -> Path:
    return Path(engine.state_dir) / "screening"


def run_path(engine, name: str) -> Path:
    return runs_dir(engine) / f"{check_name(name)}.sqlite"


@contextlib.contextmanager
def run_lock(path: Path) -> Iterator[None]:
    """Hold ``<run>.lock`` for the duration; refuse at once if someone else holds it."""
    lock = path.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fh = open(lock, "a+")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise RunLockedError(
                f"screening run {path.stem!r} is being screened by another caller (pid {holder}); "
                "wait for it to finish, or start a new run") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()  # closing releases the flock


class RunStore:
    """Read and write one run's record."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.exists():
            raise RunNotFoundError(f"no screening run {self.path.stem!r} in {self.path.parent}; "
                                   "list them with lar.apps.screening.list_runs(engine)")
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            raise CorruptRunError(f"the screening record {self.path} is unreadable ({exc}); "
                                  "delete it and start a new run") from None
        found = self._meta.get("schema")
        if found != SCHEMA_VERSION:
            self.conn.close()
            raise CorruptRunError(f"the screening record {self.path} has schema {found!r}; this lar "
                                  f"reads {SCHEMA_VERSION!r}: use the lar that wrote it, or start a new run")

    @classmethod
    def create(cls, path: Path, meta: dict[str, Any], units: Sequence[tuple[Any, int, str]],
               skipped: Sequence[tuple[str, str]], batches: Sequence[Sequence[PlannedItem]]) -> "RunStore":
        """Write the whole plan to a temporary file, then rename it into place."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("BEGIN")
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                                 [(k, json.dumps(v)) for k, v in meta.items()]
                                 + [("schema", SCHEMA_VERSION)])
                conn.executemany(
                    "INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(pos, u.path, u.hash, u.size, u.mtime_ns, nbytes, note)
                     for pos, (u, nbytes, note) in enumerate(units)])
                conn.executemany("INSERT INTO skipped VALUES (?, ?)", list(skipped))
                for bid, items in enumerate(batches, 1):
                    conn.execute("INSERT INTO batches(id, state, n_items, bytes) VALUES (?, 'pending', ?, ?)",
                                 (bid, len(items), sum(it.nbytes for it in items)))
                    conn.executemany(
                        'INSERT INTO items(batch, idx, unit, address, path, hash, start, "end", line_a, '
                        "line_b, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [(bid, i, it.unit, it.address, it.path, it.hash, it.start, it.end, it.line_a,
                          it.line_b, it.digest) for i, it in enumerate(items)])
                conn.execute("COMMIT")
            finally:
                conn.close()
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return cls(path)

    def close(self) -> None:
        self.conn.close()

    # -- reads ------------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._meta.items() if k != "schema"}

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self.conn.execute(sql, args).fetchall()

    def batch_ids(self, states: Sequence[str]) -> list[int]:
        marks = ",".join("?" * len(states))
        return [r[0] for r in self.rows(f"SELECT id FROM batches WHERE state IN ({marks}) ORDER BY id",
                                        tuple(states))]

    def batch_items(self, bid: int) -> list[tuple[int, PlannedItem]]:
        rows = self.rows('SELECT idx, unit, address, path, hash, start, "end", line_a, line_b, digest '
                         "FROM items WHERE batch=? ORDER BY idx", (bid,))
        return [(r[0], PlannedItem(*r[1:])) for r in rows]

    # -- writes -----------------------------------------------------------------------------
    def finish(self, bid: int, *, state: str, screener: str, elapsed: float, error: str = "",
               items: Sequence[tuple[int, str, str]] = (),
               outcomes: Sequence[tuple[Outcome, PlannedItem | None]] = ()) -> None:
        """Record one batch's result in a single transaction: its state, its items' states
        ``(idx, state, reason)`` and its outcomes (each with the planned item it names)."""
        if state not in BATCH_STATES:
            raise ScreeningConfigError(f"batch state {state!r} is not one of {BATCH_STATES}")
        counts = {k: sum(1 for o, _ in outcomes if o.kind == k) for k in ("candidate", "invalid", "unknown")}
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM outcomes WHERE batch=?", (bid,))
            c.execute("UPDATE batches SET state=?, n_candidates=?, n_invalid=?, n_unknown=?, error=?, "
                      "elapsed=?, screener=?, attempts=attempts+1, finished=? WHERE id=?",
                      (state, counts["candidate"], counts["invalid"], counts["unknown"], error,
                       float(elapsed), screener, time.time(), bid))
            c.executemany("UPDATE items SET state=?, reason=? WHERE batch=? AND idx=?",
                          [(st, why, bid, idx) for idx, st, why in items])
            c.executemany(
                'INSERT INTO outcomes(batch, seq, kind, address, path, hash, start, "end", line_a, '
                "line_b, note, score, reason, excerpt, returned) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(bid, o.seq, o.kind, it.address if it else None, it.path if it else None,
                  it.hash if it else None, o.start, o.end, o.lines[0] if o.lines else None,
                  o.lines[1] if o.lines else None, o.note, o.score, o.reason, o.excerpt, o.returned)
                 for o, it in outcomes])
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
