"""``DeviceArena``: many units' rows (token vectors, or chunk vectors) kept on a torch device.

A scan on a GPU that ships every block from host memory per query is bound by the host link
(about 40x below the device's own memory bandwidth, ``benchmarks/results/2026-11-29-gpu-maxsim``).
This arena copies each unit's rows to the device once, in their storage dtype (float16; int8 rows
with their float32 per-row scales), and keeps them there across searches:

* ``put(key, rows)`` copies one unit into a free slot (first fit in the arena's segments, a new
  segment while the memory budget allows); a unit that does not fit stays on the host
  (``put`` returns None and the caller scans it from there);
* ``drop(key)`` frees the unit's slot (merged with free neighbours) for the next unit;
* ``block(slots)`` is the device tensor of a block of units: a view when they lie back to back
  in one segment, else one device-side concatenation; int8 rows are scaled back to float32 on
  the device.

Every host-to-device copy goes through :func:`host_to_device` (tests count its calls). Budget
accounting is on the segments allocated (the device memory actually held). Thread-safe for
``put``/``drop``; torch is imported lazily (the ``models`` extra).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from lar.core.errors import ConfigError, require

__all__ = ["DeviceArena", "ResidentStats", "Slot", "host_to_device", "DEFAULT_SEGMENT_ROWS"]

DEFAULT_SEGMENT_ROWS = 1 << 22  # 4 M rows: 1 GiB of float16 tokens at 128 dims


@dataclass(frozen=True)
class Slot:
    """Where one unit's rows lie: rows ``[row, row + rows)`` of segment ``segment``."""

    segment: int
    row: int
    rows: int
    tag: Any = None  # what the caller put with the rows (e.g. where they came from)


@dataclass(frozen=True)
class ResidentStats:
    """What the arena holds and how scans used it (``status`` reports it)."""

    device: str
    budget_bytes: int
    allocated_bytes: int  # device memory held by the segments
    resident_bytes: int  # of which live units' rows
    units_resident: int
    rows_resident: int
    units_over_budget: int  # units asked for that did not fit: scanned from the host
    copies: int  # host-to-device copies of units since the arena was made
    copied_rows: int
    rows_hit: int  # scanned rows that were on the device already
    rows_scanned: int  # every row scanned by the scans that used the arena (host ones too)

    @property
    def hit_rate(self) -> float | None:
        return self.rows_hit / self.rows_scanned if self.rows_scanned else None

    def to_dict(self) -> dict[str, Any]:
        hr = self.hit_rate
        return {"device": self.device, "budget_bytes": self.budget_bytes,
                "allocated_bytes": self.allocated_bytes, "resident_bytes": self.resident_bytes,
                "units_resident": self.units_resident, "rows_resident": self.rows_resident,
                "units_over_budget": self.units_over_budget, "copies": self.copies,
                "copied_rows": self.copied_rows, "rows_hit": self.rows_hit,
                "rows_scanned": self.rows_scanned,
                "hit_rate": None if hr is None else round(hr, 4)}


def host_to_device(dst, src: np.ndarray) -> None:
    """Copy the host rows ``src`` into the device tensor view ``dst`` (same shape and dtype).
    The only host-to-device copy of the arena."""
    torch = require("torch", "models")
    if not src.flags.c_contiguous or not src.flags.writeable:
        src = np.array(src)  # a read-only memory map: torch wants a writeable buffer
    dst.copy_(torch.from_numpy(src))


class _Segment:
    def __init__(self, tokens, scales, rows: int):
        self.tokens = tokens  # (rows, dim) device tensor
        self.scales = scales  # (rows,) float32 device tensor for int8 rows, else None
        self.free: list[list[int]] = [[0, rows]]  # [start, n] ranges, sorted, merged

    def take(self, n: int) -> int | None:
        for r in self.free:
            if r[1] >= n:
                start = r[0]
                r[0] += n
                r[1] -= n
                if r[1] == 0:
                    self.free.remove(r)
                return start
        return None

    def give(self, start: int, n: int) -> None:
        self.free.append([start, n])
        self.free.sort()
        merged: list[list[int]] = []
        for r in self.free:
            if merged and merged[-1][0] + merged[-1][1] == r[0]:
                merged[-1][1] += r[1]
            else:
                merged.append(r)
        self.free = merged


def _row_bytes(dim: int, dtype: np.dtype, scaled: bool) -> int:
    return dim * dtype.itemsize + (4 if scaled else 0)


class DeviceArena:
    """Units' rows on ``device`` within ``budget_bytes`` (see the module doc)."""

    def __init__(self, device: str, budget_bytes: int, *, segment_rows: int = DEFAULT_SEGMENT_ROWS):
        torch = require("torch", "models")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ConfigError(f"invalid torch device {device!r}: {exc}") from exc
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"device {device!r} was requested but torch sees no CUDA device")
        if budget_bytes < 0 or segment_rows < 1:
            raise ConfigError("the device arena needs a budget >= 0 and segment_rows >= 1")
        self.torch = torch
        self.budget_bytes = int(budget_bytes)
        self.segment_rows = int(segment_rows)
        self._segments: list[_Segment] = []
        self._kinds: list[tuple[str, int, bool]] = []  # per segment: (dtype, dim, scaled)
        self._slots: dict[str, Slot] = {}
        self._over: set[str] = set()
        self._allocated = 0
        self._lock = threading.Lock()
        self.copies = 0
        self.copied_rows = 0
        self.rows_hit = 0
        self.rows_scanned = 0

    # -- what is where ---------------------------------------------------------------------
    def get(self, key: str, tag: Any = None) -> Slot | None:
        """The unit's slot; with ``tag``, only when it was put with that tag (a slot of rows
        put under another tag is stale: it is freed and None returned)."""
        slot = self._slots.get(key)
        if slot is not None and tag is not None and slot.tag != tag:
            self.drop([key])
            return None
        return slot

    def __contains__(self, key: str) -> bool:
        return key in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def positions(self) -> dict[str, int]:
        """Each resident unit's place in arena order (segment, then row): a scan in this order
        reads runs of consecutive units as one view."""
        ordered = sorted(self._slots.items(), key=lambda kv: (kv[1].segment, kv[1].row))
        return {k: i for i, (k, _) in enumerate(ordered)}

    def stats(self) -> ResidentStats:
        with self._lock:
            live = sum(s.rows * self._row_bytes_of(s.segment) for s in self._slots.values())
            return ResidentStats(
                device=str(self.device), budget_bytes=self.budget_bytes,
                allocated_bytes=self._allocated, resident_bytes=live,
                units_resident=len(self._slots),
                rows_resident=sum(s.rows for s in self._slots.values()),
                units_over_budget=len(self._over), copies=self.copies,
                copied_rows=self.copied_rows, rows_hit=self.rows_hit,
                rows_scanned=self.rows_scanned)

    def count_scan(self, hit_rows: int, scanned_rows: int) -> None:
        with self._lock:
            self.rows_hit += int(hit_rows)
            self.rows_scanned += int(scanned_rows)

    def _row_bytes_of(self, segment: int) -> int:
        dtype, dim, scaled = self._kinds[segment]
        return _row_bytes(dim, np.dtype(dtype), scaled)

    # -- filling and freeing ---------------------------------------------------------------
    def put(self, key: str, rows: np.ndarray, scales: np.ndarray | None = None,
            tag: Any = None) -> Slot | None:
        """Copy unit ``key``'s ``rows`` (n, dim) (int8 ``rows`` with their float32 ``scales``
        (n,)) to the device, or return its slot if it is there already; None when it does not
        fit in the budget (the unit stays on the host)."""
        rows = np.asarray(rows)
        n, dim = int(rows.shape[0]), int(rows.shape[1])
        kind = (rows.dtype.str, dim, scales is not None)
        with self._lock:
            slot = self._slots.get(key)
            if slot is not None:
                return slot
            if n == 0:
                return None
            found = None
            for i, seg in enumerate(self._segments):
                if self._kinds[i] == kind:
                    start = seg.take(n)
                    if start is not None:
                        found = Slot(i, start, n, tag)
                        break
            if found is None:
                found = self._new_segment(kind, n, tag)
            if found is None:
                self._over.add(key)
                return None
            self._over.discard(key)
            seg = self._segments[found.segment]
            host_to_device(seg.tokens[found.row:found.row + n], rows)
            if scales is not None:
                host_to_device(seg.scales[found.row:found.row + n],
                               np.ascontiguousarray(scales, dtype=np.float32))
            self._slots[key] = found
            self.copies += 1
            self.copied_rows += n
            return found

    def _new_segment(self, kind: tuple[str, int, bool], n: int, tag: Any) -> Slot | None:
        dtype, dim, scaled = kind
        rb = _row_bytes(dim, np.dtype(dtype), scaled)
        room = (self.budget_bytes - self._allocated) // rb
        cap = min(self.segment_rows, room)
        if cap < n:
            if room < n:
                return None
            cap = n  # a unit larger than a segment gets a segment of its own
        torch = self.torch
        tdtype = torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
        tokens = torch.empty((cap, dim), dtype=tdtype, device=self.device)
        scales = torch.empty(cap, dtype=torch.float32, device=self.device) if scaled else None
        seg = _Segment(tokens, scales, cap)
        self._segments.append(seg)
        self._kinds.append(kind)
        self._allocated += cap * rb
        start = seg.take(n)
        return Slot(len(self._segments) - 1, start, n, tag)

    def drop(self, keys: Iterable[str]) -> int:
        """Free the slots of ``keys`` (those resident); returns how many were freed."""
        freed = 0
        with self._lock:
            for k in keys:
                self._over.discard(k)
                slot = self._slots.pop(k, None)
                if slot is not None:
                    self._segments[slot.segment].give(slot.row, slot.rows)
                    freed += 1
        return freed

    def forget_over_budget(self) -> None:
        """Forget which units did not fit (a later scan asks again)."""
        with self._lock:
            self._over.clear()

    def clear(self) -> None:
        """Release every segment (the device memory goes back to torch's allocator)."""
        with self._lock:
            self._segments, self._kinds, self._slots = [], [], {}
            self._over.clear()
            self._allocated = 0

    # -- reading ---------------------------------------------------------------------------
    def block(self, slots: list[Slot]):
        """The rows of ``slots`` (in order) as one device tensor: a view of a segment when
        they lie back to back there, else a device-side concatenation; int8 rows come back
        as float32 (rows times their scales)."""
        seg0 = slots[0].segment
        contiguous = all(s.segment == seg0 for s in slots) and all(
            b.row == a.row + a.rows for a, b in zip(slots, slots[1:]))
        if contiguous:
            a, b = slots[0].row, slots[-1].row + slots[-1].rows
            parts = [(seg0, a, b)]
        else:
            parts = [(s.segment, s.row, s.row + s.rows) for s in slots]
        torch = self.torch
        xs = []
        for i, a, b in parts:
            seg = self._segments[i]
            x = seg.tokens[a:b]
            xs.append(x if seg.scales is None else x.float() * seg.scales[a:b, None])
        if len(xs) > 1 and len({x.dtype for x in xs}) > 1:
            xs = [x.float() for x in xs]
        return xs[0] if len(xs) == 1 else torch.cat(xs)
