"""The order a late scan visits units in.

The cheap layers' candidates come first, in their order (a scan cut short by the timebox has
scored what matters). Then the units already in memory, in the order they lie in the layer's
token arena (:mod:`lar.layers.late.arena`): consecutive units there are one contiguous slice, so
each block is a view of the arena and the kernel reads it without the gather copy
(``lar.layers.late.scan``); visiting them by usage instead scatters every block over the arena and
costs a copy of all the tokens a call. Units not in memory yet follow, most used first, then by
path; a scan appends them to the arena in that order.
"""
from __future__ import annotations

from typing import Iterable, Mapping


def scan_order(hashes: Iterable[str], candidates: Iterable[str], resident: Mapping[str, int],
               usage: Mapping[str, tuple], paths: Mapping[str, str]) -> list[str]:
    """``hashes`` in scan order. ``candidates``: the cheap layers' units, best first (those not in
    ``hashes`` are ignored); ``resident``: each in-memory unit's position in the arena;
    ``usage``: ``{hash: (hits, fetches, ...)}`` (a fetch counts three hits)."""
    pool = set(hashes)
    first = list(dict.fromkeys(h for h in candidates if h in pool))
    seen = set(first)
    rest = [h for h in pool if h not in seen]
    in_memory = sorted((h for h in rest if h in resident), key=resident.__getitem__)

    def key(h: str):
        hits, fetches = usage.get(h, (0, 0))[:2]
        return (-(hits + 3 * fetches), paths.get(h, ""), h)

    later = sorted((h for h in rest if h not in resident), key=key)
    return first + in_memory + later


__all__ = ["scan_order"]
