"""Units of a snapshot -> bounded reading batches, each item with its source address.

A unit whose text fits the byte budget is one item addressed by its path. A larger unit is
split into parts at line boundaries, each at most ``budget`` bytes, addressed
``path:L<a>-<b>`` (1-based, inclusive lines of the unit's text). A single line longer than the
budget is cut at a UTF-8 character boundary; such a part's address also names its bytes,
``path:L<a>-<b>:B<start>-<end>``, so every address in a run is unique. Items are packed into
batches in snapshot order while the batch stays within the budget (an item is never split
across batches; an empty unit is a zero-byte item).

Spans are byte offsets ``[start, end)`` into the unit's text (the extracted text for PDFs,
notebooks, HTML), the coordinates hits use: ``engine.read_bytes(hash, (start, end))``.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from typing import Any, Sequence

from lar.core.errors import LarError
from lar.store.reader import line_range
from lar.core.types import HASH_RE
from lar.apps.screening.errors import ScreeningConfigError

ORDERS = ("path", "usage", "shuffle")
DEFAULT_BATCH_BYTES = 16_000
_LINES_ADDR = re.compile(r"^(?P<path>.+):L(?P<a>\d+)(?:-(?P<b>\d+))?(?::B\d+-\d+)?$")


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One reading unit handed to a screener: where it is and its text.

    ``span`` is the byte range of ``text`` in the unit (hash ``hash``), ``lines`` its 1-based
    inclusive line range; ``before`` holds up to ``context_lines`` lines that precede the span
    (local context for a part of a split unit; it is not part of the screened extent)."""

    address: str
    path: str
    hash: str
    span: tuple[int, int]
    lines: tuple[int, int]
    text: str
    before: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.address, str) or not self.address:
            raise ScreeningConfigError("BatchItem.address must be a non-empty string")
        if not isinstance(self.path, str) or not self.path:
            raise ScreeningConfigError("BatchItem.path must be a non-empty relative path")
        if not isinstance(self.hash, str) or not HASH_RE.match(self.hash):
            raise ScreeningConfigError(f"BatchItem.hash must be a hex content hash, got {self.hash!r}")
        s, e = _pair(self.span, "span")
        a, b = _pair(self.lines, "lines")
        if s < 0 or e < s:
            raise ScreeningConfigError(f"BatchItem.span {self.span} needs 0 <= start <= end")
        if a < 1 or b < a:
            raise ScreeningConfigError(f"BatchItem.lines {self.lines} must be 1-based and ordered")
        if not isinstance(self.text, str) or not isinstance(self.before, str):
            raise ScreeningConfigError("BatchItem.text and BatchItem.before must be strings")
        object.__setattr__(self, "span", (s, e))
        object.__setattr__(self, "lines", (a, b))

    @property
    def nbytes(self) -> int:
        return self.span[1] - self.span[0]

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "path": self.path, "hash": self.hash,
                "span": list(self.span), "lines": list(self.lines), "text": self.text,
                "before": self.before}


def _pair(value: Any, name: str) -> tuple[int, int]:
    try:
        x, y = value
    except (TypeError, ValueError):
        raise ScreeningConfigError(f"BatchItem.{name} must be a pair of integers, got {value!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (x, y)):
        raise ScreeningConfigError(f"BatchItem.{name} must be a pair of integers, got {value!r}")
    return x, y


@dataclass(frozen=True, slots=True)
class PlannedItem:
    """An item of the stored plan (no text: it is read when its batch is screened)."""

    unit: int  # position of its unit in the snapshot
    address: str
    path: str
    hash: str
    start: int
    end: int
    line_a: int
    line_b: int
    digest: str  # of the item's bytes, to notice text that no longer matches the plan

    @property
    def nbytes(self) -> int:
        return self.end - self.start


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _char_boundary(data: bytes, pos: int, floor: int) -> int:
    """``pos`` moved back (at most 3 bytes) so that it does not cut a UTF-8 character."""
    p = pos
    while p > floor and p < len(data) and p > pos - 3 and (data[p] & 0xC0) == 0x80:
        p -= 1
    return p if p > floor else pos


def split_text(data: bytes, budget: int) -> list[tuple[int, int]]:
    """Byte ranges covering ``data`` exactly, each at most ``budget`` bytes, cut after a newline
    where one exists in range (otherwise inside an over-long line, at a character boundary)."""
    n = len(data)
    if n <= budget:
        return [(0, n)]
    parts, start = [], 0
    while start < n:
        if n - start <= budget:
            parts.append((start, n))
            break
        limit = start + budget
        cut = data.rfind(b"\n", start, limit) + 1
        if cut <= start:
            cut = _char_boundary(data, limit, start)
        parts.append((start, cut))
        start = cut
    return parts


def item_lines(data: bytes, start: int, end: int) -> tuple[int, int]:
    if end <= start:
        first = data.count(b"\n", 0, start) + 1
        return first, first
    return line_range(data, start, end)


def plan_unit(unit: int, path: str, h: str, data: bytes, budget: int) -> list[PlannedItem]:
    """The items of one unit: the whole unit, or its line-aligned parts."""
    ranges = split_text(data, budget)
    out = []
    for s, e in ranges:
        a, b = item_lines(data, s, e)
        if len(ranges) == 1:
            addr = path
        else:
            addr = f"{path}:L{a}-{b}"
            aligned = (s == 0 or data[s - 1:s] == b"\n") and (e == len(data) or data[e - 1:e] == b"\n")
            if not aligned:
                addr += f":B{s}-{e}"
        out.append(PlannedItem(unit, addr, path, h, s, e, a, b, digest(data[s:e])))
    return out


def pack(items: Sequence[PlannedItem], budget: int) -> list[list[PlannedItem]]:
    """Consecutive items grouped so that each batch holds at most ``budget`` bytes."""
    batches: list[list[PlannedItem]] = []
    cur: list[PlannedItem] = []
    size = 0
    for it in items:
        if cur and size + it.nbytes > budget:
            batches.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += it.nbytes
    if cur:
        batches.append(cur)
    return batches


def order_units(units: list, order: str, seed: int, usage: dict[str, tuple] | None = None) -> list:
    """Snapshot order: by path, by past use (most hits and fetches first, then path), or a
    seeded shuffle (a declared sample, independent of any relevance selector)."""
    units = sorted(units, key=lambda u: u.path)
    if order == "usage":
        usage = usage or {}
        units.sort(key=lambda u: -sum(usage.get(u.hash, (0, 0, 0))[:2]))
    elif order == "shuffle":
        random.Random(seed).shuffle(units)
    return units


def plan(engine, units: list, budget: int, *, keep_text: bool = False
         ) -> tuple[list[tuple[Any, int, str]], list[list[PlannedItem]]]:
    """Read every unit once and plan its items. Returns ``[(unit, text_bytes, note)]`` (note:
    why a unit could not be read, else "") and the batches."""
    rows, items = [], []
    for pos, u in enumerate(units):
        try:
            data = engine.reader.unit_text(u.hash, u.path)
        except (LarError, OSError) as exc:
            rows.append((u, 0, f"could not be read when the run was planned: {exc}"))
            continue
        if keep_text:
            engine.reader.snapshot(u.hash)
        rows.append((u, len(data), ""))
        items.extend(plan_unit(pos, u.path, u.hash, data, budget))
    return rows, pack(items, budget)


def parse_address(address: str) -> tuple[str, tuple[int, int] | None]:
    """``path:L<a>-<b>`` -> (path, (a, b)); anything else -> (address, None)."""
    m = _LINES_ADDR.match(address)
    if not m:
        return address, None
    a = int(m.group("a"))
    b = int(m.group("b") or a)
    return m.group("path"), (a, b)


def validate_budget(batch_bytes: Any) -> int:
    if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes < 64:
        raise ScreeningConfigError(
            f"batch_bytes must be an integer of at least 64 bytes, got {batch_bytes!r} "
            f"(the default is {DEFAULT_BATCH_BYTES})")
    return batch_bytes


def validate_order(order: Any) -> str:
    if order not in ORDERS:
        raise ScreeningConfigError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    return order
