"""Quiet a false alarm of CPython's asyncio child watcher.

On Python 3.11 a search's ripgrep child can be reaped twice: the watcher thread waits on it
with ``waitpid(pid, 0)``, while ``subprocess.Popen.poll()`` — which asyncio itself calls when a
search is cancelled at its deadline while the child is starting (the transport's ``close()``)
and when the deadline kills it (``send_signal`` polls first) — can reap it first. The watcher
then logs "Unknown child process pid N, will report returncode 255" on the ``asyncio`` logger.
In both paths lar ignores the child's return code (the run is cancelled or marked killed), so
the line says nothing to the user: :func:`install` drops exactly that message and nothing else.
"""
from __future__ import annotations

import logging

MESSAGE = "Unknown child process pid %d, will report returncode 255"


class UnknownChildFilter(logging.Filter):
    """Drops the watcher's "Unknown child process pid" record; lets every other one through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != MESSAGE


def install(logger_name: str = "asyncio") -> UnknownChildFilter:
    """Add the filter to the ``asyncio`` logger once (idempotent); returns the one installed."""
    logger = logging.getLogger(logger_name)
    for f in logger.filters:
        if isinstance(f, UnknownChildFilter):
            return f
    f = UnknownChildFilter()
    logger.addFilter(f)
    return f


__all__ = ["MESSAGE", "UnknownChildFilter", "install"]
