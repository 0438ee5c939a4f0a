"""Charts of the HTML report (``lar_evals.report``), built with altair and rendered offline.

``charts(summary)`` returns ``[(title, Vega-Lite spec dict)]``: scores per route / fusion
policy / default search (bars, one panel per metric), the anytime curve (metrics against the
timebox, log x), the route overlap heatmap (when ``comparisons`` holds route pairs) and the
found / route-unique relevant documents per route. ``chart_html`` embeds them: as inline SVG
rendered by ``vl-convert-python`` when it is installed, and always as the Vega-Lite JSON spec
(``<script type="application/json" class="vega-lite-spec">``, data included), so the page
needs no network. Without altair there are no charts, and the page says how to get them.
"""
from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["PAIR_KEYS", "chart_html", "charts", "is_metric_name", "overlap_pairs"]

_MAX_METRIC_PANELS = 6
# where a route-pair overlap may sit in ``comparisons`` (or its ``route_unique_relevant``)
PAIR_KEYS = ("pairwise", "route_overlap", "overlap", "found_by_pair", "pairs")


def _altair():
    try:
        import altair as alt
    except ImportError:
        return None
    return alt


def _vl_convert():
    try:
        import vl_convert
    except ImportError:
        return None
    return vl_convert


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _scores(alt, s: dict):
    rows, metrics = [], []
    groups = [("route", s.get("routes") or {}), ("fusion", s.get("fusion") or {})]
    if isinstance(s.get("default"), dict):
        groups.append(("default", {"default": s["default"]}))
    for kind, group in groups:
        for name, vals in group.items():
            for m, v in (vals or {}).items():
                if _num(v):
                    if m not in metrics:
                        metrics.append(m)
                    rows.append({"kind": kind, "name": name, "metric": m, "value": v})
    metrics = metrics[:_MAX_METRIC_PANELS]
    rows = [r for r in rows if r["metric"] in metrics]
    if not rows:
        return None
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("value:Q", title=None),
        y=alt.Y("name:N", sort=None, title=None),
        color=alt.Color("kind:N", title="kind"),
        tooltip=["kind:N", "name:N", "metric:N", alt.Tooltip("value:Q", format=".4f")],
    ).properties(width=150, height=alt.Step(14)).facet(
        column=alt.Column("metric:N", title=None, sort=metrics))


def is_metric_name(key: str) -> bool:
    """Whether ``key`` names a ranx metric (``ndcg@10``, ``map``, ``rbp.95``, ...)."""
    from lar_evals.errors import EvalConfigError
    from lar_evals.metrics import check_metrics

    try:
        check_metrics([key])
    except EvalConfigError:
        return False
    return True


def _anytime(alt, s: dict):
    points = [p for p in s.get("anytime") or () if isinstance(p, dict) and _num(p.get("timebox_s"))]
    metrics = set((s.get("settings") or {}).get("metrics") or ())
    rows = []
    for p in points:
        for k, v in p.items():  # metric values only: counts such as aborted_runs are not on [0, 1]
            if _num(v) and (k in metrics if metrics else is_metric_name(k)):
                rows.append({"timebox_s": p["timebox_s"], "metric": k, "value": v,
                             "mean_ms": p.get("mean_ms")})
    if not rows:
        return None
    return alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("timebox_s:Q", scale=alt.Scale(type="log"), title="timebox (s)"),
        y=alt.Y("value:Q", title="metric", scale=alt.Scale(zero=False)),
        color=alt.Color("metric:N"),
        tooltip=["timebox_s:Q", "metric:N", alt.Tooltip("value:Q", format=".4f"), "mean_ms:Q"],
    ).properties(width=420, height=260)


def overlap_pairs(s: dict) -> list[dict]:
    """``[{"a", "b", "n"}]`` from a route-pair overlap in ``comparisons`` (a nested mapping
    ``{a: {b: n}}``, a flat ``{"a|b": n}`` or a list of records), or ``[]``."""
    comp = s.get("comparisons") or {}
    for holder in (comp, comp.get("route_unique_relevant") or {}):
        for key in PAIR_KEYS:
            got = holder.get(key) if isinstance(holder, dict) else None
            if isinstance(got, list):
                return [{"a": str(r.get("a")), "b": str(r.get("b")),
                         "n": r.get("n", r.get("both", r.get("count")))}
                        for r in got if isinstance(r, dict)]
            if isinstance(got, dict):
                out = []
                for a, row in got.items():
                    if isinstance(row, dict):
                        out.extend({"a": a, "b": b, "n": n} for b, n in row.items())
                    elif "|" in str(a):
                        x, y = str(a).split("|", 1)
                        out.append({"a": x, "b": y, "n": row})
                return out
    return []


def _overlap(alt, s: dict):
    rows = [r for r in overlap_pairs(s) if _num(r.get("n"))]
    if not rows:
        return None
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("a:N", title=None), y=alt.Y("b:N", title=None))
    rect = base.mark_rect().encode(color=alt.Color("n:Q", title="both found"),
                                   tooltip=["a:N", "b:N", "n:Q"])
    half = max(r["n"] for r in rows) / 2
    text = base.mark_text(baseline="middle").encode(
        text="n:Q", color=alt.condition(f"datum.n > {half}", alt.value("white"),
                                        alt.value("black")))
    return alt.layer(rect, text).properties(width=alt.Step(40), height=alt.Step(40))


def _route_found(alt, s: dict):
    rur = (s.get("comparisons") or {}).get("route_unique_relevant") or {}
    rows = []
    for measure, key in (("found", "found_by_route"), ("route-unique", "route_unique")):
        for route, n in (rur.get(key) or {}).items():
            if _num(n):
                rows.append({"route": route, "measure": measure, "n": n})
    if not rows:
        return None
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("n:Q", title=f"relevant documents in the first {rur.get('k', 'k')} hits"),
        y=alt.Y("route:N", sort=None, title=None),
        yOffset="measure:N", color=alt.Color("measure:N"),
        tooltip=["route:N", "measure:N", "n:Q"],
    ).properties(width=360, height=alt.Step(12))


def charts(s: dict) -> list[tuple[str, dict]]:
    """``[(title, Vega-Lite spec)]`` for one summary; ``[]`` without altair or data."""
    alt = _altair()
    if alt is None:
        return []
    out = []
    for title, build in (("Scores per route, fusion policy and default search", _scores),
                         ("Anytime curve", _anytime), ("Route overlap", _overlap),
                         ("Relevant documents found per route", _route_found)):
        chart = build(alt, s)
        if chart is not None:
            out.append((title, chart.to_dict()))
    return out


def _svg(vlc, spec: dict) -> str | None:
    try:
        return vlc.vegalite_to_svg(spec)
    except Exception:  # noqa: BLE001 - a spec the renderer refuses: the JSON spec still ships
        return None


def chart_html(specs: list[tuple[str, dict]], prefix: str = "c") -> str:
    """HTML figures for ``specs``: inline SVG where ``vl-convert-python`` renders it, plus
    the JSON spec of every chart; a note when charts cannot be drawn offline."""
    if _altair() is None:
        return ("<p class='note'>Charts need altair: <code>pip install 'lar[notebook]'</code> "
                "(and <code>vl-convert-python</code> to draw them offline).</p>")
    if not specs:
        return ""
    vlc = _vl_convert()
    parts = []
    if vlc is None:
        parts.append("<p class='note'>The charts below are embedded as Vega-Lite JSON specs "
                     "(data included) because <code>vl-convert-python</code> is not installed "
                     "to render them offline; install it and rerun the report for inline SVG, "
                     "or open a spec in any Vega-Lite viewer.</p>")
    for i, (title, spec) in enumerate(specs):
        svg = _svg(vlc, spec) if vlc is not None else None
        payload = json.dumps(spec, ensure_ascii=False).replace("</", "<\\/")
        parts.append(f"<figure id='{prefix}-chart-{i}'><figcaption>{html.escape(title)}"
                     f"</figcaption>{svg or ''}"
                     f"<script type='application/json' class='vega-lite-spec'>{payload}</script>"
                     f"</figure>")
    return "\n".join(parts)
