"""The anytime view: a search shown as its hits arrive while layers finish inside the timebox.

The orchestrator has no progress callback, so the view runs the same search at growing
timeboxes (25 ms, 100 ms, 400 ms, then the full timebox): each stage is what a caller with that
deadline gets. A stage lists the hits it added and dropped, each layer's state, the time the
search took and, when ``qrels`` ({path: grade}) are given, the stage's quality (``metric``,
nDCG@10 by default, scored by the evaluation harness). The view draws quality against time, or
without qrels each hit's rank against time (``charts.anytime_chart``). ``stages`` holds them as
data; ``results`` is the last stage's ``Results``.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from lar.core.errors import require
from lar.core.timebox import parse_duration

from lar_magics import render
from lar_magics.results import Results, search

widgets = require("ipywidgets", "notebook")
DEFAULT_STEPS = (0.025, 0.1, 0.4)
DEFAULT_METRIC = "ndcg@10"


@dataclass(frozen=True)
class Stage:
    timebox: float  # seconds given to this stage's search
    elapsed: float  # seconds it took
    hits: tuple[str, ...]  # hit ids, best first
    added: tuple[str, ...]  # ids not in the previous stage
    dropped: tuple[str, ...]  # ids of the previous stage that are gone
    states: dict[str, str] = field(default_factory=dict)  # layer -> ran/aborted/skipped/failed
    results: Results | None = field(default=None, repr=False, compare=False)
    quality: dict[str, float] = field(default_factory=dict)  # metric -> value (with qrels)

    def to_dict(self) -> dict[str, Any]:
        return {"timebox": self.timebox, "elapsed": round(self.elapsed, 6), "hits": list(self.hits),
                "added": list(self.added), "dropped": list(self.dropped), "states": dict(self.states),
                "quality": dict(self.quality)}


def ranked_paths(result, qrels: Mapping[str, Any]) -> list[str]:
    """The result's documents best first (a hit in identical files counts as the judged one)."""
    out: list[str] = []
    for h in result.hits:
        path = next((p for p in h.paths if p in qrels), h.path)
        if path not in out:
            out.append(path)
    return out


def stage_quality(result, qrels: Mapping[str, Any], metric: str = DEFAULT_METRIC) -> dict[str, float]:
    """``{metric: value}`` of one result against ``qrels`` ({path: grade}), scored with ranx
    through the evaluation harness (``lar_evals.metrics``, the eval extra)."""
    try:
        from lar_evals.metrics import evaluate
    except ImportError as exc:  # pragma: no cover - lar_evals ships with lar
        from lar.core.errors import MissingExtraError

        raise MissingExtraError("lar_evals", "eval") from exc
    grades = {str(k): int(v) for k, v in qrels.items()}
    means, _ = evaluate({"q": grades}, {"q": ranked_paths(result, grades)}, [metric])
    return {metric: float(means[metric])}


def plan_steps(timebox: Any, steps: Sequence[Any] | None = None) -> list[float]:
    """Stage timeboxes: the ``steps`` shorter than ``timebox``, then ``timebox`` itself."""
    full = parse_duration(timebox)
    chosen = sorted({parse_duration(s) for s in (DEFAULT_STEPS if steps is None else steps)})
    return [s for s in chosen if s < full] + [full]


def run_stages(engine, query: Any, timebox: Any = 1.0, steps: Sequence[Any] | None = None,
               on_stage=None, qrels: Mapping[str, Any] | None = None,
               metric: str = DEFAULT_METRIC, **params: Any) -> list[Stage]:
    """Run the search at each stage timebox; ``on_stage(stage)`` after each. With ``qrels``
    ({path: grade}) each stage carries its ``quality`` ({metric: value})."""
    out: list[Stage] = []
    prev: tuple[str, ...] = ()
    for tb in plan_steps(timebox, steps):
        res = search(engine, query, timebox=tb, **params)
        ids = tuple(h.id for h in res.hits)
        stage = Stage(tb, res.result.elapsed, ids, tuple(i for i in ids if i not in prev),
                      tuple(i for i in prev if i not in ids),
                      {r.name: r.state.value for r in res.runs}, res,
                      stage_quality(res.result, qrels, metric) if qrels else {})
        out.append(stage)
        prev = ids
        if on_stage is not None:
            on_stage(stage)
    return out


def stage_html(stage: Stage) -> str:
    """One stage: its deadline, hit counts, layer states and the cards of the hits it added."""
    res = stage.results.result if stage.results is not None else None
    states = ", ".join(f"<span class='lar-state-{s}'>{html.escape(n)} {s}</span>"
                       for n, s in stage.states.items() if s != "skipped")
    quality = "".join(f", {html.escape(m)} {v:.3f}" for m, v in stage.quality.items())
    head = (f"<div><b>{stage.timebox * 1000:.0f} ms</b>: {len(stage.hits)} hits "
            f"(+{len(stage.added)} new, -{len(stage.dropped)} dropped) in "
            f"{stage.elapsed * 1000:.0f} ms{quality} &middot; {states}</div>")
    cards = []
    if res is not None:
        by_id = {h.id: (i, h) for i, h in enumerate(res.hits, 1)}
        for hid in stage.added:
            i, h = by_id[hid]
            cards.append(f"<div style='margin-left:1em'>+ {i}. <span class='lar-loc'>"
                         f"{html.escape(render.location(h))}</span> {render.chips_html(h)} "
                         f"<span style='color:#555'>{html.escape(h.excerpt[:120])}</span></div>")
    return head + "".join(cards)


class AnytimeView(widgets.VBox):
    """Runs ``run()`` on demand (or at once with ``run=True``), adding one row per stage, then
    the chart: quality against time with ``qrels`` ({path: grade}), else each hit's rank
    against time."""

    def __init__(self, engine, query: Any, *, timebox: Any = 1.0,
                 steps: Sequence[Any] | None = None, run: bool = False,
                 qrels: Mapping[str, Any] | None = None, metric: str = DEFAULT_METRIC,
                 **params: Any):
        self.engine, self.query, self.params = engine, query, params
        self.qrels, self.metric = (dict(qrels) if qrels else None), metric
        self.timebox, self.steps = timebox, plan_steps(timebox, steps)
        self.stages: list[Stage] = []
        self.header = widgets.HTML(f"<b>lar anytime</b>: <code>{html.escape(str(query))}</code>, "
                                   f"stages {', '.join(f'{s * 1000:.0f} ms' for s in self.steps)}")
        self.rows = widgets.VBox()
        self.chart = widgets.HTML()
        self.chart.add_class("lar-anytime-chart")
        self.button = widgets.Button(description="run again")
        self.button.on_click(lambda _b: self.run())
        super().__init__([widgets.HTML(render.CSS), self.header, self.button, self.rows,
                          self.chart])
        self.add_class("lar-anytime")
        if run:
            self.run()

    @property
    def results(self) -> Results | None:
        return self.stages[-1].results if self.stages else None

    def run(self) -> list[Stage]:
        self.stages = []
        self.rows.children = []

        def show(stage: Stage) -> None:
            self.stages.append(stage)
            self.rows.children = list(self.rows.children) + [widgets.HTML(stage_html(stage))]

        run_stages(self.engine, self.query, self.timebox, self.steps, on_stage=show,
                   qrels=self.qrels, metric=self.metric, **self.params)
        self.chart.value = self.chart_svg()
        return self.stages

    def chart_svg(self) -> str:
        """The stages' chart as inline SVG (empty where vl-convert is missing)."""
        from lar_magics.charts import anytime_chart
        from lar_magics.explain_render import chart_svg

        return chart_svg(anytime_chart(self.stages)) or ""

    def to_polars(self):
        """One row per (stage, hit): stage timebox, rank, id, whether the stage added it."""
        import polars as pl

        rows = [{"timebox_ms": s.timebox * 1000, "rank": i, "id": hid, "added": hid in s.added}
                for s in self.stages for i, hid in enumerate(s.hits, 1)]
        return pl.DataFrame(rows, schema={"timebox_ms": pl.Float64, "rank": pl.Int64,
                                          "id": pl.Utf8, "added": pl.Boolean})

    def _repr_html_(self) -> str:  # where widgets are not live
        return render.CSS + "".join(stage_html(s) for s in self.stages) + self.chart.value


def anytime_view(engine, query: Any, **kw) -> AnytimeView:
    return AnytimeView(engine, query, run=True, **kw)


__all__ = ["AnytimeView", "DEFAULT_METRIC", "DEFAULT_STEPS", "Stage", "anytime_view",
           "plan_steps", "ranked_paths", "run_stages", "stage_html", "stage_quality"]
