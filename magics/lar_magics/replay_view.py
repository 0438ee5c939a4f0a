"""The trace replay view: step through a recorded JSONL agent trace, see what each call returned,
re-run one step with other layers or another timebox and see the difference.

``step_data(engine, step)`` is the data one step shows (its call, parameters, layer run states and
the returned hits with their text fetched through ``engine.fetch``); ``ReplayView.rerun(...)``
calls ``lar.record.replay.replay_step`` and keeps the ``StepDiff``. If the trace file changes underneath
the view (an agent still appending to it, an edit), the view says so and reloads it.
"""
from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from lar.core.errors import HitNotFoundError, LarError, StaleSpanError, require
from lar.core.types import parse_hit_id

__all__ = ["ReplayViewError", "ReturnedHit", "StepData", "step_data", "ReplayView", "replay_view"]

EXCERPT = 200


class ReplayViewError(LarError):
    """The replay view could not do what was asked; the message says what to do."""


@dataclass(frozen=True)
class ReturnedHit:
    id: str
    path: str | None = None
    lines: tuple[int, int] | None = None
    excerpt: str = ""
    note: str = ""  # e.g. "the file changed since the trace"


@dataclass(frozen=True)
class StepData:
    seq: int
    call: str
    params: dict[str, Any]
    hits: tuple[ReturnedHit, ...]
    runs: tuple[dict[str, Any], ...]
    elapsed_ms: float
    error: str | None
    session: str
    source: str
    t: str


def _no_record():
    from lar.record.trace import call_context

    return call_context(record=False)  # what the view itself calls is never traced


def fetch_returned(engine, hit_id: str) -> ReturnedHit:
    """A returned id with its current text (or why there is none)."""
    try:
        parse_hit_id(hit_id)
    except HitNotFoundError:
        if "@" in hit_id:  # an inventory entry: path@hash
            return ReturnedHit(hit_id, hit_id.rsplit("@", 1)[0], note="inventory entry (path@hash)")
        return ReturnedHit(hit_id, note="not a hit id")
    try:
        with _no_record():
            f = engine.fetch(hit_id)
    except (HitNotFoundError, StaleSpanError) as exc:
        return ReturnedHit(hit_id, note=f"cannot fetch it now: {exc}")
    text = " ".join(f.text.split())
    excerpt = text if len(text) <= EXCERPT else text[:EXCERPT - 1] + "…"
    note = f.note if f.changed else ""
    return ReturnedHit(hit_id, f.path, tuple(f.lines), excerpt, note)


def step_data(engine, step) -> StepData:
    """What one recorded step shows: call, parameters, layer runs, returned hits and their text."""
    return StepData(seq=step.seq, call=step.call, params=json.loads(json.dumps(
        dict(step.params), default=str)), hits=tuple(fetch_returned(engine, i)
                                                       for i in step.returned_ids),
        runs=tuple(dict(r) for r in step.runs), elapsed_ms=step.elapsed_ms, error=step.error,
        session=step.session, source=step.source, t=step.t)


def _label(step) -> str:
    p = step.params
    what = p.get("query", p.get("id", p.get("path_or_hash", p.get("scope", ""))))
    what = what if isinstance(what, str) else json.dumps(what, ensure_ascii=False, default=str)
    return f"#{step.seq} {step.call} {what[:50]}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "") -> str:
    th = "".join(f"<th style='text-align:left;padding:1px 6px'>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;padding:1px 6px'>{c}</td>"
                                    for c in r) + "</tr>" for r in rows)
    return f"<table class='{cls}'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def step_html(d: StepData) -> str:
    esc = html.escape
    shown = {k: v for k, v in d.params.items() if v is not None}  # the recorded defaults too
    params = esc(json.dumps(shown, ensure_ascii=False, default=str))
    hits = [[i, f"<code style='white-space:nowrap'>{esc(h.id)}</code>", esc(str(h.path or "")),
             "" if not h.lines else f"{h.lines[0]}-{h.lines[1]}", esc(h.excerpt),
             f"<i>{esc(h.note)}</i>"] for i, h in enumerate(d.hits, 1)]
    runs = [[esc(str(r.get("name"))), esc(str(r.get("state", ""))), esc(str(r.get("reason", ""))),
             r.get("contributions", ""), "" if r.get("elapsed") is None else
             f"{float(r['elapsed']) * 1000:.1f} ms",
             "" if r.get("coverage") is None else f"{float(r['coverage']):.0%}"] for r in d.runs]
    err = f"<div style='color:#b00'>error: {esc(d.error)}</div>" if d.error else ""
    return (f"<div class='lar-replay-step'><b>#{d.seq} {esc(d.call)}</b> at {esc(d.t)} "
            f"({esc(d.source)}, session {esc(d.session)}), {d.elapsed_ms:.1f} ms{err}"
            f"<pre style='font-size:11px;margin:2px 0;white-space:pre-wrap'>{params}</pre>"
            f"<b>returned</b> ({len(d.hits)})"
            + _table(["#", "id", "path", "lines", "text now", "note"], hits, "lar-replay-hits")
            + ("<b>layers</b>" + _table(["layer", "state", "reason", "hits", "elapsed", "coverage"],
                                        runs) if runs else "") + "</div>")


def diff_html(diff, excerpts: dict[str, ReturnedHit]) -> str:
    esc = html.escape
    if diff.skipped:
        return f"<div class='lar-replay-diff'><i>not replayed: {esc(diff.skipped)}</i></div>"
    if diff.error:
        return f"<div class='lar-replay-diff' style='color:#b00'>re-run failed: {esc(diff.error)}</div>"
    over = ", ".join(f"{k}={v}" for k, v in diff.params_used.items()
                     if k in ("layers", "timebox", "k"))
    rows = []
    for i in diff.added:
        h = excerpts.get(i, ReturnedHit(i))
        rows.append(["<span style='color:#080'>+ added</span>", f"<code>{esc(i)}</code>",
                     esc(str(h.path or "")), esc(h.excerpt[:120])])
    for i in diff.removed:
        h = excerpts.get(i, ReturnedHit(i))
        rows.append(["<span style='color:#b00'>− removed</span>", f"<code>{esc(i)}</code>",
                     esc(str(h.path or "")), esc(h.excerpt[:120])])
    for i, (a, b) in diff.rank_changes.items():
        rows.append([f"moved {a} → {b}", f"<code>{esc(i)}</code>",
                     esc(str(excerpts.get(i, ReturnedHit(i)).path or "")), ""])
    names = sorted(set(diff.old_states) | set(diff.new_states))
    states = [[esc(n), esc(diff.old_states.get(n, "")), esc(diff.new_states.get(n, ""))]
              for n in names if diff.old_states.get(n) != diff.new_states.get(n)]
    jac = "-" if diff.jaccard is None else f"{diff.jaccard:.2f}"
    new_ms = "-" if diff.new_elapsed_ms is None else f"{diff.new_elapsed_ms:.1f}"
    return (f"<div class='lar-replay-diff'><b>re-run #{diff.seq}</b> ({esc(over) or 'as recorded'})"
            f": jaccard {jac}, +{len(diff.added)} −{len(diff.removed)}, moved "
            f"{len(diff.rank_changes)}, {diff.old_elapsed_ms:.1f} → {new_ms} ms"
            + (_table(["change", "id", "path", "text"], rows) if rows else
               "<div>same ids in the same order</div>")
            + ("<b>layer states that changed</b>" + _table(["layer", "recorded", "re-run"], states)
               if states else "") + "</div>")


class ReplayView(require("ipywidgets", "notebook").VBox):
    """Step through a trace; ``show(i)``, ``rerun(layers=..., timebox=...)``, ``check()``,
    ``reload()`` drive it from code."""

    def __init__(self, engine, trace_path: str | os.PathLike):
        from lar.record.trace import load_trace

        w = require("ipywidgets", "notebook")
        super().__init__()
        self.engine, self.path = engine, Path(trace_path)
        self.trace = load_trace(self.path)
        self._stat = self._stat_now()
        self.index = 0
        self.data: StepData | None = None
        self.diff = None
        self.notice, self.head, self.step_box, self.diff_box = (w.HTML() for _ in range(4))
        self.slider = w.IntSlider(min=0, max=max(0, len(self.trace) - 1), description="step",
                                  continuous_update=False)
        self.picker = w.Dropdown(options=self._options(), layout=w.Layout(width="460px"))
        self.layers = w.SelectMultiple(options=sorted(engine.layers), rows=6,
                                       description="layers", layout=w.Layout(width="260px"))
        self.timebox = w.Text(placeholder="as recorded, e.g. 200ms", description="timebox")
        self.k = w.Text(placeholder="as recorded", description="k")
        self.button = w.Button(description="re-run this step", button_style="primary")
        self.button.on_click(lambda _: self._rerun_from_widgets())
        self.slider.observe(lambda c: self._pick(c["new"]), names="value")
        self.picker.observe(lambda c: self._pick(c["new"]), names="value")
        self.children = [self.notice, self.head, w.HBox([self.slider, self.picker]),
                         self.step_box,
                         w.HTML("<b>re-run</b> (no layer selected: the recorded layers)"),
                         w.HBox([self.layers, w.VBox([self.timebox, self.k, self.button])]),
                         self.diff_box]
        self.add_class("lar-replay")
        self._render_head()
        if len(self.trace):
            self.show(0)
        else:
            self.step_box.value = "<i>the trace has no calls yet</i>"

    # -- state ---------------------------------------------------------------------------------
    def _stat_now(self):
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def _options(self):
        return [(_label(s), i) for i, s in enumerate(self.trace.steps)]

    def _render_head(self) -> None:
        calls: dict[str, int] = {}
        for s in self.trace.steps:
            calls[s.call] = calls.get(s.call, 0) + 1
        summary = ", ".join(f"{n} {c}" for c, n in calls.items()) or "no calls"
        self.head.value = (f"<div><b>trace</b> <code>{html.escape(str(self.path))}</code>: "
                           f"{len(self.trace)} steps ({html.escape(summary)})</div>")

    def check(self) -> str | None:
        """Why the loaded trace no longer matches its file (changed or deleted), or None."""
        now = self._stat_now()
        if now == self._stat:
            return None
        return "the trace file was deleted" if now is None else "the trace file changed"

    def reload(self, reason: str | None = None) -> None:
        """Read the trace again (keeping the step shown when it still exists)."""
        from lar.record.trace import load_trace

        if not self.path.exists():
            self.notice.value = (f"<div class='lar-stale' style='background:#fff3cd'>"
                                 f"{html.escape(reason or 'the trace file is gone')}: showing the "
                                 "trace as it was loaded</div>")
            self._stat = None
            return
        seq = self.trace.steps[self.index].seq if len(self.trace) else None
        self.trace, self._stat = load_trace(self.path), self._stat_now()
        seqs = [s.seq for s in self.trace.steps]
        self.index = seqs.index(seq) if seq in seqs else 0
        self.slider.max = max(0, len(self.trace) - 1)
        self.picker.options = self._options()
        self._render_head()
        self.notice.value = (f"<div class='lar-stale' style='background:#fff3cd'>data changed "
                             f"underneath this view: {html.escape(reason or 'reloaded')}; "
                             f"reloaded, {len(self.trace)} steps</div>")
        if len(self.trace):
            self.show(self.index)

    def _refresh_if_stale(self) -> None:
        reason = self.check()
        if reason:
            self.reload(reason)

    # -- actions -------------------------------------------------------------------------------
    def _pick(self, i) -> None:
        if i is not None and i != self.index:
            self.show(int(i))

    def show(self, i: int) -> StepData:
        """Show step ``i`` (position in the trace, 0-based)."""
        self._refresh_if_stale()
        if not 0 <= i < len(self.trace):
            raise ReplayViewError(f"step {i} is outside the trace (0..{len(self.trace) - 1})")
        self.index = i
        self.slider.value, self.picker.value = i, i
        self.data = step_data(self.engine, self.trace.steps[i])
        self.step_box.value = step_html(self.data)
        self.diff, self.diff_box.value = None, ""
        return self.data

    def rerun(self, layers: Sequence[str] | None = None, timebox: Any = None,
              k: int | None = None):
        """Replay the shown step with other layers / timebox / k; returns the ``StepDiff``."""
        from lar.record.replay import replay_step

        self._refresh_if_stale()
        if not len(self.trace):
            raise ReplayViewError("the trace has no steps to re-run; record some calls first")
        step = self.trace.steps[self.index]
        self.diff = replay_step(step, self.engine, layers=list(layers) if layers else None,
                                timebox=timebox, k=k)
        ids = list(self.diff.added) + list(self.diff.removed) + list(self.diff.rank_changes)
        known = {h.id: h for h in (self.data.hits if self.data else ())}
        excerpts = {i: known.get(i) or fetch_returned(self.engine, i) for i in ids}
        self.diff_box.value = diff_html(self.diff, excerpts)
        return self.diff

    def _rerun_from_widgets(self) -> None:
        try:
            k = int(self.k.value) if self.k.value.strip() else None
            self.rerun(list(self.layers.value) or None, self.timebox.value.strip() or None, k)
        except (LarError, ValueError) as exc:
            self.diff_box.value = f"<div style='color:#b00'>{html.escape(str(exc))}</div>"


def replay_view(engine, trace_path: str | os.PathLike) -> ReplayView:
    """The replay widget for the JSONL trace at ``trace_path``."""
    if not Path(trace_path).is_file():
        raise ReplayViewError(f"no trace file at {str(trace_path)!r}; record one with "
                          "eng.record_trace(path) (or lar.open(root, trace=path))")
    return ReplayView(engine, trace_path)
