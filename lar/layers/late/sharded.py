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
from lar.layers.kits.resident import ResidentHolder, resident_device
from lar.layers.late.scan import ScanResult, scan_units
from lar.layers.late.shard_source import SidecarSource

__all__ = ["LateShards", "ShardArena", "merge_results", "scan_on_shards", "close_shards",
           "shard_gpus"]


class ShardArena:
    """A shard actor's own token arena, made in the actor on its first scan with the layer's
    ``device`` / ``device_mb`` (the same rule as in one process, ``lar.layers.kits.resident``:
    on CUDA half the free memory by default, on any torch device with ``device_mb`` > 0).
    Pickled to the actor with its plan only."""

    def __init__(self, backend: str, device: str | None, device_mb: int | None):
        self.plan = (backend, device, device_mb)
        self.holder: ResidentHolder | None = None

    def __getstate__(self):
        return {"plan": self.plan}

    def __setstate__(self, state):
        self.plan, self.holder = state["plan"], None

    def arena(self):
        if self.holder is None:
            self.holder = ResidentHolder()
        return self.holder.arena(*self.plan)

    def prune(self, keep) -> int:
        return self.holder.prune(keep) if self.holder is not None else 0

    def status(self):
        return self.holder.status() if self.holder is not None else None


def shard_gpus(options: dict[str, Any]) -> float:
    """The GPUs each shard actor asks Ray for: ``shard_gpus`` when set, else 1 when the scan
    device is CUDA (the actors' arenas live there), else 0."""
    if options.get("shard_gpus") is not None:
        return float(options["shard_gpus"])
    dev = options.get("device")
    return 1.0 if dev and str(dev).split(":")[0] == "cuda" else 0.0


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
                 max_restarts: int = 4, scan=scan_units, arena: ShardArena | None = None,
                 gpus: float = 0.0):
        from lar.distributed.ray_scan import ShardedScan

        self.root = Path(root)
        self.scanner = ShardedScan(n, SidecarSource(self.root, model_id), scan,
                                   address=address, max_restarts=max_restarts, arena=arena,
                                   actor_options={"num_gpus": gpus} if gpus else None)

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
        backend, device, mb = opts["backend"], opts["device"], layer.options["device_mb"]
        arena = ShardArena(backend, device, mb) if resident_device(backend, device, mb) else None
        layer.sharded = LateShards(layer.options["shards"], root, model,
                                   layer.ctx.config.get("ray_address"), arena=arena,
                                   gpus=shard_gpus(layer.options))
    res, run = layer.sharded.scan(q, w, order, budget.pool, budget.remaining(), **opts)
    report_run(budget, run)
    if res.unreadable:
        layer.manifest.forget([h for h, _ in res.unreadable])
    return res


def close_shards(layer) -> None:
    """Stop the layer's shard actors (its next search starts them again; ``Engine.close`` stops
    every layer's)."""
    close_layer_shards([layer])
