"""Parsing durations such as ``200ms``, ``0.5s``, ``2m`` or plain seconds."""
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
