"""The independent original-text route (second seed, section 4.5).

``screen(engine, screener)`` enumerates the permitted units of a snapshot without any relevance
match, batches them with their source addresses, passes each batch to a screening callable
that may return several candidates or none, and records processed and unprocessed extent and
batch outcomes so that a later call can resume. See docs/screening.md.
"""
from __future__ import annotations

from lar.apps.screening.batches import DEFAULT_BATCH_BYTES, ORDERS, BatchItem
from lar.apps.screening.candidates import ScreenCandidate, Unknown
from lar.apps.screening.errors import (CandidateError, CorruptRunError, RunLockedError, RunNotFoundError,
                     ScreenerFailedError, ScreeningConfigError, ScreeningError)
from lar.apps.screening.route import list_runs, load_run, screen
from lar.apps.screening.run import SIGNAL, BatchRecord, ItemRecord, ScreeningRun, SnapshotUnit

__all__ = [
    "BatchItem", "BatchRecord", "CandidateError", "CorruptRunError", "DEFAULT_BATCH_BYTES",
    "ItemRecord", "ORDERS", "RunLockedError", "RunNotFoundError", "SIGNAL", "ScreenCandidate",
    "ScreenerFailedError", "ScreeningConfigError", "ScreeningError", "ScreeningRun",
    "SnapshotUnit", "Unknown", "list_runs", "load_run", "screen",
]
