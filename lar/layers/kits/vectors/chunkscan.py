"""The exact cosine scan of the chunk vector store: top-k chunks over selected units, block by
block, stoppable between blocks (``ChunkVectorStore.search`` plans and verifies, this scores).

With a device ``arena`` (:class:`lar.maxsim.resident.DeviceArena`, issue 23), each unit's rows
are copied to the device the first time a scan meets them (tagged with the pack generation and
first row, so a replaced or compacted unit is copied afresh) and scored there by one matrix
product per run of resident units; units past the arena's budget are scored on the host."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lar.core.background import ScoreMoments
from lar.layers.kits.vectors.chunkrows import ChunkHits, RowTable, iter_f32


def _host_scores(t: RowTable, block: np.ndarray, pack: np.ndarray, qn: np.ndarray,
                 out: np.ndarray) -> None:
    for o, x in iter_f32(pack, t.rows_of(block)):
        np.matmul(x, qn, out=out[o:o + x.shape[0]])


def _device_scores(arena, t: RowTable, block: np.ndarray, pack: np.ndarray, qn: np.ndarray,
                   counts: dict[str, int]) -> np.ndarray:
    """The block's scores, its resident units' from the arena (copied there when they fit)."""
    n = t.n[block]
    offsets = np.concatenate([[0], np.cumsum(n)])
    scores = np.empty(int(offsets[-1]), dtype=np.float32)
    runs: list[list] = []  # (on device, first, end, slots)
    for j, i in enumerate(block.tolist()):
        a, rows = int(t.first[i]), int(t.n[i])
        tag = (t.gen, a)
        slot = arena.get(t.hashes[i], tag)
        counts["hit" if slot is not None else "miss"] += rows
        if slot is None:
            slot = arena.put(t.hashes[i], pack[a:a + rows], tag=tag)
            if slot is None:
                counts["host"] += rows
        here = slot is not None
        if not runs or runs[-1][0] != here:
            runs.append([here, j, j, []])
        runs[-1][2] = j + 1
        if here:
            runs[-1][3].append(slot)
    qd = None
    for here, j0, j1, slots in runs:
        o0, o1 = int(offsets[j0]), int(offsets[j1])
        if not here:
            _host_scores(t, block[j0:j1], pack, qn, scores[o0:o1])
            continue
        if qd is None:
            qd = arena.torch.from_numpy(qn).to(arena.device)
        scores[o0:o1] = (arena.block(slots).float() @ qd).cpu().numpy()
    return scores


def scan_top_k(t: RowTable, sel: np.ndarray, pack: np.ndarray, qn: np.ndarray, k: int, *,
               verify: Callable[[RowTable, np.ndarray, np.ndarray], np.ndarray],
               should_stop: Callable[[], bool] | None, block_rows: int, arena=None) -> ChunkHits:
    """Score the units ``sel`` (in pack order) against the unit query ``qn``, about
    ``block_rows`` rows at a time; ``verify`` drops the units of a block whose bytes fail their
    checksum; ``should_stop`` is asked between blocks (a stop returns the best so far);
    ``arena``: score from the device (see the module doc)."""
    counts_of = {"hit": 0, "miss": 0, "host": 0}
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
        if arena is None:
            scores = np.empty(int(counts.sum()), dtype=np.float32)
            _host_scores(t, block, pack, qn, scores)
        else:
            scores = _device_scores(arena, t, block, pack, qn, counts_of)
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
    resident = None
    if arena is not None:
        scanned = counts_of["hit"] + counts_of["miss"]
        arena.count_scan(counts_of["hit"], scanned)
        resident = {"hit_rate": counts_of["hit"] / scanned if scanned else None,
                    "copied_rows": scanned - counts_of["hit"] - counts_of["host"],
                    "host_rows": counts_of["host"]}
    return ChunkHits(hits=hits, fraction=done / total if total else 1.0,
                     n_scored=done, n_total=total, background=moments.result(),
                     resident=resident)
