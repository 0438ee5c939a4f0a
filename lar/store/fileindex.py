"""The central file index: one row per path (tombstones collapse repeated changes), a monotonic
sequence number as the change cursor, per-layer cursors, skipped files and usage counts.

SQLite in WAL mode: readers see the last committed state and never a half-written one. There is
one writer at a time across processes: ``writing()`` takes an ``flock`` on ``writer.lock`` in the
state dir (``lar.store.writer_lock``), waiting up to ``lock_timeout`` seconds, then raises
``StateLockedError`` naming the process that holds it.
"""
from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from lar.core import deadline
from lar.core.errors import CorruptStateError, HitNotFoundError, StateLockedError
from lar.store.pathkeys import display_path, key_path, path_key
from lar.core.sqlite_repair import SqliteFile
from lar.store.index_schema import SCHEMA_VERSION, create_schema, read_schema, set_aside_older_schema
from lar.store.writer_lock import WriterLock

__all__ = ["FileIndex", "FileRecord", "SCHEMA_VERSION"]

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class FileRecord:
    path: str
    hash: str | None
    size: int
    mtime_ns: int
    seq: int
    deleted: bool
    ctime_ns: int = 0
    ino: int = 0

    def same_stat(self, st) -> bool:
        """True when ``st`` (an os.stat_result) says the file is unchanged since indexed.
        ctime and inode catch same-size edits that restore the mtime (cp -p, rsync -t, tar)."""
        return (not self.deleted and self.size == st.st_size and self.mtime_ns == st.st_mtime_ns
                and self.ctime_ns == st.st_ctime_ns and self.ino == st.st_ino)


def _recovering(method):
    """A read or write of the index that is retried once on a new index when the error proves
    the file damaged (see ``FileIndex.recovering``)."""
    @functools.wraps(method)
    def run(self, *args, **kw):
        return self.recovering(lambda: method(self, *args, **kw))
    return run


_COLS = "path, hash, size, mtime_ns, seq, deleted, ctime_ns, ino"


def _record(row) -> FileRecord:
    return FileRecord(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6], row[7])


class FileIndex:
    """Read API for everyone; write API (``upsert``, ``tombstone``...) inside ``writing()``."""

    def __init__(self, state_dir: Path, *, lock_timeout: float = 10.0):
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.state_dir / "index.sqlite"
        self.lock_path = self.state_dir / "writer.lock"
        self.lock_timeout = lock_timeout
        self._local = threading.local()
        self._write_mutex = threading.RLock()
        self._write_depth = 0
        self._writes = 0  # this process's writes to ``files`` (a stat-only update moves no seq)
        self._all_cache: tuple[tuple[int, int], dict[str, FileRecord]] | None = None
        self._writer = WriterLock(self.lock_path, self.state_dir, lock_timeout)
        self.migrated_from: str | None = None
        self.on_repair = None  # called after a damaged index was replaced (the engine rescans)
        self.db = SqliteFile(
            self.db_path, label="the file index", setup=self._setup, connect=self._connect,
            on_reset=self._reset, trust_errors=True,
            todo="lar rescans the folder into a new index: nothing to do, but hit ids from "
                 "before may no longer resolve (search again), and usage counts start afresh.")
        older = set_aside_older_schema(self.db_path, self.lock_timeout, self.writing)
        if older is not None:
            self.close()
            self.migrated_from = older
        try:
            self.db.open()
            found = read_schema(self._conn())
        except sqlite3.DatabaseError as exc:
            raise CorruptStateError(
                f"the file index {self.db_path} is unreadable ({exc}); "
                f"delete the state folder {self.state_dir} and run `lar index` again"
            ) from None
        if found != SCHEMA_VERSION:  # newer than this lar: never touch it
            raise CorruptStateError(
                f"the file index {self.db_path} has schema {found!r}, written by a newer lar; "
                f"this lar needs {SCHEMA_VERSION!r}: upgrade lar or open with another state dir"
            )

    def _setup(self, conn: sqlite3.Connection) -> None:
        """A new index gets its schema under the writer lock; an existing one is only read."""
        if read_schema(conn) is None:
            conn.execute("PRAGMA journal_mode=WAL")
            with self.writing():
                create_schema(conn)

    def _reset(self) -> None:
        self._all_cache = None
        self._writes += 1
        if self.on_repair is not None:
            self.on_repair()

    def recovering(self, fn: Callable[[], T]) -> T:
        """``fn()``; when an error proves the index damaged, it is set aside, a new one is
        started and ``fn()`` runs once more (not inside a write: the outermost call retries)."""
        if self._write_depth:
            return fn()
        return self.db.recovering(fn)

    # -- connections ------------------------------------------------------------------------
    def _connect(self, path: Path) -> sqlite3.Connection:
        conn = sqlite3.connect(path, timeout=self.lock_timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(self.lock_timeout * 1000)}")
        return conn

    def _conn(self) -> sqlite3.Connection:
        return self.db.conn()

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()

    # -- the single writer ------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """Hold the cross-process writer lock and one IMMEDIATE transaction. Waiting for the
        lock lasts ``lock_timeout`` at most, and never past the work limit in force
        (``lar.core.deadline``: a search's deadline), then ``StateLockedError``."""
        bounded = deadline.current().deadline is not None or deadline.current().cancels
        if not self._write_mutex.acquire(timeout=deadline.remaining(self.lock_timeout)
                                         if bounded else -1):
            raise StateLockedError(
                f"another thread of this process is writing the lar index in {self.state_dir} "
                "(it waits for another process's writer lock); try again when it is done")
        try:
            outer = self._write_depth == 0
            if outer:
                self._writer.acquire()
            self._write_depth += 1
            conn = self._conn()
            try:
                if outer:
                    conn.execute("BEGIN IMMEDIATE")
                yield conn
                if outer:
                    conn.execute("COMMIT")
            except BaseException:
                if outer and conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:  # a damaged file: the caller's error says more
                        pass
                raise
            finally:
                self._write_depth -= 1
                if outer:
                    self._writer.release()
        finally:
            self._write_mutex.release()

    def _next_seq(self, conn: sqlite3.Connection) -> int:
        seq = int(conn.execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0]) + 1
        conn.execute("UPDATE meta SET value=? WHERE key='seq'", (str(seq),))
        return seq

    # -- writes (call inside writing()) -----------------------------------------------------
    @_recovering
    def upsert(self, path: str, h: str, size: int, mtime_ns: int, ctime_ns: int = 0,
               ino: int = 0) -> int | None:
        """Record the current state of ``path``. Returns the new seq, or None if the content
        hash is unchanged (only stat fields are refreshed then)."""
        with self.writing() as conn:
            row = conn.execute("SELECT hash, deleted FROM files WHERE path=?", (path,)).fetchone()
            conn.execute("DELETE FROM skipped WHERE path=?", (path,))
            self._writes += 1
            if row is not None and row[0] == h and not row[1]:
                conn.execute("UPDATE files SET size=?, mtime_ns=?, ctime_ns=?, ino=? WHERE path=?",
                             (size, mtime_ns, ctime_ns, ino, path))
                return None
            seq = self._next_seq(conn)
            conn.execute("INSERT INTO history(hash, path, seq) VALUES (?,?,?) ON CONFLICT(hash, path) "
                         "DO UPDATE SET seq=excluded.seq", (h, path, seq))
            conn.execute(
                "INSERT INTO files(path, hash, size, mtime_ns, ctime_ns, ino, seq, deleted) "
                "VALUES (?,?,?,?,?,?,?,0) ON CONFLICT(path) DO UPDATE SET hash=excluded.hash, "
                "size=excluded.size, mtime_ns=excluded.mtime_ns, ctime_ns=excluded.ctime_ns, "
                "ino=excluded.ino, seq=excluded.seq, deleted=0",
                (path, h, size, mtime_ns, ctime_ns, ino, seq),
            )
            return seq

    @_recovering
    def tombstone(self, path: str) -> int | None:
        """Mark ``path`` deleted (one row per path: repeated changes collapse)."""
        path = path_key(path)  # a non-UTF-8 name is never in ``files``: found nowhere
        with self.writing() as conn:
            row = conn.execute("SELECT deleted FROM files WHERE path=?", (path,)).fetchone()
            conn.execute("DELETE FROM skipped WHERE path=?", (path,))
            if row is None or row[0]:
                return None
            seq = self._next_seq(conn)
            self._writes += 1
            conn.execute("UPDATE files SET deleted=1, seq=? WHERE path=?", (seq, path))
            return seq

    @_recovering
    def record_skip(self, path: str, reason: str, size: int | None, mtime_ns: int | None = None,
                    ctime_ns: int | None = None, ino: int | None = None) -> None:
        path = path_key(path)  # a non-UTF-8 name is kept as its raw bytes (lar.store.pathkeys)
        with self.writing() as conn:
            self.tombstone(key_path(path))  # a file that became binary or too large leaves the index
            conn.execute(
                "INSERT INTO skipped(path, reason, size, mtime_ns, ctime_ns, ino) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(path) DO UPDATE SET reason=excluded.reason, size=excluded.size, "
                "mtime_ns=excluded.mtime_ns, ctime_ns=excluded.ctime_ns, ino=excluded.ino",
                (path, reason, size, mtime_ns, ctime_ns, ino),
            )

    @_recovering
    def forget_skip(self, path: str) -> None:
        with self.writing() as conn:
            conn.execute("DELETE FROM skipped WHERE path=?", (path_key(path),))

    @_recovering
    def set_cursor(self, layer: str, version: str, seq: int) -> None:
        with self.writing() as conn:
            conn.execute(
                "INSERT INTO cursors(layer, version, seq) VALUES (?,?,?) ON CONFLICT(layer) "
                "DO UPDATE SET version=excluded.version, seq=excluded.seq",
                (layer, version, seq),
            )

    @_recovering
    def touch_usage(self, hashes: list[str], *, kind: str = "hits") -> None:
        col = "fetches" if kind == "fetches" else "hits"
        now = time.time()
        with self.writing() as conn:
            conn.executemany(
                f"INSERT INTO usage(hash, {col}, last) VALUES (?, 1, ?) ON CONFLICT(hash) "
                f"DO UPDATE SET {col}={col}+1, last=excluded.last",
                [(h, now) for h in hashes],
            )

    # -- reads ------------------------------------------------------------------------------
    @_recovering
    def get(self, path: str) -> FileRecord | None:
        row = self._conn().execute(
            f"SELECT {_COLS} FROM files WHERE path=?", (path_key(path),)
        ).fetchone()
        return _record(row) if row else None

    @_recovering
    def live(self) -> list[FileRecord]:
        rows = self._conn().execute(
            f"SELECT {_COLS} FROM files WHERE deleted=0 ORDER BY path"
        ).fetchall()
        return [_record(r) for r in rows]

    @_recovering
    def get_many(self, paths: list[str]) -> dict[str, FileRecord]:
        out: dict[str, FileRecord] = {}
        conn = self._conn()
        for i in range(0, len(paths), 500):
            chunk = [path_key(p) for p in paths[i:i + 500]]
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(f"SELECT {_COLS} FROM files WHERE path IN ({marks})", chunk):
                out[r[0]] = _record(r)
        return out

    @_recovering
    def all_paths(self) -> dict[str, FileRecord]:
        """Every path's record (a fresh dict). Read once per change: kept while the sequence
        number and this process's write count stay put (another process's stat-only refresh
        of a record is then missed, which costs the scanner one re-hash, never a wrong hash)."""
        key = (self.max_seq(), self._writes)
        cached = self._all_cache
        if cached is not None and cached[0] == key:
            return dict(cached[1])
        rows = self._conn().execute(f"SELECT {_COLS} FROM files").fetchall()
        out = {r[0]: _record(r) for r in rows}
        self._all_cache = (key, out)
        return dict(out)

    @_recovering
    def paths_for_hash(self, h: str) -> list[str]:
        rows = self._conn().execute(
            "SELECT path FROM files WHERE hash=? AND deleted=0 ORDER BY path", (h,)
        ).fetchall()
        return [r[0] for r in rows]

    @_recovering
    def paths_for_hashes(self, hashes) -> dict[str, list[str]]:
        """:meth:`paths_for_hash` of many hashes in one query: ``{hash: [path, ...]}`` (sorted
        paths; a hash with no live path maps to ``[]``)."""
        want = list(dict.fromkeys(hashes))
        out: dict[str, list[str]] = {h: [] for h in want}
        conn = self._conn()
        for i in range(0, len(want), 500):  # well under SQLite's bound-parameter limit
            part = want[i:i + 500]
            rows = conn.execute(
                f"SELECT hash, path FROM files WHERE deleted=0 AND hash IN ({','.join('?' * len(part))}) "
                "ORDER BY path", part).fetchall()
            for h, path in rows:
                out[h].append(path)
        return out

    @_recovering
    def known_hash(self, h: str) -> bool:
        return self._conn().execute("SELECT 1 FROM history WHERE hash=? LIMIT 1", (h,)).fetchone() is not None

    @_recovering
    def past_paths(self, h: str) -> list[str]:
        """Every path that ever held content ``h`` (newest first), for re-anchoring old ids."""
        rows = self._conn().execute(
            "SELECT path FROM history WHERE hash=? ORDER BY seq DESC", (h,)).fetchall()
        return [r[0] for r in rows]

    @_recovering
    def resolve_prefix(self, prefix: str) -> str:
        """The full hash for a hash prefix (as in hit ids), or ``HitNotFoundError``."""
        rows = self._conn().execute(
            "SELECT DISTINCT hash FROM history WHERE hash >= ? AND hash < ? LIMIT 2",
            (prefix, prefix + "g"),
        ).fetchall()
        if not rows:
            raise HitNotFoundError(
                f"no unit with content hash {prefix!r} is known to this index; the id may come "
                "from another corpus or a file that was never indexed. Run a search for fresh ids"
            )
        if len(rows) > 1:
            raise HitNotFoundError(f"hash prefix {prefix!r} is ambiguous; give more characters")
        return rows[0][0]

    @_recovering
    def changes_since(self, seq: int, limit: int | None = None) -> list[FileRecord]:
        q = f"SELECT {_COLS} FROM files WHERE seq > ? ORDER BY seq"
        args: tuple = (seq,)
        if limit is not None:
            q += " LIMIT ?"
            args = (seq, limit)
        return [_record(r) for r in self._conn().execute(q, args).fetchall()]

    @_recovering
    def max_seq(self) -> int:
        return int(self._conn().execute("SELECT value FROM meta WHERE key='seq'").fetchone()[0])

    @_recovering
    def get_cursor(self, layer: str) -> tuple[str, int] | None:
        row = self._conn().execute("SELECT version, seq FROM cursors WHERE layer=?", (layer,)).fetchone()
        return (row[0], row[1]) if row else None

    @_recovering
    def skipped(self) -> list[tuple[str, str, int | None]]:
        """(path, reason, size) of each skipped file; a name that is not UTF-8 is shown escaped."""
        return [(display_path(r[0]), r[1], r[2]) for r in self._conn().execute(
            "SELECT path, reason, size FROM skipped ORDER BY path").fetchall()]

    @_recovering
    def skipped_stats(self, paths: list[str] | None = None) -> dict[str, tuple]:
        """{path: (reason, size, mtime_ns, ctime_ns, ino)} of skipped files (all, or those of
        ``paths``), keyed as the scanner holds paths (its stat pass, and grep's refresh)."""
        q = "SELECT path, reason, size, mtime_ns, ctime_ns, ino FROM skipped"
        if paths is None:
            rows = self._conn().execute(q).fetchall()
        else:
            rows = []
            for i in range(0, len(paths), 500):
                chunk = [path_key(p) for p in paths[i:i + 500]]
                rows += self._conn().execute(
                    f"{q} WHERE path IN ({','.join('?' * len(chunk))})", chunk).fetchall()
        return {key_path(r[0]): tuple(r[1:]) for r in rows}

    @_recovering
    def usage(self) -> dict[str, tuple[int, int, float]]:
        rows = self._conn().execute("SELECT hash, hits, fetches, last FROM usage").fetchall()
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    @_recovering
    def counts(self) -> tuple[int, int]:
        """(live files, distinct live hashes)."""
        row = self._conn().execute(
            "SELECT COUNT(*), COUNT(DISTINCT hash) FROM files WHERE deleted=0").fetchone()
        return int(row[0]), int(row[1])
