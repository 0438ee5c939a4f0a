"""The background builder's guaranteed share of the time while searches keep coming.

The background builder yields to searches: it builds while no search runs (the engine's
``idle`` event). A steady stream of overlapping searches (eight threads searching in a loop)
leaves no idle moment, and the builder used to starve (8 units in 40 s). So it waits for an idle
moment only so long: after a unit that took ``t`` seconds it waits at most
``t * (1 - share) / share`` (within ``[min_wait, max_wait]``) and then builds its next unit
among the searches. Over a busy stretch that gives it about ``share`` of the wall time (units of
the cheap layers take milliseconds, so the searches lose little), and all of it while idle.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

from lar.core.errors import ConfigError

__all__ = ["BuildShare"]


@dataclass
class BuildShare:
    """When the background builder may build its next unit (see the module docstring)."""

    share: float = 0.2
    min_wait: float = 0.02
    max_wait: float = 5.0
    last_unit: float = 0.0  # seconds the last unit took

    def __post_init__(self) -> None:
        if not (0.0 < self.share <= 1.0 and 0.0 <= self.min_wait <= self.max_wait):
            raise ConfigError("BuildShare: need 0 < share <= 1 and 0 <= min_wait <= max_wait")

    def patience(self) -> float:
        """How long the builder waits for an idle moment before it builds anyway."""
        wait = self.last_unit * (1.0 - self.share) / self.share
        return min(self.max_wait, max(self.min_wait, wait))

    def wait_turn(self, idle: threading.Event, stop: threading.Event) -> bool:
        """Wait until no search runs or the builder's patience is spent; False when ``stop``
        was set meanwhile (the builder is closing)."""
        idle.wait(self.patience())
        return not stop.is_set()

    def built(self, seconds: float) -> None:
        """Record how long the unit just built took (what the next patience is drawn from)."""
        self.last_unit = max(0.0, float(seconds))
