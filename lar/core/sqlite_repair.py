"""Damaged SQLite state files: tell damage from other failures, set the file aside, start afresh.

Every SQLite file lar keeps (the file index, each building layer's manifest and artefact
databases) holds data derived from the folder, so a damaged one is not patched in place: it is
renamed to ``<name>.corrupt-<UTC time>`` (kept for a bug report; delete it at will), a new empty
file takes its place and what it held is rebuilt lazily. A ``RepairedStateWarning`` and the
:class:`Repair` record (shown in the layer's status) say what happened and what to do.

Damage is proven, not guessed: after an error, ``PRAGMA quick_check`` (and the database's own
check, e.g. FTS5's ``integrity-check``) must fail, or, for a file whose errors can only come from
itself, SQLite must say so (SQLITE_CORRUPT, SQLITE_NOTADB, text that is not UTF-8). A locked or
busy database, a full disk or a refused permission is a failure and is reported as one.

:class:`SqliteFile` owns one file's per-thread connections: after a repair (here, in another
thread or in another process, seen as a new inode) every thread reconnects to the new file.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lar.core.errors import RepairedStateWarning

SQLITE_CORRUPT, SQLITE_NOTADB = 11, 26
# errors that say the file is unusable right now, not that it is damaged
NOT_DAMAGE = ("locked", "busy", "disk is full", "readonly", "read-only", "unable to open",
              "permission", "interrupted", "out of memory", "disk i/o error")
DAMAGE = ("malformed", "not a database", "could not decode to utf-8", "corrupt")


def is_failure(exc: BaseException) -> bool:
    """True for errors that are no evidence of damage (locks, full disk, permissions)."""
    msg = str(exc).lower()
    return any(w in msg for w in NOT_DAMAGE)


def says_damaged(exc: BaseException) -> bool:
    """True when SQLite's own error says the file is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError) or is_failure(exc):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return True
    msg = str(exc).lower()
    return any(w in msg for w in DAMAGE)


def check(path: Path, extra: Callable[[sqlite3.Connection], None] | None = None) -> str | None:
    """What is wrong with the database at ``path`` (``PRAGMA quick_check``, then ``extra``),
    or None when it passes, is missing, or cannot be checked now (locked)."""
    if not Path(path).exists():
        return None
    try:
        conn = sqlite3.connect(path, timeout=5)
    except sqlite3.Error:
        return None
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            found = "; ".join(x.strip() for r in rows[:3] for x in str(r).splitlines()
                              if x.strip() and not x.startswith("***"))
            found = found or "quick_check found problems"
            return "quick_check: " + (found if len(found) <= 160 else found[:157] + "...")
        if extra is not None:
            extra(conn)
    except sqlite3.DatabaseError as exc:
        return None if is_failure(exc) else str(exc)
    finally:
        conn.close()
    return None


def set_aside(path: Path) -> Path:
    """Rename ``path`` (and its ``-wal``/``-shm`` files) to ``<name>.corrupt-<UTC time>``."""
    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while dest.exists():
        n += 1
        dest = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    if path.exists():
        os.replace(path, dest)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, dest.with_name(dest.name + suffix))
    return dest


@dataclass(frozen=True)
class Repair:
    """One damaged file that was set aside: which, what was wrong, where it went, what to do."""

    label: str
    path: str
    damage: str
    moved_to: str
    todo: str
    at: float

    def message(self) -> str:
        return (f"{self.label} {self.path} was damaged ({self.damage}); it was set aside as "
                f"{Path(self.moved_to).name} and started afresh. {self.todo}")


def set_aside_folder(folder: Path, db: Path, *, label: str, todo: str) -> Repair | None:
    """A store folder whose catalogue ``db`` is damaged, set aside whole (its other files
    mean nothing without it): the :class:`Repair`, or None when ``db`` passes its check."""
    damage = check(db)
    if damage is None:
        return None
    moved = set_aside(Path(folder))
    rep = Repair(label, str(db), damage, str(moved), todo, time.time())
    warnings.warn(RepairedStateWarning(rep.message()), stacklevel=3)
    return rep


def plain_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class SqliteFile:
    """One SQLite state file: per-thread connections, ``setup`` (schema) run on every new file,
    and ``repair(exc)`` that sets the file aside when ``exc`` proves damage. ``on_reset`` is
    called after a repair (e.g. to forget the units whose artefacts the file held).
    ``trust_errors``: the file is the only database its owner reads, so SQLite's own damage
    errors (e.g. text that is not UTF-8, which quick_check does not see) are proof enough."""

    def __init__(self, path: Path, *, label: str, todo: str,
                 setup: Callable[[sqlite3.Connection], None],
                 connect: Callable[[Path], sqlite3.Connection] = plain_connect,
                 extra_check: Callable[[sqlite3.Connection], None] | None = None,
                 on_reset: Callable[[], None] | None = None, trust_errors: bool = False):
        self.path = Path(path)
        self.label = label
        self.todo = todo
        self.setup = setup
        self.connect = connect
        self.extra_check = extra_check
        self.on_reset = on_reset
        self.trust_errors = trust_errors
        self.repairs: list[Repair] = []
        self.generation = 0
        self._local = threading.local()
        self._lock = threading.RLock()

    def open(self) -> None:
        """Connect and set the schema up; a damaged file is set aside and replaced first."""
        try:
            self.setup(self.conn())
        except sqlite3.DatabaseError as exc:
            if not self.repair(exc, trust=True):
                raise

    def conn(self) -> sqlite3.Connection:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.generation != self.generation:
            conn = self.connect(self.path)
            local.conn, local.generation = conn, self.generation
            try:
                local.ino = os.stat(self.path).st_ino
            except OSError:
                local.ino = None
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _replaced_elsewhere(self) -> bool:
        """The file this thread is connected to is no longer at ``path`` (another thread or
        process set it aside): reconnect."""
        try:
            ino = os.stat(self.path).st_ino
        except OSError:
            ino = None
        mine = getattr(self._local, "ino", None)
        if getattr(self._local, "generation", self.generation) != self.generation or (
                mine is not None and ino is not None and mine != ino):
            self._local.conn = None
            return True
        return False

    def repair(self, exc: BaseException, trust: bool | None = None) -> Repair | bool | None:
        """After ``exc`` from this file: set it aside when it is damaged, start a new one and
        return the :class:`Repair`; True when another thread or process already replaced it
        (this thread reconnects); None when ``exc`` is no evidence of damage."""
        if not isinstance(exc, sqlite3.DatabaseError) or is_failure(exc):
            return None
        with self._lock:
            if self._replaced_elsewhere():
                return True
            damage = check(self.path, self.extra_check)
            if damage is None and (self.trust_errors if trust is None else trust) \
                    and says_damaged(exc):
                damage = str(exc)
            if damage is None:
                return None
            self.close()
            moved = set_aside(self.path)
            self.generation += 1
            self.setup(self.conn())
            rep = Repair(self.label, str(self.path), damage, str(moved), self.todo, time.time())
            self.repairs.append(rep)
            if self.on_reset is not None:
                self.on_reset()
        warnings.warn(RepairedStateWarning(rep.message()), stacklevel=3)
        return rep

    def recovering(self, fn: Callable[[], object]):
        """``fn()``; after an error that proves this file damaged, once more on the new file."""
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if not self.repair(exc):
                raise
        return fn()
