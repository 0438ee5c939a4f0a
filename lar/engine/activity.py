"""Which searches are running: an event set while none is (the background builder, the call
log's writer and the collector wait for it), entered and left by each search."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class SearchActivity:
    """``with activity.searching():`` around a search; ``idle`` is set while no search runs."""

    def __init__(self):
        self.idle = threading.Event()
        self.idle.set()
        self._running = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        return self._running

    @contextmanager
    def searching(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
            self.idle.clear()
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self.idle.set()


__all__ = ["SearchActivity"]
