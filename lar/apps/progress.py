"""Progress bars for long operations (``lar build``, ``lar demo``): one tqdm bar per layer with
units done, rate and time left, on stderr, never on stdout (where ``--json`` goes).

Shown when stderr is a terminal or when asked (``--progress``); ``--no-progress`` (or not a
terminal) shows none. ``BuildProgress`` is the ``progress(layer, done, total)`` callback
``Engine.build`` takes.
"""
from __future__ import annotations

import sys
from typing import Any


def wanted(flag: bool | None) -> bool:
    """``--progress`` (True), ``--no-progress`` (False), or neither (None: when stderr is a TTY)."""
    if flag is not None:
        return bool(flag)
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class BuildProgress:
    """One bar per layer as ``Engine.build`` reaches it; ``close()`` ends the last one."""

    def __init__(self, enabled: bool = True, stream: Any = None):
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._bar = None
        self._layer: str | None = None

    def __call__(self, layer: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if layer != self._layer:
            self.close()
            from tqdm import tqdm

            self._layer = layer
            self._bar = tqdm(total=total, desc=f"build {layer}", unit="unit", file=self.stream,
                             dynamic_ncols=True, leave=True, mininterval=0.5)
        if self._bar is not None and done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar, self._layer = None, None

    def __enter__(self) -> "BuildProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["BuildProgress", "wanted"]
