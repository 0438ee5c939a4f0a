"""The exact cosine scan of the chunk vector store: top-k chunks over selected units, block by
block, stoppable between blocks (``ChunkVectorStore.search`` plans and verifies, this scores)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lar.core.background import ScoreMoments
from lar.layers.kits.vectors.chunkrows import ChunkHits, RowTable, iter_f32


def scan_top_k(t: RowTable, sel: np.ndarray, pack: np.ndarray, qn: np.ndarray, k: int, *,
               verify: Callable[[RowTable, np.ndarray, np.ndarray], np.ndarray],
               should_stop: Callable[[], bool] | None, block_rows: int) -> ChunkHits:
    """Score the units ``sel`` (in pack order) against the unit query ``qn``, about
    ``block_rows`` rows at a time; ``verify`` drops the units of a block whose bytes fail their
    checksum; ``should_stop`` is asked between blocks (a stop returns the best so far)."""
    cum = np.cumsum(t.n[sel])
    total = int(cum[-1]) if len(cum) else 0
    best_s = np.zeros(0, dtype=np.float32)
    best_u = best_r = np.zeros(0, dtype=np.int64)  # table index, row within the unit
    moments = ScoreMoments()
    pos = done = 0
    while pos < len(sel):
        if done and should_stop is not None and should_stop():
            break
        end = max(pos + 1, int(np.searchsorted(cum, done + block_rows, side="right")))
        block = verify(t, sel[pos:end], pack)
        pos, done = end, int(cum[end - 1])
        if not len(block):
            continue
        counts = t.n[block]
        scores = np.empty(int(counts.sum()), dtype=np.float32)
        for o, x in iter_f32(pack, t.rows_of(block)):
            np.matmul(x, qn, out=scores[o:o + x.shape[0]])
        moments.add(scores)
        top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
        ends = np.cumsum(counts)
        owner = np.searchsorted(ends, top, side="right")
        best_s = np.concatenate([best_s, scores[top]])
        best_u = np.concatenate([best_u, block[owner]])
        best_r = np.concatenate([best_r, top - (ends[owner] - counts[owner])])
        if len(best_s) > k:
            keep = np.argpartition(-best_s, k - 1)[:k]
            best_s, best_u, best_r = best_s[keep], best_u[keep], best_r[keep]
    hits = []
    for j in np.argsort(-best_s, kind="stable").tolist():
        u, r = int(best_u[j]), int(best_r[j])
        a, b = t.spans[u][r].tolist()
        hits.append((t.hashes[u], a, b, float(best_s[j])))
    return ChunkHits(hits=hits, fraction=done / total if total else 1.0,
                     n_scored=done, n_total=total, background=moments.result())
