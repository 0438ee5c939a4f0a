"""Builds at the encoder's speed: the units of a build pass, grouped so that one encoder pass
serves several of them (``prepare_units``, e.g. the shared MiniLM pass of ``dense`` and ``late``).

A layer with ``prepare_units(units)`` gets the next batch of its pending units before they are
built one by one: it encodes them together (windows of all of them batched, longest first) and
stores each unit's encoding, so each ``build_one`` only reads and indexes; every unit stays one
atomic step (a stop loses at most the batch being encoded, whose units stay pending). A layer
without the hook builds unit by unit as before.

``LAR_BUILD_BATCH=0`` turns batching off (each unit then has its own encoder pass).
"""
from __future__ import annotations

import os
import time
from typing import Iterator, Sequence

from lar.core.deadline import work_limit
from lar.core.errors import DeadlineExceeded
from lar.core.layer import Unit, implements

ENV_BUILD_BATCH = "LAR_BUILD_BATCH"
#: a batch ends at this many bytes of text (about four forward passes of 32 MiniLM windows:
#: measured, a batch of 24 KB held ~27 windows of SciFact abstracts, less than one full pass,
#: and its short windows then shared a pass with long ones) ...
BATCH_BYTES = 96_000
#: ... or this many units, whichever comes first
BATCH_UNITS = 64
#: the background builder's batches are smaller: a step it cannot stop in holds a core longer
BACKGROUND_BATCH_UNITS = 8


def batching_on() -> bool:
    return os.environ.get(ENV_BUILD_BATCH, "1").strip().lower() not in ("0", "false", "no", "off")


def batches(units: Sequence[Unit], max_bytes: int = BATCH_BYTES,
            max_units: int = BATCH_UNITS) -> Iterator[list[Unit]]:
    """``units`` in order, cut into runs of at most ``max_units`` units and about ``max_bytes``
    bytes (a run always holds at least one unit, however large)."""
    run: list[Unit] = []
    size = 0
    for u in units:
        if run and (len(run) >= max_units or size + u.size > max_bytes):
            yield run
            run, size = [], 0
        run.append(u)
        size += u.size
    if run:
        yield run


def can_prepare(layer) -> bool:
    return batching_on() and implements(layer, "prepare_units")


def prepare(layer, units: Sequence[Unit], deadline: float | None, cancel=None) -> float | None:
    """Run ``layer.prepare_units(units)`` under the work limit: the seconds it took, or None
    when the deadline (or ``cancel``) abandoned it (its units stay pending). Any other error
    is left to the units' own builds, which record it unit by unit."""
    t0 = time.monotonic()
    try:
        with work_limit(deadline, cancel):
            layer.prepare_units(list(units))
    except DeadlineExceeded:
        return None
    except Exception:  # noqa: BLE001 - one bad unit must not fail the batch: build_one says why
        pass
    return time.monotonic() - t0
