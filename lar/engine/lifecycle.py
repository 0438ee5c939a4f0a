"""Engines left open at interpreter exit are closed before the interpreter finalizes.

An engine runs daemon threads: its asyncio loop, the background builder, the call log's writer
(which tokenises in Rust with the GIL released). A script that searches and exits without
``eng.close()`` used to leave them running into finalization, where a thread coming back from
native code is stopped by force: with a Rust or C++ frame on its stack that aborts the process
(``FATAL: exception not rethrown``, rc 134). So every engine registers here (weakly: an engine
that is garbage collected is not kept alive) and an ``atexit`` hook closes those still open:
each thread is asked to stop and joined with a bound (``Engine.close``), while the interpreter
is still whole. ``atexit`` runs after the interpreter joined its non-daemon worker threads, and
before daemon threads are stopped.
"""
from __future__ import annotations

import atexit
import threading
import weakref
from typing import Any

__all__ = ["forget", "open_engines", "register"]

_OPEN: "weakref.WeakSet[Any]" = weakref.WeakSet()
_LOCK = threading.Lock()


def register(engine: Any) -> None:
    """Close ``engine`` at interpreter exit unless it was closed before (``forget``)."""
    with _LOCK:
        _OPEN.add(engine)


def forget(engine: Any) -> None:
    """``engine`` was closed: nothing to do for it at exit."""
    with _LOCK:
        _OPEN.discard(engine)


def open_engines() -> list[Any]:
    """The engines still open (registered and not closed)."""
    with _LOCK:
        return list(_OPEN)


def close_all() -> None:
    """Close every engine still open; an engine that fails to close does not stop the rest."""
    for engine in open_engines():
        try:
            engine.close()
        except Exception:  # exiting anyway: closing is best effort
            pass


atexit.register(close_all)
