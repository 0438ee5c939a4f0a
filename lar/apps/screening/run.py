"""``ScreeningRun``: a frozen view of one run's record, read at one moment.

It says what the run's snapshot holds, which batches were processed, failed or are pending,
what the screener found (as lar ``Hit``s with signal ``"screen"``), what it returned that was
invalid or unknown, which snapshot units changed since, and which current units are not in the
snapshot. Scores are the screener's own, local to the batch that produced them.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.result import JSON_SCHEMA_VERSION, polars_module, text_table
from lar.core.types import Evidence, Hit, Span
from lar.apps.screening.batches import ORDERS
from lar.apps.screening.errors import ScreeningConfigError
from lar.apps.screening.record import BATCH_STATES, RunStore, check_name

SIGNAL = "screen"
ITEM_STATES = ("pending", "screened", "unreadable")


def _frozen(rows) -> tuple[Mapping[str, Any], ...]:
    return tuple(MappingProxyType(dict(r)) for r in rows)


@dataclass(frozen=True, slots=True)
class SnapshotUnit:
    path: str
    hash: str
    size: int
    text_bytes: int
    note: str = ""  # why it could not be read when the run was planned


@dataclass(frozen=True, slots=True)
class ItemRecord:
    batch: int
    address: str
    unit: int
    nbytes: int
    state: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.state not in ITEM_STATES:
            raise ScreeningConfigError(f"item state {self.state!r} is not one of {ITEM_STATES}")


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: int
    state: str
    addresses: tuple[str, ...]
    bytes: int
    n_candidates: int = 0
    n_invalid: int = 0
    n_unknown: int = 0
    error: str = ""
    elapsed: float = 0.0
    screener: str = ""
    attempts: int = 0

    def __post_init__(self) -> None:
        if self.state not in BATCH_STATES:
            raise ScreeningConfigError(f"batch state {self.state!r} is not one of {BATCH_STATES}")
        if self.state == "failed" and not self.error:
            raise ScreeningConfigError(f"failed batch {self.id} needs its error text")
        object.__setattr__(self, "addresses", tuple(self.addresses))

    @property
    def outcome(self) -> str:
        """processed batches: candidates | unknown | invalid | none; else the state."""
        if self.state != "processed":
            return self.state
        if self.n_candidates:
            return "candidates"
        return "unknown" if self.n_unknown else ("invalid" if self.n_invalid else "none")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "state": self.state, "outcome": self.outcome,
                "addresses": list(self.addresses), "bytes": self.bytes,
                "candidates": self.n_candidates, "invalid": self.n_invalid, "unknown": self.n_unknown,
                "error": self.error, "elapsed": round(self.elapsed, 6), "screener": self.screener,
                "attempts": self.attempts}


@dataclass(frozen=True)
class ScreeningRun:
    id: str
    path: str
    created: str
    screener: str
    question: str | None
    scope: Mapping[str, Any]
    batch_bytes: int
    order: str
    units: tuple[SnapshotUnit, ...]
    batches: tuple[BatchRecord, ...]
    items: tuple[ItemRecord, ...]
    candidates: tuple[Hit, ...]
    invalid: tuple[Mapping[str, Any], ...] = ()
    unknown: tuple[Mapping[str, Any], ...] = ()
    changed: tuple[Mapping[str, Any], ...] = ()
    not_in_snapshot: tuple[str, ...] = ()
    outside_inventory: tuple[tuple[str, str], ...] = ()  # (path, reason) the index did not admit
    settings: Mapping[str, Any] = field(default_factory=dict)
    last_call: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        check_name(self.id)
        if self.order not in ORDERS:
            raise ScreeningConfigError(f"order {self.order!r} is not one of {ORDERS}")
        if self.batch_bytes < 1:
            raise ScreeningConfigError("batch_bytes must be positive")
        for name in ("units", "batches", "items", "candidates", "not_in_snapshot", "outside_inventory"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("invalid", "unknown", "changed"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        object.__setattr__(self, "scope", MappingProxyType(dict(self.scope)))
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        if self.last_call is not None:
            object.__setattr__(self, "last_call", MappingProxyType(dict(self.last_call)))
        if any(h.signals != (SIGNAL,) for h in self.candidates):
            raise ScreeningConfigError(f"screening candidates carry the single signal {SIGNAL!r}")

    # -- summaries ----------------------------------------------------------------------------
    def progress(self) -> dict[str, Any]:
        done_units: dict[int, bool] = {}
        for it in self.items:
            done_units[it.unit] = done_units.get(it.unit, True) and it.state == "screened"
        bytes_total = sum(it.nbytes for it in self.items)
        bytes_done = sum(it.nbytes for it in self.items if it.state == "screened")
        states = {s: 0 for s in BATCH_STATES}
        for b in self.batches:
            states[b.state] += 1
        units_done = sum(done_units.values())
        if bytes_total:
            fraction = bytes_done / bytes_total
        else:
            fraction = 1.0 if self.units and units_done == len(self.units) else 0.0
        return {"units_total": len(self.units), "units_processed": units_done,
                "units_unreadable": sum(1 for u in self.units if u.note),
                "items_unreadable": sum(1 for it in self.items if it.state == "unreadable"),
                "bytes_total": bytes_total, "bytes_processed": bytes_done, "batches": states,
                "candidates": len(self.candidates), "invalid": len(self.invalid),
                "unknown": len(self.unknown), "changed": len(self.changed),
                "not_in_snapshot": len(self.not_in_snapshot),
                "outside_inventory": len(self.outside_inventory), "fraction": round(fraction, 6)}

    def unprocessed(self) -> list[str]:
        """Addresses not screened: items of pending or failed batches, unreadable items, and
        units that could not be read when the run was planned (by path)."""
        out = [it.address for it in self.items if it.state != "screened"]
        return out + [u.path for u in self.units if u.note]

    @property
    def complete(self) -> bool:
        return not self.unprocessed()

    def batch(self, bid: int) -> BatchRecord:
        for b in self.batches:
            if b.id == bid:
                return b
        raise KeyError(bid)

    # -- conversions ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION, "run": self.id, "path": self.path, "created": self.created,
            "screener": self.screener, "question": self.question, "scope": dict(self.scope),
            "batch_bytes": self.batch_bytes, "order": self.order, "settings": dict(self.settings),
            "progress": self.progress(),
            "candidates": [h.to_dict() for h in self.candidates],
            "invalid": [dict(x) for x in self.invalid], "unknown": [dict(x) for x in self.unknown],
            "changed": [dict(x) for x in self.changed], "not_in_snapshot": list(self.not_in_snapshot),
            "outside_inventory": [{"path": p, "reason": r} for p, r in self.outside_inventory],
            "batches": [b.to_dict() for b in self.batches],
            "unprocessed": self.unprocessed(),
            "last_call": None if self.last_call is None else dict(self.last_call),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)

    def to_polars(self):
        """The candidates, one row each (polars is imported lazily: the ``notebook`` extra)."""
        pl = polars_module()
        ev = [h.evidence[SIGNAL] for h in self.candidates]
        return pl.DataFrame(
            {"rank": [e.rank for e in ev], "id": [h.id for h in self.candidates],
             "path": [h.path for h in self.candidates],
             "line_start": [h.lines[0] if h.lines else None for h in self.candidates],
             "line_end": [h.lines[1] if h.lines else None for h in self.candidates],
             "batch": [e.details.get("batch") for e in ev], "item": [e.details.get("item") for e in ev],
             "score": [e.details.get("score") for e in ev], "note": [e.details.get("note") for e in ev],
             "excerpt": [h.excerpt for h in self.candidates]},
            schema_overrides={"rank": pl.Int64, "line_start": pl.Int64, "line_end": pl.Int64,
                              "batch": pl.Int64, "item": pl.Utf8, "score": pl.Float64,
                              "note": pl.Utf8, "excerpt": pl.Utf8, "id": pl.Utf8, "path": pl.Utf8})

    def batches_to_polars(self):
        pl = polars_module()
        rows = [b.to_dict() for b in self.batches]
        for r in rows:
            r["addresses"] = list(r["addresses"])
        return pl.DataFrame(rows) if rows else pl.DataFrame()

    def _summary(self) -> str:
        p = self.progress()
        b = p["batches"]
        return (f"screening run {self.id}: {p['units_processed']}/{p['units_total']} units, "
                f"{p['bytes_processed']}/{p['bytes_total']} bytes ({p['fraction']:.0%}); batches "
                f"{b['processed']} processed, {b['failed']} failed, {b['pending']} pending; "
                f"{p['candidates']} candidates, {p['invalid']} invalid, {p['unknown']} unknown; "
                f"{p['changed']} changed since the snapshot, {p['not_in_snapshot']} not in it")

    def __str__(self) -> str:
        lines = [self._summary()]
        for i, h in enumerate(self.candidates, 1):
            note = h.evidence[SIGNAL].details.get("note") or ""
            lines.append(f"{i:>3}. {h.path}:{h.lines[0] if h.lines else ''}  {h.excerpt[:80]!r}  "
                         f"({h.id}) {note[:60]}")
        for b in self.batches:
            if b.state == "failed":
                lines.append(f"  batch {b.id} failed: {b.error}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cands = [[i, h.path, f"{h.lines[0]}-{h.lines[1]}" if h.lines else "",
                  h.evidence[SIGNAL].details.get("note", ""), h.excerpt[:160], h.id]
                 for i, h in enumerate(self.candidates, 1)]
        batches = [[b.id, b.state, b.outcome, len(b.addresses), b.bytes, b.n_candidates,
                    b.n_invalid, f"{b.elapsed * 1000:.0f} ms", b.error[:120]] for b in self.batches[:200]]
        return ("<div><b>lar</b> " + html.escape(self._summary())
                + text_table(["#", "path", "lines", "note", "excerpt", "id"], cands)
                + "<details><summary>batches</summary>"
                + text_table(["batch", "state", "outcome", "items", "bytes", "candidates", "invalid",
                          "elapsed", "error"], batches) + "</details></div>")


def _hits(engine, store: RunStore, run_id: str, question: str | None) -> list[Hit]:
    rows = store.rows('SELECT batch, seq, address, path, hash, start, "end", line_a, line_b, note, '
                      "score, excerpt FROM outcomes WHERE kind='candidate' ORDER BY batch, seq")
    by_id: dict[str, Hit] = {}
    for bid, seq, address, path, h, s, e, la, lb, note, score, excerpt in rows:
        span = Span(h, s, e)
        if span.id in by_id:  # the same place named twice: keep the first, add the note
            first = by_id[span.id]
            ev = first.evidence[SIGNAL]
            notes = list(ev.details.get("also", ())) + [note]
            details = {**ev.details, "also": tuple(notes)}
            by_id[span.id] = Hit(first.span, first.signals,
                                 {SIGNAL: Evidence(SIGNAL, ev.rank, ev.score, ev.score_kind, ev.query,
                                                   (), details)},
                                 first.paths, first.lines, first.excerpt)
            continue
        paths = tuple(dict.fromkeys([path] + engine.index.paths_for_hash(h)))
        kind = "screener score, local to its batch" if score is not None else "none (no score given)"
        ev = Evidence(SIGNAL, len(by_id) + 1, 0.0 if score is None else float(score), kind, question,
                      (), {"run": run_id, "batch": bid, "item": address, "note": note, "score": score})
        by_id[span.id] = Hit(span, (SIGNAL,), {SIGNAL: ev}, paths, (la, lb), excerpt)
    return list(by_id.values())


def load_view(engine, store: RunStore, *, last_call: dict | None = None) -> ScreeningRun:
    """Read the record into a ``ScreeningRun``, comparing the snapshot with the file index now."""
    from lar.core.scope import Scope

    meta = store.meta()
    units = [SnapshotUnit(*r) for r in store.rows(
        "SELECT path, hash, size, text_bytes, note FROM units ORDER BY pos")]
    item_rows = store.rows('SELECT batch, address, unit, "end" - start, state, reason FROM items '
                           "ORDER BY batch, idx")
    items = [ItemRecord(*r) for r in item_rows]
    addresses: dict[int, list[str]] = {}
    for it in items:
        addresses.setdefault(it.batch, []).append(it.address)
    batches = [BatchRecord(r[0], r[1], addresses.get(r[0], ()), *r[2:]) for r in store.rows(
        "SELECT id, state, bytes, n_candidates, n_invalid, n_unknown, error, elapsed, screener, "
        "attempts FROM batches ORDER BY id")]
    other = {"invalid": [], "unknown": []}
    for kind, bid, seq, address, note, reason, returned in store.rows(
            "SELECT kind, batch, seq, address, note, reason, returned FROM outcomes "
            "WHERE kind != 'candidate' ORDER BY batch, seq"):
        row = {"batch": bid, "seq": seq, "item": address, "returned": returned}
        row.update({"reason": reason} if kind == "invalid" else {"reason": note})
        other[kind].append(row)
    now = engine.index.get_many([u.path for u in units])
    changed = []
    for u in units:
        rec = now.get(u.path)
        cur = None if rec is None or rec.deleted else rec.hash
        if cur != u.hash:
            changed.append({"path": u.path, "snapshot_hash": u.hash, "current_hash": cur,
                            "change": "deleted" if cur is None else "modified"})
    snap_paths = {u.path for u in units}
    scope = Scope.parse(meta.get("scope"))
    new = [x.path for x in engine.inventory(scope) if x.path not in snap_paths]
    question = meta.get("question")
    return ScreeningRun(
        id=meta["run"], path=str(store.path), created=meta.get("created", ""),
        screener=meta.get("screener", ""), question=question, scope=meta.get("scope") or {},
        batch_bytes=int(meta["batch_bytes"]), order=meta["order"], units=units, batches=batches,
        items=items, candidates=_hits(engine, store, meta["run"], question),
        invalid=other["invalid"], unknown=other["unknown"], changed=changed, not_in_snapshot=new,
        outside_inventory=[tuple(r) for r in store.rows("SELECT path, reason FROM skipped ORDER BY path")],
        settings={k: meta.get(k) for k in ("seed", "keep_text", "context_lines", "lar_version",
                                           "created_ts")},
        last_call=last_call)
