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


class PassRate:
    """How fast a layer's batched encoder pass goes (bytes of text a second, measured), so that
    a build with a deadline asks for batches that fit the time left: a batch abandoned at the
    deadline keeps none of its work, and one sized past every slice of a build in short slices
    (the harness's progress loop, a search's spare time) would never finish. Unmeasured, the
    first batch is small; an abandoned one halves the rate."""

    FIRST_BYTES = BATCH_BYTES // 8
    SHARE = 0.5  # of the time left a batch may take

    def __init__(self):
        self.bytes_per_s: float | None = None

    def observe(self, n_bytes: int, seconds: float) -> None:
        if seconds > 0 and n_bytes > 0:
            r = n_bytes / seconds
            self.bytes_per_s = r if self.bytes_per_s is None else 0.5 * (self.bytes_per_s + r)

    def missed(self) -> None:
        self.bytes_per_s = (self.bytes_per_s or self.FIRST_BYTES) / 2

    def budget_bytes(self, seconds_left: float) -> int:
        if self.bytes_per_s is None:
            return self.FIRST_BYTES
        return int(max(0.0, self.bytes_per_s * seconds_left * self.SHARE))


def fitted_batches(units: Sequence[Unit], deadline: float, rate: PassRate,
                   max_units: int = BATCH_UNITS) -> Iterator[list[Unit]]:
    """:func:`batches` whose size is chosen as each batch is asked for: at most what
    ``rate`` says fits in its share of the time left before ``deadline`` (at least one unit;
    a batch of one is built without the shared pass)."""
    i = 0
    while i < len(units):
        cap = min(BATCH_BYTES, rate.budget_bytes(deadline - time.monotonic()))
        run, size = [units[i]], units[i].size
        i += 1
        while i < len(units) and len(run) < max_units and size + units[i].size <= cap:
            size += units[i].size
            run.append(units[i])
            i += 1
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
