"""Exact MaxSim over many units' sidecars, block by block, abortable between blocks.

Units come in the caller's priority order; their token matrices are gathered into blocks of about
``block_tokens`` rows (each chunk is one "document" of the kernel), scored exactly with
``lar.maxsim`` (numpy, or torch on CUDA), and the best ``k`` chunks are kept. ``should_stop`` is
checked before each block: the scan then returns what it scored, and which units that was.

With a ``resident`` arena (:class:`lar.maxsim.resident.DeviceArena`), each unit's tokens are
looked up there first and copied there when they fit (once: later scans find them resident); a
block's resident units are scored from the device, the others (past the arena's budget) from the
host, and the result says how many tokens were which.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from lar.core.background import ScoreMoments
from lar.core.errors import ConfigError
from lar.maxsim import maxsim
from lar.layers.kits.vectors.arena import adjacent_view
from lar.encoders.encoding import UnitEncoding

__all__ = ["ScanResult", "scan_units", "block_tokens_for", "DEFAULT_BLOCK_TOKENS",
           "RESIDENT_BLOCK_TOKENS_CUDA"]

DEFAULT_BLOCK_TOKENS = 1 << 16
#: a block scored from a CUDA arena: a GPU reads 1 M tokens in well under a millisecond, so
#: smaller blocks are bound by the per-block launch and copy-back, not by memory
RESIDENT_BLOCK_TOKENS_CUDA = 1 << 20


def block_tokens_for(arena) -> int:
    """The scan's block size when the layer's ``block_tokens`` is None (auto)."""
    cuda = arena is not None and arena.device.type == "cuda"
    return RESIDENT_BLOCK_TOKENS_CUDA if cuda else DEFAULT_BLOCK_TOKENS


@dataclass
class ScanResult:
    top: list[tuple[float, str, int]] = field(default_factory=list)  # (score, hash, chunk), best first
    scanned: list[str] = field(default_factory=list)
    tokens: int = 0
    blocks: int = 0
    aborted: bool = False
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (hash, why)
    moments: ScoreMoments = field(default_factory=ScoreMoments)  # every chunk score computed
    gathered: int = 0  # tokens copied into a block (0 when every block was a view of the arena)
    resident_tokens: int = 0  # scanned tokens that were on the device arena before this scan
    copied_tokens: int = 0  # tokens this scan copied into the device arena
    host_tokens: int = 0  # scanned tokens of units past the arena's budget (scored from the host)

    @property
    def hit_rate(self) -> float | None:
        """The fraction of the scanned tokens already on the device (None: no arena, no tokens)."""
        seen = self.resident_tokens + self.copied_tokens + self.host_tokens
        return self.resident_tokens / seen if seen else None


def _adjacent_view(encs: list[UnitEncoding]) -> np.ndarray | None:
    """When the units' token matrices lie back to back in one buffer (the layer's in-memory
    arena keeps units in scan order), the block is a view of that buffer: no copy."""
    return adjacent_view([e.tokens for e in encs])


def _continues(prev: UnitEncoding, enc: UnitEncoding) -> bool:
    """Whether ``enc``'s tokens lie right after ``prev``'s in the same buffer (float tokens)."""
    a, b = prev.tokens, enc.tokens
    return (prev.token_scales is None and enc.token_scales is None and a.base is not None
            and b.base is a.base and a.flags.c_contiguous and b.flags.c_contiguous
            and b.ctypes.data == a.ctypes.data + a.shape[0] * a.strides[0])


def _block_matrix(encs: list[UnitEncoding]) -> tuple[np.ndarray, bool]:
    """The block's token rows, and whether they had to be copied together (a gather)."""
    if all(e.token_scales is None for e in encs):
        if len(encs) == 1:
            return encs[0].tokens, False
        view = _adjacent_view(encs)
        if view is not None:
            return view, False
        return np.concatenate([e.tokens for e in encs], axis=0), True
    return np.concatenate([e.tokens_f32() for e in encs], axis=0), True


def scan_units(
    q: np.ndarray,
    weights: np.ndarray,
    hashes: Iterable[str],
    load: Callable[[str], UnitEncoding | None],
    k: int,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    backend: str = "auto",
    device=None,
    min_score: float | None = None,
    resident=None,
) -> ScanResult:
    """Score every chunk of the units ``hashes`` (in order); keep the ``k`` best.

    ``load(h)`` returns the unit's encoding or None (skipped: absent, corrupt, or empty); it may
    raise ``LookupError``/``OSError`` with the reason, recorded in ``unreadable``. ``resident``:
    a ``DeviceArena`` the scan reads resident units from and fills (see the module doc)."""
    res = ScanResult()
    heap: list[tuple[float, str, int]] = []  # min-heap of the k best (score, hash, chunk)
    pending: list[tuple[str, UnitEncoding]] = []
    slots: dict[str, object] = {}  # the pending units' slots in the device arena
    pending_tokens = 0
    run = True  # the pending units so far lie back to back in one buffer

    def flush() -> None:
        nonlocal pending, pending_tokens
        if not pending:
            return
        encs = [e for _, e in pending]
        scores, n_rows = _block_scores(q, weights, pending, slots, resident, res, backend=backend,
                                       device=device, block_tokens=block_tokens)
        res.moments.add(scores)
        counts = [e.n_chunks for e in encs]
        owner = np.repeat(np.arange(len(encs)), counts)
        chunk_of = np.arange(scores.shape[0]) - np.repeat(np.cumsum([0] + counts[:-1]), counts)
        cand = np.arange(scores.shape[0])
        if min_score is not None:
            cand = cand[scores >= min_score]
        if cand.shape[0] > k:
            cand = cand[np.argpartition(-scores[cand], k - 1)[:k]]
        for i in cand.tolist():
            item = (float(scores[i]), pending[owner[i]][0], int(chunk_of[i]))
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        res.scanned.extend(h for h, _ in pending)
        res.tokens += n_rows
        res.blocks += 1
        pending, pending_tokens = [], 0
        slots.clear()

    for h in hashes:
        if pending_tokens == 0 and should_stop():
            res.aborted = True
            break
        try:
            enc = load(h)
        except (LookupError, OSError) as exc:
            res.unreadable.append((h, str(exc)))
            continue
        if enc is None or enc.n_tokens == 0:
            res.scanned.append(h)
            continue
        on_device = resident is not None and _place(resident, h, enc, slots, res)
        if pending and run and not (on_device and pending[-1][0] in slots) \
                and not _continues(pending[-1][1], enc):
            # the arena's run ends here (a segment boundary, or a unit from elsewhere): score the
            # run as a view now rather than copy it into a block with what follows
            if pending_tokens >= block_tokens // 16:
                if should_stop():
                    pending, pending_tokens = [], 0
                    res.aborted = True
                    break
                flush()
            run = False
        if not pending:
            run = True
        pending.append((h, enc))
        pending_tokens += enc.n_tokens
        if pending_tokens >= block_tokens:
            if should_stop():
                pending, pending_tokens = [], 0
                res.aborted = True
                break
            flush()
    else:
        if pending and should_stop():
            res.aborted = True
        else:
            flush()
    res.top = sorted(heap, key=lambda t: (-t[0], t[1], t[2]))
    if resident is not None:
        resident.count_scan(res.resident_tokens, res.resident_tokens + res.copied_tokens
                            + res.host_tokens)
    return res


def _place(resident, h: str, enc: UnitEncoding, slots: dict, res: ScanResult) -> bool:
    """Find unit ``h`` in the device arena, or copy it there; False when it stays on the host."""
    slot = resident.get(h)
    if slot is not None:
        res.resident_tokens += enc.n_tokens
    else:
        slot = resident.put(h, enc.tokens, enc.token_scales)
        if slot is None:
            res.host_tokens += enc.n_tokens
            return False
        res.copied_tokens += enc.n_tokens
    slots[h] = slot
    return True


def _kernel(q, x, starts, weights, backend, device, block_tokens):
    try:
        return maxsim(q, x, starts, weights, backend=backend, device=device)
    except (MemoryError, RuntimeError) as exc:  # torch reports CUDA OOM as a RuntimeError
        if isinstance(exc, RuntimeError) and "out of memory" not in str(exc).lower():
            raise
        raise ConfigError(
            f"scoring a block of {x.shape[0]} tokens x {x.shape[1]} dims ran out of memory "
            f"on {device or backend}: lower the layer's block_tokens (now {block_tokens}) "
            "or free memory") from None


def _block_scores(q, weights, pending, slots, resident, res: ScanResult, *, backend, device,
                  block_tokens) -> tuple[np.ndarray, int]:
    """Every chunk score of the block ``pending`` (in order), and its token count: its runs of
    device-resident units are scored from the arena, the rest from the host."""
    groups: list[tuple[bool, list[UnitEncoding], list]] = []
    for h, e in pending:
        here = h in slots
        if not groups or groups[-1][0] != here:
            groups.append((here, [], []))
        groups[-1][1].append(e)
        groups[-1][2].append(slots.get(h))
    parts, n_rows = [], 0
    for here, encs, held in groups:
        if here:
            x = resident.block(held)
            dev = resident.device
        else:
            x, copied = _block_matrix(encs)
            if copied:
                res.gathered += int(x.shape[0])
            dev = device
        offsets = np.cumsum([0] + [e.n_tokens for e in encs[:-1]])
        starts = np.concatenate([e.chunk_starts.astype(np.int64) + o for e, o in zip(encs, offsets)])
        parts.append(_kernel(q, x, starts, weights, "torch" if here else backend, dev, block_tokens))
        n_rows += int(x.shape[0])
    return (parts[0] if len(parts) == 1 else np.concatenate(parts)), n_rows
