"""What a screener may return, and how each returned thing is judged against its batch.

A screener returns zero or more of:

- ``ScreenCandidate(item, span=..., lines=..., quote=..., note=..., score=...)``;
- a dict with the same keys (``item`` may also be given as ``address`` or ``index``);
- a string: an item's address, or ``path:L<a>-<b>`` naming lines inside one item;
- an int: an item's index in the batch (as passed to the screener);
- ``Unknown(reason, item=None)`` (or ``{"unknown": reason}``): the screener could not judge
  the batch (or one item). An empty return means "no candidate here".

``span`` is a byte range in the unit's text (the coordinates of ``BatchItem.span``), ``lines``
1-based inclusive unit lines, ``quote`` an exact excerpt of the item's text (whitespace may
differ; the first occurrence is taken). Give at most one of them; none means the whole item.
A returned thing that names no item of the batch, or a place outside its item, is recorded as
``invalid`` with the reason; nothing is dropped silently.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from lar.engine.excerpts import make_excerpt
from lar.core.types import Span
from lar.apps.screening.batches import BatchItem, item_lines, parse_address
from lar.apps.screening.errors import CandidateError

_CANDIDATE_KEYS = {"item", "address", "index", "span", "lines", "quote", "note", "score"}


def _check_item(item: Any, *, optional: bool = False) -> None:
    if item is None and optional:
        return
    if isinstance(item, bool) or not isinstance(item, (str, int)) or (isinstance(item, int) and item < 0) \
            or (isinstance(item, str) and not item):
        raise CandidateError(f"a candidate's item is an address (str) or an index >= 0 (int), got {item!r}")


def _int_pair(value: Any, name: str) -> tuple[int, int] | None:
    if value is None:
        return None
    try:
        x, y = value
    except (TypeError, ValueError):
        raise CandidateError(f"{name} must be a pair of integers, got {value!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (x, y)):
        raise CandidateError(f"{name} must be a pair of integers, got {value!r}")
    return x, y


@dataclass(frozen=True, slots=True)
class ScreenCandidate:
    """A screener's pointer into its batch: an item, optionally a place in it, a note, a score
    (scores are local to the batch that produced them, not comparable across batches)."""

    item: str | int
    span: tuple[int, int] | None = None
    lines: tuple[int, int] | None = None
    quote: str | None = None
    note: str = ""
    score: float | None = None

    def __post_init__(self) -> None:
        _check_item(self.item)
        object.__setattr__(self, "span", _int_pair(self.span, "span"))
        object.__setattr__(self, "lines", _int_pair(self.lines, "lines"))
        if self.quote is not None and (not isinstance(self.quote, str) or not self.quote.strip()):
            raise CandidateError(f"quote must be a non-empty string, got {self.quote!r}")
        given = [n for n in ("span", "lines", "quote") if getattr(self, n) is not None]
        if len(given) > 1:
            raise CandidateError(f"give at most one of span, lines, quote; got {', '.join(given)}")
        if not isinstance(self.note, str):
            raise CandidateError(f"note must be a string, got {type(self.note).__name__}")
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)) \
                    or not math.isfinite(self.score):
                raise CandidateError(f"score must be a finite number or None, got {self.score!r}")
            object.__setattr__(self, "score", float(self.score))

    @classmethod
    def from_dict(cls, d: dict) -> "ScreenCandidate":
        unknown = set(d) - _CANDIDATE_KEYS
        if unknown:
            raise CandidateError(f"unknown candidate keys {sorted(map(str, unknown))}; "
                                 f"use {', '.join(sorted(_CANDIDATE_KEYS))}")
        names = [k for k in ("item", "address", "index") if k in d]
        if len(names) != 1:
            raise CandidateError("a candidate dict names its item with exactly one of item, address, index")
        note = d.get("note")
        return cls(item=d[names[0]], span=d.get("span"), lines=d.get("lines"), quote=d.get("quote"),
                   note="" if note is None else str(note), score=d.get("score"))


@dataclass(frozen=True, slots=True)
class Unknown:
    """The screener could not judge the batch (``item=None``) or one of its items."""

    reason: str = ""
    item: str | int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            raise CandidateError(f"Unknown.reason must be a string, got {type(self.reason).__name__}")
        _check_item(self.item, optional=True)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One returned thing as recorded: a valid candidate, an unknown, or an invalid return."""

    kind: str  # "candidate" | "unknown" | "invalid"
    seq: int  # its position in what the screener returned
    item: int | None = None  # index in the batch as passed
    start: int | None = None
    end: int | None = None
    lines: tuple[int, int] | None = None
    note: str = ""
    score: float | None = None
    reason: str = ""
    excerpt: str = ""
    returned: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("candidate", "unknown", "invalid"):
            raise CandidateError(f"Outcome.kind {self.kind!r} is not candidate, unknown or invalid")
        if self.kind == "invalid" and not self.reason:
            raise CandidateError("an invalid outcome needs its reason")
        if self.kind == "candidate" and (self.item is None or self.start is None or self.end is None):
            raise CandidateError("a candidate outcome needs its item and span")


def _short(x: Any, limit: int = 300) -> str:
    r = repr(x)
    return r if len(r) <= limit else r[: limit - 1] + "…"


def _resolve_item(ref: str | int, batch: Sequence[BatchItem]) -> tuple[int, tuple[int, int] | None]:
    """Index of the named item (and lines named inside a ``path:L<a>-<b>`` string)."""
    n = len(batch)
    if isinstance(ref, int):
        if ref >= n:
            raise CandidateError(f"item index {ref} is not in this batch of {n} items (0..{n - 1})")
        return ref, None
    for i, it in enumerate(batch):
        if it.address == ref:
            return i, None
    path, lines = parse_address(ref)
    same = [i for i, it in enumerate(batch) if it.path == path]
    if lines is not None:
        inside = [i for i in same if batch[i].lines[0] <= lines[0] and lines[1] <= batch[i].lines[1]]
        if inside:
            return inside[0], lines
    elif len(same) == 1:
        return same[0], None
    raise CandidateError(f"{ref!r} names no item of this batch (its items: "
                         f"{', '.join(it.address for it in batch)})")


def _line_start(data: bytes, it: BatchItem, line: int) -> int:
    pos, cur = it.span[0], it.lines[0]
    while cur < line:
        nl = data.find(b"\n", pos, it.span[1])
        if nl < 0:
            return it.span[1]
        pos, cur = nl + 1, cur + 1
    return pos


def _place(c: ScreenCandidate, lines_from_ref, it: BatchItem, data: bytes) -> tuple[int, int]:
    s0, e0 = it.span
    if c.span is not None:
        s, e = c.span
        if not (s0 <= s < e <= e0):
            raise CandidateError(f"span {list(c.span)} is not a non-empty range inside item "
                                 f"{it.address!r} (bytes {s0}-{e0})")
        return s, e
    lines = c.lines or lines_from_ref
    if lines is not None:
        a, b = lines
        if not (it.lines[0] <= a <= b <= it.lines[1]):
            raise CandidateError(f"lines {a}-{b} are not inside item {it.address!r} "
                                 f"(lines {it.lines[0]}-{it.lines[1]})")
        s = _line_start(data, it, a)
        nl = data.find(b"\n", _line_start(data, it, b), e0)
        return s, max(s, nl if nl >= 0 else e0)
    if c.quote is not None:
        chunk = data[s0:e0]
        needle = c.quote.encode("utf-8")
        pos = chunk.find(needle)
        if pos >= 0:
            return s0 + pos, s0 + pos + len(needle)
        words = c.quote.split()
        m = re.search(rb"\s+".join(re.escape(w.encode("utf-8")) for w in words), chunk)
        if m is None:
            raise CandidateError(f"quote {c.quote[:80]!r} does not occur in item {it.address!r}")
        return s0 + m.start(), s0 + m.end()
    return s0, e0


def judge(returned: Sequence[Any], batch: Sequence[BatchItem], datas: Sequence[bytes]) -> list[Outcome]:
    """Judge each returned thing against the batch (``datas[i]``: the unit text of item i)."""
    out: list[Outcome] = []
    for seq, x in enumerate(returned):
        try:
            if isinstance(x, dict) and "unknown" in x:
                x = Unknown(reason=str(x["unknown"] or ""), item=x.get("item"))
            if isinstance(x, Unknown):
                idx = None if x.item is None else _resolve_item(x.item, batch)[0]
                out.append(Outcome("unknown", seq, item=idx, note=x.reason, returned=_short(x)))
                continue
            if isinstance(x, dict):
                c = ScreenCandidate.from_dict(x)
            elif isinstance(x, ScreenCandidate):
                c = x
            elif isinstance(x, (str, int)) and not isinstance(x, bool):
                c = ScreenCandidate(item=x)
            else:
                raise CandidateError(f"a screener returns ScreenCandidate, dict, address string, "
                                     f"item index or Unknown; got {type(x).__name__}")
            idx, ref_lines = _resolve_item(c.item, batch)
            if ref_lines is not None and (c.span or c.lines or c.quote):
                raise CandidateError(f"{c.item!r} already names lines; do not also give span, lines or quote")
            it, data = batch[idx], datas[idx]
            s, e = _place(c, ref_lines, it, data)
            out.append(Outcome("candidate", seq, item=idx, start=s, end=e, lines=item_lines(data, s, e),
                               note=c.note, score=c.score, returned=_short(x),
                               excerpt=make_excerpt(data, Span(it.hash, s, e))))
        except CandidateError as exc:
            out.append(Outcome("invalid", seq, reason=str(exc), returned=_short(x)))
    return out
