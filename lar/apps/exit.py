"""The CLI's exit: prompt, even when work abandoned at a deadline is still running.

Work a timebox cut off may go on in a worker thread for a while (a model's load cannot be
interrupted; ``lar.engine.warmup``), and the interpreter joins such threads before it exits: a
``lar search`` that answered in 2 s took 28 s to exit. The CLI owns its process, so once the
engine is closed (the call log written, the index closed) and its output flushed, it exits at
once when lar's worker threads are still busy after a short grace. That is safe by design:
every unit is one atomic step, and a process killed mid-unit loses at most that unit.
"""
from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["GRACE_S", "busy_threads", "exit_promptly"]

GRACE_S = 0.3  # how long other threads get to finish before the process exits anyway


def busy_threads() -> list[threading.Thread]:
    """Every other thread still alive: the interpreter waits at exit for non-daemon threads and
    for thread-pool workers (asyncio's ``to_thread`` included, though those are daemon threads),
    and a daemon thread still in native code when the interpreter finalizes can abort it."""
    me = threading.current_thread()
    return [t for t in threading.enumerate() if t is not me and t.is_alive()
            and t is not threading.main_thread()]


def exit_promptly(rc: int) -> int:
    """Return ``rc`` when no worker thread is busy (a normal exit follows); otherwise flush the
    output and end the process now with ``rc``."""
    until = time.monotonic() + GRACE_S
    for t in busy_threads():
        t.join(max(0.0, until - time.monotonic()))
    if not busy_threads():
        return rc
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)
