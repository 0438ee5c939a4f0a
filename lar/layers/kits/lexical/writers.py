"""Who owns a segment folder that no layout names yet: uncommitted work is private to its writer.

A segment id names the process that built it (``<time>-p<pid>-<random>``); this process keeps
the ids it is still building (``claim`` … ``release``). A folder that no layout names is garbage
(``removable``) when its writer is this process and no longer builds it, when its writer is
dead, or when it is older than ``STALE_AFTER_S``; another live writer's folder is left alone.
``locked`` is the store's cross-process lock (an ``flock``), held while the layout changes and
while garbage is collected.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from pathlib import Path
from typing import Iterator

TMP = ".tmp-"  # a folder being written: renamed to its id when complete
# a folder no layout names, whose writer is alive, is left alone for this long (its writer may
# still commit it); past it, it is garbage whoever made it
STALE_AFTER_S = 3600.0
_OWNER = re.compile(r"-p(\d+)-")
# segment ids built in this process and not yet committed (every SegmentStore of the process)
_in_flight: set[str] = set()
_in_flight_lock = threading.Lock()


def owner_pid(seg_id: str) -> int | None:
    """The process that built segment ``seg_id`` (None for ids of older lar versions)."""
    m = _OWNER.search(seg_id)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def claim(seg_id: str) -> None:
    """Mark ``seg_id`` in flight in this process: no garbage collection removes it."""
    with _in_flight_lock:
        _in_flight.add(seg_id)


def release(seg_id: str) -> None:
    with _in_flight_lock:
        _in_flight.discard(seg_id)


def removable(path: Path) -> bool:
    """Whether a segment folder that no layout names is garbage (see the module's text)."""
    seg_id = path.name[len(TMP):] if path.name.startswith(TMP) else path.name
    pid = owner_pid(seg_id)
    if pid is None:
        return True  # left by an older lar, which removed such folders itself
    if pid == os.getpid():
        with _in_flight_lock:
            return seg_id not in _in_flight
    if not pid_alive(pid):
        return True
    try:
        return time.time() - path.stat().st_mtime > STALE_AFTER_S
    except OSError:
        return False


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (created when missing)."""
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
