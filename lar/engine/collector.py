"""Python's cyclic garbage collector kept out of a search's deadline.

A full (generation 2) collection walks every tracked object of the process. After an engine
opened and built, that is ~100k objects, and the pause, 60-85 ms measured on 2 cores, lands in
whichever search happens to allocate past the collector's threshold: it was the largest part of
the deadline overshoot at small timeboxes (``benchmarks/results/2026-12-03-deadline-gc.md``).

``settle()`` runs where a pause costs no deadline: when an engine has opened, after an explicit
build, and when the background builder runs out of work. It collects once (a frozen object that
became cyclic garbage is freed then) and freezes the survivors (``gc.freeze``): the collections a
search triggers walk only what was allocated since. Objects are still freed by reference
counting as usual; only cycles among frozen objects wait for the next ``settle``.

The collector is the process's, not the engine's: ``LAR_GC_FREEZE=0`` leaves it alone (the test
suite does, so that a thousand engine opens do not each pay a full collection)."""
from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass

from lar.engine.settings import ENV_GC_FREEZE, env_flag

_lock = threading.Lock()
#: a settle is skipped until this many times its last cost has passed since it ended: repeated
#: builds in slices (the harness builds in 1 s slices) pay at most ~5 % of their time for it
SPACING = 20.0
_last = {"end": float("-inf"), "cost": 0.0}


@dataclass(frozen=True)
class Settled:
    """One settle: whether it ran, how long the collection took, objects frozen after it."""

    ran: bool
    seconds: float = 0.0
    frozen: int = 0


def enabled() -> bool:
    """Whether lar manages the collector (on unless ``LAR_GC_FREEZE=0``)."""
    return env_flag(ENV_GC_FREEZE)


def settle(force: bool = False) -> Settled:
    """Collect everything once (frozen objects included), then freeze the survivors; skipped
    (unless ``force``) while less than ``SPACING`` times the last settle's cost has passed."""
    if not enabled():
        return Settled(False)
    with _lock:
        t0 = time.perf_counter()
        if not force and t0 - _last["end"] < SPACING * _last["cost"]:
            return Settled(False)
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        t1 = time.perf_counter()
        _last["end"], _last["cost"] = t1, t1 - t0
        return Settled(True, t1 - t0, gc.get_freeze_count())


__all__ = ["Settled", "enabled", "settle"]
