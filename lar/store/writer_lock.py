"""The single writer across processes: an ``flock`` on ``writer.lock`` in the state dir.

The file holds the pid of the process that has the lock, so that a writer that waited too long
can say who holds it. Waiting lasts ``lock_timeout`` at most, and never past the work limit in
force (``lar.core.deadline``: a search's deadline).
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from lar.core import deadline
from lar.core.errors import StateLockedError


class WriterLock:
    def __init__(self, lock_path: Path, state_dir: Path, lock_timeout: float):
        self.lock_path = lock_path
        self.state_dir = state_dir
        self.lock_timeout = lock_timeout
        self._fh = None

    def acquire(self) -> None:
        """Take the lock, or raise ``StateLockedError`` naming the process that holds it."""
        fh = open(self.lock_path, "a+")
        wait = deadline.remaining(self.lock_timeout)
        until = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= until:
                    fh.seek(0)
                    holder = fh.read().strip() or "unknown"
                    fh.close()
                    raise StateLockedError(
                        f"another process (pid {holder}) is writing the lar index in "
                        f"{self.state_dir}; waited {wait:.1f}s. Wait for it to "
                        "finish, or open the engine with another state dir"
                    ) from None
                time.sleep(0.02)
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()
