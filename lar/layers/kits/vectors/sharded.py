"""The chunk-vector layers' scan over shards on Ray actors (option ``shards`` > 0: config
``dense_shards``, ``static_shards``; docs/ray.md).

:class:`ChunkShards` owns the layer's :class:`lar.distributed.ray_scan.ShardedScan` (started on
its first search), each actor holding its shard's chunk vectors read from the layer's vector
store (:class:`~lar.layers.kits.vectors.chunkshard.StoreSource`). :func:`search_on_shards` is the
layer's search over them: the query vector to every shard, each shard's part of the units in
pack order (the order the single-process scan visits), the answers merged exactly and returned
as the :class:`~lar.layers.kits.vectors.chunkrows.ChunkHits` the single-process
``ChunkVectorStore.search`` returns, with ``fraction`` the units covered: a late or failed
shard's units are not.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from lar.distributed.shards import ShardRun, report_run
from lar.layers.kits.vectors.chunkrows import ChunkHits, normalise
from lar.layers.kits.vectors.chunkshard import (
    BLOCK_ROWS, ChunkScanResult, StoreSource, merge_chunk_results, scan_chunk_units)

__all__ = ["ChunkShards", "search_on_shards"]


class ChunkShards:
    """``n`` shard actors over the vector store at ``folder``; ``scan`` is the shards' scan
    function (a test wraps it)."""

    def __init__(self, n: int, folder: Path, dim: int, dtype: str = "float16",
                 address: str | None = None, max_restarts: int = 4, scan=scan_chunk_units):
        from lar.distributed.ray_scan import ShardedScan

        self.folder = Path(folder)
        self.scanner = ShardedScan(n, StoreSource(self.folder, dim, dtype), scan,
                                   address=address, max_restarts=max_restarts)

    def scan(self, q: np.ndarray, ordered: Sequence[str], k: int, seconds: float,
             **options: Any) -> tuple[ChunkScanResult, ShardRun]:
        """The unit query ``q`` against the units ``ordered``, for ``seconds`` at most."""
        qn = normalise(np.asarray(q, dtype=np.float32).reshape(-1))
        results, run = self.scanner.scan(qn, None, ordered, k, seconds, options)
        res = merge_chunk_results(results, k)
        res.aborted = res.aborted or bool(run.late or run.failed)
        return res, run

    def close(self) -> None:
        self.scanner.close()


def as_chunk_hits(res: ChunkScanResult, sent: int, live: int) -> ChunkHits:
    """The merged result in the single-process scan's form; ``fraction`` counts the units the
    shards scanned, and those of the ``live`` units that were not sent (no chunk rows: the
    single-process scan has nothing to score in them either)."""
    scanned = len(set(res.scanned))
    fraction = (live - sent + scanned) / live if live else 1.0
    return ChunkHits(hits=[(h, s, e, score) for score, h, s, e in res.top],
                     fraction=min(1.0, fraction), n_scored=res.rows, n_total=res.rows,
                     background=res.moments.result())


def search_on_shards(layer, q: np.ndarray, ok: set[str], k: int, budget) -> ChunkHits:
    """The layer's exact cosine top ``k`` over its ``shards`` actors (started on the first
    call), reported on ``budget``: the shards' run as detail ``shards``, a warning naming the
    late and failed ones, units a shard found unreadable forgotten in the manifest (rebuilt by
    the next build)."""
    if layer.sharded is None:
        store = layer.store
        layer.sharded = ChunkShards(layer.options["shards"], store.dir, store.dim, store.dtype_name,
                                    layer.ctx.config.get("ray_address"))
    order = layer.store.pack_order(ok)
    res, run = layer.sharded.scan(q, order, k, budget.remaining(), block_rows=BLOCK_ROWS)
    report_run(budget, run)
    if res.unreadable:
        layer.manifest.forget([h for h, _ in res.unreadable])
        budget.warn(f"{len(res.unreadable)} units' stored vectors were unreadable on their "
                    "shard: dropped, queued for rebuilding")
    return as_chunk_hits(res, len(order), len(ok))
