"""The windows an abandoned encoder pass had finished, kept so that the next pass resumes.

An encoder pass checks the caller's work limit between batches (``lar.core.deadline``) and is
abandoned at its deadline. Without memory of what it had done, a unit whose pass outlasts every
build slice never finishes: a build in 2 s slices (the harness's) abandoned the same 75 KB paper
at each slice's deadline and started it again from its first window in the next, so the layer
stayed at 9 of 40 units for as long as it was given. ``PartialPasses`` keeps the finished
windows' results of the last few abandoned passes, keyed by the windows' token ids; a pass over
the same windows takes them back and encodes only the rest. Each resumed batch is one the
uninterrupted pass would have run with the same windows, so the results are the same.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Sequence

__all__ = ["PartialPasses", "windows_key"]


def windows_key(windows: Sequence[Any]) -> str:
    """A digest of the windows' token ids (``Window.ids``), in order."""
    h = hashlib.blake2b(digest_size=16)
    for w in windows:
        ids = w.ids
        h.update(len(ids).to_bytes(8, "little"))
        h.update(ids.tobytes())
    return h.hexdigest()


class PartialPasses:
    """The finished results of at most ``keep`` abandoned passes (the most recent ones)."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = int(keep)
        self._parts: "OrderedDict[str, list]" = OrderedDict()
        self._guard = threading.Lock()
        self.resumed = 0  # windows taken back instead of encoded again, in this process

    def take(self, key: str, n: int) -> list:
        """The results list of a pass over ``n`` windows: what an abandoned pass with ``key``
        had finished (None where it had not), or all None. The kept copy is removed."""
        with self._guard:
            got = self._parts.pop(key, None)
        if got is None or len(got) != n:
            return [None] * n
        self.resumed += sum(r is not None for r in got)
        return got

    def put(self, key: str, results: list) -> None:
        """Keep an abandoned pass's ``results`` (None for the windows it did not reach)."""
        if self.keep < 1 or all(r is None for r in results):
            return
        with self._guard:
            self._parts[key] = results
            self._parts.move_to_end(key)
            while len(self._parts) > self.keep:
                self._parts.popitem(last=False)
