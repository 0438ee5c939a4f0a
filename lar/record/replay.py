"""Replaying a recorded trace against the current engine, and what changed (``lar.record.trace``).

Only read-only calls (search, fetch, status, inventory, read) run again; build and run_tool are
reported as skipped. Replays are neither traced nor logged. See docs/traces.md.
"""
from __future__ import annotations

import html
import json
import os
import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from lar.core.errors import ConfigError, LarError
from lar.core.timebox import parse_duration

SEARCH_KEYS = ("timebox", "k", "emphasis", "layers", "exclude", "scope", "fusion", "rrf_c",
               "strict", "tokens")


def describe_output(call: str, out: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """The ids a call returned and its per-layer runs, as a trace records them."""
    if call == "search":
        return [h.id for h in out.hits], [r.to_dict() for r in out.runs]
    if call == "fetch":
        return [out.current_id or out.id], []
    if call == "status":  # one run per layer: its coverage and built units at call time
        return [], [{"name": l.name, "state": "status", "reason": l.notes,
                     "contributions": l.built_units, "elapsed": 0.0,
                     "coverage": round(l.coverage, 4)} for l in out.layers]
    if call == "inventory":  # path@hash: a replay shows added, removed and changed units
        return [f"{x.path}@{x.hash[:12]}" for x in out], []
    if call == "build":
        return [], [{"name": n, "state": d.get("state", ""), "reason": "",
                     "contributions": d.get("ok", 0), "elapsed": 0.0, "coverage": d.get("coverage")}
                    for n, d in (out.get("layers") or {}).items()]
    if call == "read":  # the engine passes the id of what was read
        return [str(out)], []
    return [], []


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class StepDiff:
    """One replayed call: ids added, removed, kept (and moved), layer states before and after."""

    seq: int
    call: str
    params_used: Mapping[str, Any]
    old_ids: tuple[str, ...]
    new_ids: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]
    rank_changes: Mapping[str, tuple[int, int]]
    jaccard: float | None
    old_states: Mapping[str, str]
    new_states: Mapping[str, str]
    old_elapsed_ms: float
    new_elapsed_ms: float | None
    error: str | None = None
    old_error: str | None = None
    skipped: str = ""  # why the step was not replayed ("" when it was)
    coverage_changes: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("old_ids", "new_ids", "added", "removed", "kept"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("params_used", "rank_changes", "old_states", "new_states", "coverage_changes"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if self.jaccard is not None and not 0.0 <= self.jaccard <= 1.0:
            raise ConfigError(f"StepDiff.jaccard must be in [0, 1], got {self.jaccard}")
        if set(self.added) & set(self.old_ids) or set(self.removed) & set(self.new_ids):
            raise ConfigError("StepDiff.added must be new ids only and removed old ids only")
        if self.skipped and self.new_ids:
            raise ConfigError("a skipped StepDiff has no new ids")

    @property
    def changed(self) -> bool:
        if self.skipped:
            return False
        both = set(self.old_states) & set(self.new_states)
        return bool(self.added or self.removed or self.rank_changes or self.coverage_changes
                    or any(self.old_states[n] != self.new_states[n] for n in both)
                    or (self.error is None) != (self.old_error is None))

    @property
    def label(self) -> str:
        p = self.params_used
        for key in ("query", "id", "path_or_hash", "scope"):
            if p.get(key) is not None:
                v = p[key]
                return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        return ""

    def to_dict(self) -> dict[str, Any]:
        from lar.record.trace import jsonable

        return {"seq": self.seq, "call": self.call, "params_used": jsonable(self.params_used),
                "old_ids": list(self.old_ids), "new_ids": list(self.new_ids),
                "added": list(self.added), "removed": list(self.removed), "kept": list(self.kept),
                "rank_changes": {k: list(v) for k, v in self.rank_changes.items()},
                "jaccard": self.jaccard, "old_states": dict(self.old_states),
                "new_states": dict(self.new_states), "old_elapsed_ms": self.old_elapsed_ms,
                "new_elapsed_ms": self.new_elapsed_ms, "error": self.error,
                "old_error": self.old_error, "skipped": self.skipped,
                "coverage_changes": {k: list(v) for k, v in self.coverage_changes.items()},
                "changed": self.changed}

    def line(self) -> str:
        head = f"#{self.seq} {self.call} {self.label[:60]!r}"
        if self.skipped:
            return f"{head}: skipped ({self.skipped})"
        if self.error:
            return f"{head}: error {self.error}"
        moves = [f"{n} {self.old_states[n]}->{self.new_states[n]}"
                 for n in self.old_states if n in self.new_states and self.old_states[n] != self.new_states[n]]
        jac = "-" if self.jaccard is None else f"{self.jaccard:.2f}"
        out = (f"{head}: jaccard {jac}, +{len(self.added)} -{len(self.removed)} "
               f"moved {len(self.rank_changes)}, {self.old_elapsed_ms:.1f} -> "
               f"{(self.new_elapsed_ms or 0.0):.1f} ms")
        if self.old_error:
            moves.append(f"recorded call failed ({self.old_error})")
        return out + (f"; {', '.join(moves)}" if moves else "")


def diff_ids(old: Sequence[str], new: Sequence[str]):
    """added, removed, kept (in new order), rank changes {id: (old, new)} and Jaccard."""
    old_rank: dict[str, int] = {}
    new_rank: dict[str, int] = {}
    for ranks, ids in ((old_rank, old), (new_rank, new)):
        for r, i in enumerate(ids, 1):
            ranks.setdefault(i, r)  # an id listed twice keeps its best rank
    added = tuple(i for i in new_rank if i not in old_rank)
    removed = tuple(i for i in old_rank if i not in new_rank)
    kept = tuple(i for i in new_rank if i in old_rank)
    moves = {i: (old_rank[i], new_rank[i]) for i in kept if old_rank[i] != new_rank[i]}
    union = len(old_rank) + len(added)
    jaccard = 1.0 if union == 0 else len(kept) / union
    return added, removed, kept, moves, jaccard


def _coverage(runs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {r["name"]: r.get("coverage") for r in runs}


def _params_for(step, layers, timebox, k) -> dict[str, Any]:
    params = dict(step.params)
    if step.call == "search":
        if layers is not None:
            params["layers"], params["exclude"] = list(layers), None
        if timebox is not None:
            params["timebox"] = timebox
        if k is not None:
            params["k"] = k
    return params


def _run(step, engine, params: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    call = step.call
    if call == "search":
        if "query" not in params:
            raise ConfigError("the recorded search has no 'query' parameter")
        return describe_output("search", engine.search(
            params["query"], **{key: params[key] for key in SEARCH_KEYS if key in params}))
    if call == "fetch":
        return describe_output("fetch", engine.fetch(params["id"], context=params.get("context", 0)))
    if call == "status":
        return describe_output("status", engine.status(params.get("scope")))
    if call == "inventory":
        return describe_output("inventory", engine.inventory(params.get("scope")))
    if call == "read":
        span = params.get("span")
        h, s, e, _ = engine.units.read_unit(params["path_or_hash"], tuple(span) if span else None)
        return describe_output("read", f"{h[:12]}:{s}-{e}")
    raise ConfigError(f"call {call!r} cannot be replayed")


def replay_step(step, engine, *, layers: Sequence[str] | None = None, timebox: Any = None,
                k: int | None = None) -> StepDiff:
    """Run one recorded call again (with the overrides, for searches) and diff the outcome."""
    from lar.record.trace import READ_ONLY, call_context, error_text

    layers, timebox, k = _check_overrides(engine, layers, timebox, k)
    params = _params_for(step, layers, timebox, k)
    base = dict(seq=step.seq, call=step.call, params_used=params, old_ids=step.returned_ids,
                old_states=step.states, old_elapsed_ms=step.elapsed_ms, old_error=step.error)
    if step.call not in READ_ONLY:
        return StepDiff(new_ids=(), added=(), removed=(), kept=(), rank_changes={}, jaccard=None,
                        new_states={}, new_elapsed_ms=None,
                        skipped=f"{step.call} changes state or runs a tool; only read-only calls "
                                f"({', '.join(READ_ONLY)}) are replayed", **base)
    t0 = time.perf_counter()
    error, new_ids, runs = None, [], []
    with call_context(record=False):
        try:
            new_ids, runs = _run(step, engine, params)
        except (LarError, KeyError) as exc:
            error = error_text(exc) if isinstance(exc, LarError) else f"missing parameter {exc}"
    elapsed = (time.perf_counter() - t0) * 1000
    added, removed, kept, moves, jaccard = diff_ids(step.returned_ids, new_ids)
    old_cov, new_cov = _coverage(step.runs), _coverage(runs)
    cov = {n: (old_cov[n], new_cov[n]) for n in old_cov
           if n in new_cov and old_cov[n] is not None and new_cov[n] is not None
           and old_cov[n] != new_cov[n]}
    return StepDiff(new_ids=new_ids, added=added, removed=removed, kept=kept, rank_changes=moves,
                    jaccard=None if error else jaccard,
                    new_states={r["name"]: str(r.get("state", "")) for r in runs},
                    new_elapsed_ms=round(elapsed, 3), error=error, coverage_changes=cov, **base)


def _check_overrides(engine, layers, timebox, k):
    if isinstance(layers, str):
        layers = [x.strip() for x in layers.split(",") if x.strip()]
    if layers is not None:
        from lar.core.errors import UnknownLayerError

        layers = list(layers)
        if not layers:
            raise ConfigError("layers= is empty; name at least one layer, or pass None")
        for n in layers:
            if n not in engine.layers:
                raise UnknownLayerError(n, list(engine.layers))
    if timebox is not None:
        timebox = parse_duration(timebox)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    return layers, timebox, k


@dataclass(frozen=True)
class ReplayReport:
    trace: str
    overrides: Mapping[str, Any]
    steps: tuple[StepDiff, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "overrides", _frozen(self.overrides))

    def summary(self) -> dict[str, Any]:
        ran = [s for s in self.steps if not s.skipped]
        ok = [s for s in ran if s.error is None]
        jac = [s.jaccard for s in ok if s.jaccard is not None]

        def mean(xs):
            xs = [x for x in xs if x is not None]
            return round(sum(xs) / len(xs), 4) if xs else None

        return {"steps": len(self.steps), "replayed": len(ran), "skipped": len(self.steps) - len(ran),
                "errors": len(ran) - len(ok), "changed": sum(s.changed for s in ran),
                "unchanged": sum(not s.changed for s in ran), "mean_jaccard": mean(jac),
                "added": sum(len(s.added) for s in ran), "removed": sum(len(s.removed) for s in ran),
                "mean_old_elapsed_ms": mean([s.old_elapsed_ms for s in ran]),
                "mean_new_elapsed_ms": mean([s.new_elapsed_ms for s in ran]),
                "overrides": dict(self.overrides)}

    def to_dict(self) -> dict[str, Any]:
        from lar.record.trace import jsonable

        return {"schema": 1, "trace": self.trace, "overrides": jsonable(self.overrides),
                "summary": self.summary(), "steps": [s.to_dict() for s in self.steps]}

    def to_polars(self):
        from lar.core.errors import require

        pl = require("polars", "notebook")
        rows = [{"seq": s.seq, "call": s.call, "label": s.label, "skipped": s.skipped,
                 "error": s.error, "jaccard": s.jaccard, "changed": s.changed,
                 "added": list(s.added), "removed": list(s.removed), "kept": list(s.kept),
                 "n_old": len(s.old_ids), "n_new": len(s.new_ids),
                 "old_elapsed_ms": s.old_elapsed_ms, "new_elapsed_ms": s.new_elapsed_ms}
                for s in self.steps]
        return pl.DataFrame(rows, schema_overrides={"jaccard": pl.Float64, "error": pl.Utf8,
                                                    "new_elapsed_ms": pl.Float64,
                                                    "added": pl.List(pl.Utf8),
                                                    "removed": pl.List(pl.Utf8),
                                                    "kept": pl.List(pl.Utf8)})

    def _head(self) -> str:
        s = self.summary()
        over = ", ".join(f"{k}={v}" for k, v in self.overrides.items()) or "no overrides"
        jac = "-" if s["mean_jaccard"] is None else f"{s['mean_jaccard']:.2f}"
        return (f"replay of {os.path.basename(self.trace)} ({over}): {s['steps']} steps, "
                f"{s['replayed']} replayed, {s['skipped']} skipped, {s['errors']} errors, "
                f"{s['changed']} changed, mean jaccard {jac}")

    def __str__(self) -> str:
        return "\n".join([self._head()] + ["  " + s.line() for s in self.steps])

    def _repr_html_(self) -> str:
        def cell(x: Any) -> str:
            return f"<td style='text-align:left'>{html.escape(str(x))}</td>"

        head = "".join(f"<th style='text-align:left'>{h}</th>" for h in
                       ("#", "call", "what", "jaccard", "added", "removed", "moved", "old ms",
                        "new ms", "note"))
        rows = []
        for s in self.steps:
            note = s.skipped or s.error or ", ".join(
                f"{n}: {s.old_states[n]}→{s.new_states[n]}" for n in s.old_states
                if n in s.new_states and s.old_states[n] != s.new_states[n])
            jac = "" if s.jaccard is None else f"{s.jaccard:.2f}"
            new_ms = "" if s.new_elapsed_ms is None else f"{s.new_elapsed_ms:.1f}"
            rows.append("<tr>" + "".join(cell(x) for x in (
                s.seq, s.call, s.label[:80], jac, " ".join(s.added), " ".join(s.removed),
                len(s.rank_changes), f"{s.old_elapsed_ms:.1f}", new_ms, note)) + "</tr>")
        return (f"<div><b>lar</b> {html.escape(self._head())}<table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(rows)}</tbody></table></div>")


def replay(trace_or_path, engine, *, layers: Sequence[str] | None = None, timebox: Any = None,
           k: int | None = None, steps: Iterable[int] | None = None) -> ReplayReport:
    """Replay the read-only calls of a trace (a ``Trace`` or a path) against ``engine``.

    ``layers``, ``timebox`` and ``k`` override the recorded search parameters (``layers`` also
    clears the recorded ``exclude``); ``steps`` picks recorded sequence numbers."""
    from lar.record.trace import Trace, load_trace

    trace = trace_or_path if isinstance(trace_or_path, Trace) else load_trace(trace_or_path)
    layers, timebox, k = _check_overrides(engine, layers, timebox, k)
    chosen = list(trace.steps)
    if steps is not None:
        wanted = set(steps)
        unknown = wanted - {s.seq for s in chosen}
        if unknown:
            raise ConfigError(f"steps {sorted(unknown)} are not in the trace (it has seq "
                              f"{chosen[0].seq if chosen else '-'}..{chosen[-1].seq if chosen else '-'})")
        chosen = [s for s in chosen if s.seq in wanted]
    overrides = {key: v for key, v in (("layers", layers), ("timebox", timebox), ("k", k))
                 if v is not None}
    return ReplayReport(trace.path, overrides,
                        tuple(replay_step(s, engine, layers=layers, timebox=timebox, k=k)
                              for s in chosen))
