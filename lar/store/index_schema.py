"""The file index's SQLite schema: the tables, the version it carries, reading and creating it."""
from __future__ import annotations

import sqlite3

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
