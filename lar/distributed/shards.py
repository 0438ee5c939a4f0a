"""How a sharded layer splits its units and merges what the shards return; no Ray here.

A unit's shard is a function of its content hash only (``shard_of``), so every search, every
restart and every process agrees on it without a shared table, and a unit keeps its shard when
others come and go. The merge is exact: each shard returns its best ``k`` chunks, so the best
``k`` over all shards are among them.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterable, Sequence

__all__ = ["shard_of", "split", "merge_top", "ShardRun"]


def shard_of(h: str, n: int) -> int:
    """The shard (0 .. n-1) of the unit whose content hash is ``h`` (hex)."""
    return int(h[:12], 16) % n


def split(ordered: Iterable[str], n: int) -> list[list[str]]:
    """``ordered`` (the layer's priority order) cut into ``n`` shards, each in that order."""
    out: list[list[str]] = [[] for _ in range(n)]
    for h in ordered:
        out[shard_of(h, n)].append(h)
    return out


def merge_top(tops: Iterable[Sequence[tuple[float, str, int]]], k: int) -> list[tuple[float, str, int]]:
    """The ``k`` best ``(score, hash, chunk)`` of several shards' lists, best first, ties broken
    as the single-process scan breaks them (its heap keeps the larger tuple; it sorts by
    ``(-score, hash, chunk)``)."""
    best = heapq.nlargest(k, (t for top in tops for t in top))
    return sorted(best, key=lambda t: (-t[0], t[1], t[2]))


@dataclass(frozen=True)
class ShardRun:
    """One search over the shards: who answered, who was late, and what it covered."""

    shards: int
    answered: tuple[int, ...] = ()
    late: tuple[int, ...] = ()  # still scanning at the deadline (their hits are not in)
    failed: tuple[tuple[int, str], ...] = ()  # (shard, why): dead or restarting actor
    units: int = 0  # units sent to the shards
    scanned: int = 0  # units the answered shards scanned
    per_shard: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def coverage(self) -> float:
        """Scanned units over the units sent (1.0 when nothing was sent)."""
        return self.scanned / self.units if self.units else 1.0

    def to_dict(self) -> dict:
        return {"shards": self.shards, "answered": list(self.answered), "late": list(self.late),
                "failed": [list(f) for f in self.failed], "units": self.units,
                "scanned": self.scanned, "coverage": round(self.coverage, 4),
                "per_shard": list(self.per_shard)}
