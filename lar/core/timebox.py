"""Parsing durations such as ``200ms``, ``0.5s``, ``2m`` or plain seconds, and the deadline
reserve (the measured slice of a timebox kept for the work after the layers)."""
from __future__ import annotations

import re

from lar.core.errors import ConfigError

_DUR = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|sec|m|min)?\s*$")
_MULT = {None: 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0}


def parse_duration(value) -> float:
    """Seconds from a number or a string like '200ms', '1.5s', '2m'. Must be > 0."""
    if isinstance(value, bool):
        raise ConfigError(f"a duration must be a number or a string like '200ms', got {value!r}")
    if isinstance(value, (int, float)):
        secs = float(value)
    elif isinstance(value, str):
        m = _DUR.match(value)
        if not m:
            raise ConfigError(f"cannot read duration {value!r}; use e.g. '200ms', '0.5s', '2m' or 0.5")
        secs = float(m.group(1)) * _MULT[m.group(2)]
    else:
        raise ConfigError(f"a duration must be a number or a string like '200ms', got {type(value).__name__}")
    if not secs > 0 or secs != secs or secs == float("inf"):
        raise ConfigError(f"a duration must be positive and finite, got {value!r}")
    return secs


class DeadlineReserve:
    """The slice of a timebox kept back for the work after the layers (the final fusion and
    enrichment of the hits), so that a call returns by its deadline: the layers get
    ``deadline - reserve``.

    The reserve is measured, not guessed: ``observe`` records how long that work took on a past
    call; ``reserve(timebox)`` is ``headroom`` times the ``quantile`` of the last ``window``
    observations (``initial`` before any), at least ``floor`` and at most ``cap`` of the timebox
    (a tiny timebox still leaves the layers most of it)."""

    def __init__(self, *, initial: float = 0.01, floor: float = 0.002, cap: float = 0.25,
                 quantile: float = 0.9, headroom: float = 1.25, window: int = 32):
        if not (0 < cap <= 1 and 0 <= quantile <= 1 and window >= 1 and floor >= 0 and initial >= 0):
            raise ConfigError("DeadlineReserve: need 0 < cap <= 1, 0 <= quantile <= 1, window >= 1, "
                              "floor >= 0 and initial >= 0")
        self.initial, self.floor, self.cap = float(initial), float(floor), float(cap)
        self.quantile, self.headroom, self.window = float(quantile), float(headroom), int(window)
        self._seen: list[float] = []

    def observe(self, seconds: float) -> None:
        """Record the post-layer cost of one call (negative or NaN values are ignored)."""
        if seconds >= 0:
            self._seen.append(float(seconds))
            del self._seen[: -self.window]

    def __len__(self) -> int:
        """How many observations the reserve is drawn from."""
        return len(self._seen)

    def estimate(self) -> float:
        """The measured post-layer cost the reserve is drawn from (before floor and cap)."""
        if not self._seen:
            return self.initial
        xs = sorted(self._seen)
        return xs[min(len(xs) - 1, int(self.quantile * (len(xs) - 1) + 0.5))] * self.headroom

    def reserve(self, timebox: float) -> float:
        """Seconds of ``timebox`` kept back from the layers."""
        return min(self.cap * timebox, max(self.floor, self.estimate()))
