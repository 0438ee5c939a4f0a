"""The status view: one coverage bar per layer, refreshed on a timer while the background
builder runs, and the last call's per-layer table (ran / aborted / skipped / failed, reason,
elapsed, coverage at call time).

``refresh()`` reads ``engine.status()`` once and redraws (tests call it directly); ``start()``
starts the engine's background build and a thread that refreshes every ``interval`` seconds
until ``stop()``, until every layer is fully built, or after ``max_seconds``. A layer whose
version changed between two refreshes (rebuilt, new model) is reported in the view.
"""
from __future__ import annotations

import html
import threading
import time
from typing import Any

from lar.core.errors import LarError, require

from lar_magics import render
from lar_magics.session import SESSION, unrecorded

widgets = require("ipywidgets", "notebook")
BAR_WIDTH = "360px"  # every layer's bar (with its name) has this width, whatever its note
COUNT_WIDTH = "160px"


class StatusView(widgets.VBox):
    def __init__(self, engine, *, scope: Any = None, interval: float = 1.0, result=None):
        self.engine, self.scope, self.interval = engine, scope, float(interval)
        self.result = result  # a Results / lar.Result; None: the session's last search
        self.status = None
        self.ticks = 0
        self.notes: list[str] = []
        self._versions: dict[str, str] = {}
        self._bars: dict[str, tuple[Any, Any]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_build = False
        self._lock = threading.Lock()
        self.summary = widgets.HTML()
        self.bars_box = widgets.VBox()
        self.notice = widgets.HTML()
        self.runs = widgets.HTML()
        self.live_button = widgets.ToggleButton(description="background build", value=False,
                                                tooltip="build lazily in the background and "
                                                        "refresh these bars while it runs")
        self.live_button.observe(self._toggle, names="value")
        refresh = widgets.Button(description="refresh")
        refresh.on_click(lambda _b: self.refresh())
        super().__init__([widgets.HTML(render.CSS), self.summary,
                          widgets.HBox([refresh, self.live_button]), self.bars_box, self.notice,
                          self.runs])
        self.add_class("lar-status")
        self.refresh()

    # -- drawing -------------------------------------------------------------------------------
    def _bar(self, name: str):
        """A layer's row: the bar and its counts at a fixed width (they never shrink, whatever
        the note), then the note, which takes the rest of the line and wraps."""
        if name not in self._bars:
            bar = widgets.FloatProgress(min=0.0, max=1.0, description=name,
                                        style={"description_width": "110px"},
                                        layout=widgets.Layout(width=BAR_WIDTH, min_width=BAR_WIDTH,
                                                              flex="0 0 auto"))
            count = widgets.HTML(layout=widgets.Layout(width=COUNT_WIDTH, min_width=COUNT_WIDTH,
                                                       flex="0 0 auto"))
            note = widgets.HTML(layout=widgets.Layout(flex="1 1 0", min_width="0"))
            note.add_class("lar-status-note")
            self._bars[name] = (bar, count, note)
        return self._bars[name]

    def refresh(self):
        """Read the status once and redraw the bars, the notes and the last call's table."""
        with self._lock, unrecorded():
            return self._refresh(self.engine.status(self.scope))

    def _refresh(self, st):
        rows = []
        for l in st.layers:
            bar, count, note = self._bar(l.name)
            bar.value = l.coverage
            bar.bar_style = "success" if l.coverage >= 0.9995 else "info"
            units = f" ({l.built_units}/{l.units} units)" if l.units else ""
            count.value = f"{l.coverage:.0%}{units}"
            note.value = (f"<div class='lar-note-text' style='color:#555;line-height:1.35;"
                          f"font-size:12px;padding-top:5px'>{html.escape(l.notes)}</div>"
                          if l.notes else "")
            old = self._versions.get(l.name)
            if old is not None and old != l.version:
                self.notes.append(f"layer {l.name} was rebuilt: version {old} -> {l.version}")
            self._versions[l.name] = l.version
            row = widgets.HBox([bar, count, note], layout=widgets.Layout(width="100%"))
            row.add_class("lar-status-row")
            rows.append(row)
        if [r.children[0] for r in self.bars_box.children] != [r.children[0] for r in rows]:
            self.bars_box.children = rows
        live = " &middot; refreshing every %.1f s" % self.interval if self.running else ""
        self.summary.value = (f"<b>lar</b> {html.escape(st.root)}: {st.units} units "
                              f"({st.distinct_hashes} distinct), {len(st.skipped)} skipped{live}")
        self.notice.value = render.note_html(self.notes[-5:])
        self.runs.value = self._runs_html()
        self.status = st
        self.ticks += 1
        return st

    def _runs_html(self) -> str:
        res = self.result if self.result is not None else SESSION.last
        res = getattr(res, "result", res)
        if res is None:
            return "<div style='color:#555'>no search yet: the last call's layers show here</div>"
        return (f"<div>last call: <code>{html.escape(str(res.query))}</code>, "
                f"{len(res.hits)} hits in {res.elapsed * 1000:.0f} ms</div>" + render.runs_html(res.runs))

    def _repr_html_(self) -> str:  # where widgets are not live
        return (render.CSS + f"<div>{self.summary.value}</div>" + render.coverage_html(self.status)
                + self.notice.value + self.runs.value)

    def coverage(self) -> dict[str, float]:
        """Coverage per layer as of the last refresh."""
        return {l.name: l.coverage for l in self.status.layers} if self.status else {}

    # -- live refresh --------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, build: bool = True, interval: float | None = None,
              max_seconds: float = 3600.0) -> "StatusView":
        """Start the background build (``build=True``) and refresh on a timer."""
        if interval is not None:
            self.interval = float(interval)
        if build and not self._started_build:
            self.engine.start_background_build()
            self._started_build = True
        if not self.running:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, args=(max_seconds,),
                                            name="lar-status-view", daemon=True)
            self._thread.start()
        if not self.live_button.value:
            self.live_button.value = True
        return self

    def stop(self, build: bool = True) -> None:
        """Stop refreshing (and the background build this view started)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, 2 * self.interval))
        self._thread = None
        if build and self._started_build:
            self.engine.stop_background_build()
            self._started_build = False
        if self.live_button.value:
            self.live_button.value = False
        self.refresh()

    def _loop(self, max_seconds: float) -> None:
        end = time.monotonic() + max_seconds
        full = 0
        while not self._stop.wait(self.interval):
            try:
                st = self.refresh()
            except LarError as exc:  # the engine was closed underneath: say so and stop
                self.notice.value = render.note_html([f"status refresh stopped: {exc}"])
                break
            full = full + 1 if all(l.coverage >= 0.9995 for l in st.layers) else 0
            if full >= 2 or time.monotonic() > end:
                break
        self._thread = None

    def _toggle(self, change) -> None:
        if change["new"] and not self.running:
            self.start()
        elif not change["new"] and self.running:
            self.stop()


def status_view(engine=None, **kw) -> StatusView:
    """The status view of ``engine`` (default: the notebook's engine)."""
    return StatusView(engine if engine is not None else SESSION.require(), **kw)


__all__ = ["StatusView", "status_view"]
