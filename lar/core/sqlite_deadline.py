"""A SQLite statement stopped at a deadline: a layer that runs one long query (an FTS5 match,
a large join) in a worker thread cannot be cancelled from the event loop; the thread would run
on past the deadline and hold the CPU the final fusion needs. ``interrupt_at`` installs a
progress handler that aborts the running statement once ``expired()`` is true."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Callable, Iterator

#: SQLite virtual-machine instructions between two deadline checks (~10-50 us of work)
CHECK_EVERY = 2000


class Interrupted(Exception):
    """The statement was abandoned at the deadline (the caller returns what it has)."""


@contextmanager
def interrupt_at(conn: sqlite3.Connection, expired: Callable[[], bool],
                 every: int = CHECK_EVERY) -> Iterator[None]:
    """Within the block, a statement on ``conn`` is aborted once ``expired()`` is true; the
    block then raises :class:`Interrupted` (at once when the deadline has passed already). Other
    SQLite errors pass through unchanged."""
    if expired():
        raise Interrupted("the deadline passed before the statement started")
    conn.set_progress_handler(lambda: 1 if expired() else 0, every)
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "interrupted" in str(exc) and expired():
            raise Interrupted(str(exc)) from None
        raise
    finally:
        conn.set_progress_handler(None, every)


__all__ = ["CHECK_EVERY", "Interrupted", "interrupt_at"]
