"""Change detection: keeps the file index in line with the folder and queues what changed.

The always-current layers double as the change detector (a stat check of the files they
matched, ``detect``); a full stat pass runs in the background when the last one is older than
``refresh_interval`` (``maybe_rescan``), or inline before the building layers answer when it is
older than the engine's ``freshness``. Changed paths are queued for the building layers, which
build them first; ``prune`` drops the paths every building layer has caught up with.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Callable, Iterable, Sequence

from lar.core.layer import BaseLayer, Unit
from lar.engine import freshness
from lar.store import FileIndex
from lar.store.scanner import Scanner
from lar.store.watch import FolderWatch


class ChangeTracker:
    """The scan state of one engine: the last full scan's report, and the queue of changed paths."""

    def __init__(self, scanner: Scanner, index: FileIndex, refresh_interval: float,
                 submit: Callable[..., concurrent.futures.Future], watch: FolderWatch):
        self.scanner = scanner
        self.index = index
        self.refresh_interval = float(refresh_interval)
        self._submit = submit  # runs a background scan (the engine's background executor)
        self.watch = watch  # told when a full scan starts and what it listed
        self._changed: list[str] = []
        self._lock = threading.Lock()
        self.last_scan: dict[str, Any] = {}
        self.last_scan_at = 0.0
        self._scan_future: concurrent.futures.Future | None = None

    def scan(self, initial: bool = False) -> dict[str, Any]:
        """Full scan. Returns its report; changes found after the first scan are queued."""
        self.watch.begin()
        report = self.index.recovering(self.scanner.scan)
        self.watch.arm(report.paths)
        if not initial:
            self.queue(report.changed_paths)
        self.last_scan = report.to_dict()
        self.last_scan_at = time.monotonic()
        return self.last_scan

    def detect(self, paths: Sequence[str]) -> dict[str, str | None]:
        """Stat-check ``paths`` now: {path: current hash, or None when gone}; changes are queued."""
        # within a search's deadline (lar.engine.freshness); a damaged index is repaired
        report = self.index.recovering(lambda: freshness.refresh(self.scanner, paths))
        self.queue(report.changed_paths)
        return {p: report.current.get(p) for p in paths}

    def queue(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        if paths:
            with self._lock:
                self._changed.extend(paths)

    def forget_scan(self) -> None:
        """The next call scans again (e.g. a damaged file index was set aside and made anew)."""
        self.last_scan_at = 0.0

    def scan_age(self) -> float:
        """Seconds since the last full scan ended."""
        return time.monotonic() - self.last_scan_at

    def maybe_rescan(self) -> None:
        """Start a background scan when the last one is older than ``refresh_interval`` and
        none is running."""
        busy = self._scan_future is not None and not self._scan_future.done()
        if self.scan_age() > self.refresh_interval and not busy:
            self._scan_future = self._submit(self.scan)

    def pending(self) -> list[str]:
        """The queued paths, each once, oldest first."""
        with self._lock:
            return list(dict.fromkeys(self._changed))

    def prune(self, layers: Sequence[BaseLayer]) -> None:
        """Drop queued paths that every building layer in ``layers`` has caught up with."""
        building = [l for l in layers if not l.always_current]
        paths = self.pending()
        if not paths:
            return
        recs = self.index.get_many(paths)
        keep = []
        for p in paths:
            r = recs.get(p)
            if r is None or r.deleted:
                continue
            unit = [Unit(p, r.hash, r.size)]
            if any(l.pending(unit) for l in building):
                keep.append(p)
        with self._lock:
            self._changed = keep
