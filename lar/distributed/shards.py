"""How a sharded layer splits its units and merges what the shards return; no Ray here.

A unit's shard is a function of its content hash only (``shard_of``), so every search, every
restart and every process agrees on it without a shared table, and a unit keeps its shard when
others come and go. The merge is exact: each shard returns its best ``k`` chunks, so the best
``k`` over all shards are among them. What a layer's search reports about its shards
(:func:`report_run`) and how the engine stops a layer's actors (:func:`close_layer_shards`) are
the same for every sharded layer (``late``, ``dense``, ``static``).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

__all__ = ["shard_of", "split", "merge_top", "ShardRun", "report_run", "close_layer_shards"]


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


def report_run(budget: Any, run: ShardRun) -> None:
    """The run on a layer's search budget: detail ``shards``, and a warning naming the shards
    whose hits are missing (their units count as not covered)."""
    budget.detail("shards", run.to_dict())
    if run.late or run.failed:
        budget.warn(f"shards not in at the deadline: late {list(run.late)}, failed "
                    f"{[i for i, _ in run.failed]}; their units are not covered")


def close_layer_shards(layers: Iterable[Any]) -> list[str]:
    """Stop the shard actors every layer started (its ``sharded``: an object with ``close()``;
    the layer's next search starts them again). Returns the names of the layers stopped; a
    layer whose actors are already gone (its cluster shut down) is stopped all the same."""
    stopped = []
    for layer in layers:
        sharded = getattr(layer, "sharded", None)
        if sharded is None:
            continue
        layer.sharded = None
        try:
            sharded.close()
        except Exception:  # noqa: BLE001 - the cluster may be gone; nothing left to stop
            pass
        stopped.append(getattr(layer, "name", "?"))
    return stopped
