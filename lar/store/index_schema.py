"""The file index's SQLite schema: the tables, the version it carries, reading and creating it."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Callable, ContextManager

SCHEMA_VERSION = "2"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    path TEXT PRIMARY KEY,
    hash TEXT,
    size INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL DEFAULT 0,
    ctime_ns INTEGER NOT NULL DEFAULT 0,
    ino INTEGER NOT NULL DEFAULT 0,
    seq INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS files_hash ON files(hash);
CREATE INDEX IF NOT EXISTS files_seq ON files(seq);
CREATE TABLE IF NOT EXISTS cursors(layer TEXT PRIMARY KEY, version TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS skipped(path TEXT PRIMARY KEY, reason TEXT NOT NULL, size INTEGER,
    mtime_ns INTEGER, ctime_ns INTEGER, ino INTEGER);
CREATE TABLE IF NOT EXISTS history(hash TEXT NOT NULL, path TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY(hash, path));
CREATE TABLE IF NOT EXISTS usage(hash TEXT PRIMARY KEY, hits INTEGER NOT NULL DEFAULT 0,
    fetches INTEGER NOT NULL DEFAULT 0, last REAL NOT NULL DEFAULT 0);
"""


def read_schema(conn: sqlite3.Connection) -> str | None:
    """The schema version the database carries (None: a new, empty database)."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if not has_meta:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    return row[0] if row else None


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables of a new index (inside the caller's write transaction)."""
    for stmt in _SCHEMA.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?), ('seq', '0')",
                 (SCHEMA_VERSION,))


def set_aside_older_schema(db_path: Path, lock_timeout: float,
                           writing: Callable[[], ContextManager]) -> str | None:
    """An index written by an older lar is derived data: keep it as a backup beside the new one
    (``index.sqlite.schema-N.bak``, under the writer lock ``writing()``) so that the next scan
    re-indexes afresh. Returns the older schema's version, or None when nothing was set aside."""
    if not db_path.exists():
        return None
    try:
        conn = sqlite3.connect(db_path, timeout=lock_timeout)
        try:
            found = read_schema(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None  # unreadable: the index reports it with what to do
    if found is None or found == SCHEMA_VERSION or not found.isdigit() \
            or int(found) > int(SCHEMA_VERSION):
        return None
    with writing():
        backup = db_path.with_name(f"index.sqlite.schema-{found}.bak")
        for suffix in ("-wal", "-shm"):
            side = db_path.with_name(db_path.name + suffix)
            if side.exists():
                side.unlink()
        os.replace(db_path, backup)
    return found
