"""Change detection within a search's deadline.

A search brings the file index in line with the folder before it answers (a stat pass, and a
stat check of the files its always-current layers matched); that writes the index, under the
writer lock. While another process holds that lock (a long ``lar build``, a second engine), the
search waits for it no longer than its own deadline (``lar.core.deadline``; the file index bounds
its waits by the work limit in force): it then answers from the committed state, which readers
always see whole (SQLite WAL), and says so on its runs: "change detection skipped".

With the lock busy a changed file cannot be recorded, so a stat check answers from the committed
records: a file whose stat still matches its record keeps its hash, a file that changed since is
left out of this search's hits (its committed hash would point at text it no longer has), and
the next search detects it.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import time
from typing import Callable, Iterator, Sequence

from lar.core import deadline
from lar.core.errors import StateLockedError
from lar.core.types import LayerRun, RunState
from lar.store.scanner import ScanReport, Scanner

__all__ = ["LOCK_SHARE", "SKIPPED_NOTE", "annotate", "refresh", "scan", "search_detection"]

SKIPPED_NOTE = ("change detection skipped: {why}; answered from the committed file index "
                "(files changed since are left out until a later search detects them)")

#: the share of a search's remaining time that change detection may wait for the writer lock
LOCK_SHARE = 0.25

_SKIPS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("lar_detection_skips",
                                                                         default=None)


@contextlib.contextmanager
def search_detection() -> Iterator[list[str]]:
    """Collect, for the search run in this block, why change detection was skipped (if it was)."""
    skips: list[str] = []
    token = _SKIPS.set(skips)
    try:
        yield skips
    finally:
        _SKIPS.reset(token)


def _skipped(exc: StateLockedError) -> bool:
    """Note a lock wait that ended at a search's deadline; False outside a search (re-raise)."""
    skips = _SKIPS.get()
    if skips is None or deadline.current().deadline is None:
        return False
    why = str(exc).split(";")[0]
    if why not in skips:
        skips.append(why)
    return True


def _lock_wait():
    """In a search, the writer lock is waited for :data:`LOCK_SHARE` of the time left at most,
    and not again once this search found it busy: the layers answer in the rest."""
    if _SKIPS.get() is None or deadline.current().deadline is None:
        return contextlib.nullcontext()
    left = deadline.current().left()
    return deadline.work_limit(time.monotonic() + (0.0 if _SKIPS.get() else LOCK_SHARE * left))


def committed(scanner: Scanner, paths: Sequence[str]) -> ScanReport:
    """What a stat check reports from the committed records alone (nothing written)."""
    report = ScanReport()
    known = scanner.index.get_many(list(paths))
    for rel in paths:
        rec = known.get(rel)
        try:
            st = os.stat(os.path.join(str(scanner.root), rel), follow_symlinks=False)
        except OSError:
            st = None
        same = rec is not None and st is not None and rec.same_stat(st)
        report.current[rel] = rec.hash if same else None
        report.unchanged += int(same)
    return report


def refresh(scanner: Scanner, paths: Sequence[str]) -> ScanReport:
    """``scanner.refresh(paths)``, or, when the writer lock stays busy until the search's
    deadline, the committed state (:func:`committed`) and a note for the search's report."""
    try:
        with _lock_wait():
            return scanner.refresh(paths)
    except StateLockedError as exc:
        if not _skipped(exc):
            raise
        return committed(scanner, paths)


def scan(index_now: Callable[[], object]) -> None:
    """``index_now()`` (the stat pass), skipped with a note when the writer lock stays busy
    until the search's deadline."""
    try:
        with _lock_wait():
            index_now()
    except StateLockedError as exc:
        if not _skipped(exc):
            raise


def annotate(runs: Sequence[LayerRun], skips: Sequence[str]) -> tuple[LayerRun, ...]:
    """``runs`` with the skipped-detection note on every run that answered."""
    if not skips:
        return tuple(runs)
    note = SKIPPED_NOTE.format(why="; ".join(skips))
    return tuple(dataclasses.replace(r, notes=tuple(r.notes) + (note,))
                 if r.state in (RunState.RAN, RunState.ABORTED) else r for r in runs)
