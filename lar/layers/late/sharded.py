"""The late layer's scan over shards on Ray actors (option ``late_shards`` > 0, docs/ray.md).

:class:`LateShards` owns the :class:`lar.distributed.ray_scan.ShardedScan` of the layer (started
on its first search) and turns the shards' answers into one :class:`ScanResult`: the exact merge
of their top ``k`` (:func:`lar.distributed.shards.merge_top`), every unit they scanned, their
score moments summed; a late or failed shard makes the result ``aborted`` (its units are not
covered) and the :class:`~lar.distributed.shards.ShardRun` says which.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from lar.distributed.shards import ShardRun, close_layer_shards, merge_top, report_run
from lar.layers.late.scan import ScanResult, scan_units
from lar.layers.late.shard_source import SidecarSource

__all__ = ["LateShards", "merge_results", "scan_on_shards", "close_shards"]


def merge_results(results: Sequence[ScanResult], k: int) -> ScanResult:
    """One scan result from the shards' (each over its own units)."""
    out = ScanResult()
    out.top = merge_top((r.top for r in results), k)
    for r in results:
        out.scanned.extend(r.scanned)
        out.unreadable.extend(r.unreadable)
        out.tokens += r.tokens
        out.blocks += r.blocks
        out.aborted = out.aborted or r.aborted
        out.moments.n += r.moments.n
        out.moments.s1 += r.moments.s1
        out.moments.s2 += r.moments.s2
    return out


class LateShards:
    """``n`` shard actors over the sidecars under ``root``; ``scan`` is the shards' scan
    function (the layer's own; a test wraps it)."""

    def __init__(self, n: int, root: Path, model_id: str | None, address: str | None = None,
                 max_restarts: int = 4, scan=scan_units):
        from lar.distributed.ray_scan import ShardedScan

        self.root = Path(root)
        self.scanner = ShardedScan(n, SidecarSource(self.root, model_id), scan,
                                   address=address, max_restarts=max_restarts)

    def scan(self, q, weights, ordered: Sequence[str], k: int, seconds: float,
             **options: Any) -> tuple[ScanResult, ShardRun]:
        results, run = self.scanner.scan(q, weights, ordered, k, seconds, options)
        res = merge_results(results, k)
        res.aborted = res.aborted or bool(run.late or run.failed)
        return res, run

    def close(self) -> None:
        self.scanner.close()


def scan_on_shards(layer, q, w, order: Sequence[str], budget, opts: dict[str, Any]) -> ScanResult:
    """The late layer's scan of ``order`` over its ``late_shards`` actors (started on the first
    call), reported on ``budget``: the shards' run as detail ``shards``, a warning naming the
    late and failed ones, unreadable sidecars forgotten in the manifest (rebuilt next build)."""
    if layer.sharded is None:
        root = layer.dir / "sidecars" if layer.levers else layer.shared.root
        model = None if layer.levers else layer.shared.encoder.model_id
        layer.sharded = LateShards(layer.options["shards"], root, model,
                                   layer.ctx.config.get("ray_address"))
    res, run = layer.sharded.scan(q, w, order, budget.pool, budget.remaining(), **opts)
    report_run(budget, run)
    if res.unreadable:
        layer.manifest.forget([h for h, _ in res.unreadable])
    return res


def close_shards(layer) -> None:
    """Stop the layer's shard actors (its next search starts them again; ``Engine.close`` stops
    every layer's)."""
    close_layer_shards([layer])
