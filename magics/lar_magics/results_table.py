"""The results table: one row per hit with its fused score and, per layer that found it, the
hit's rank and score in that layer's own list.

``table_frame(result)`` is the polars frame, ``table_html(result)`` the static HTML (a notebook
opened without a kernel), ``grid(frame)`` the live, sortable and filterable data grid (itables'
``ITable`` widget: click a header to sort, type in the search box or a column's filter box to
filter). ``route_names(result)`` are the layers that found at least one hit, in the call's order.
"""
from __future__ import annotations

import html
from typing import Any

from lar.core.errors import require

GRID_LAYOUT = {"topStart": None, "topEnd": "search", "bottomStart": "info", "bottomEnd": None}


def route_names(result) -> list[str]:
    """Layers that found at least one of the hits, in the order of the call's runs."""
    res = getattr(result, "result", result)
    found = {n for h in res.hits for n in h.signals}
    return [r.name for r in res.runs if r.name in found]


def hit_label(hit) -> str:
    """``path:12-14`` (or ``path:12``) of a hit."""
    if not hit.lines:
        return str(hit.path)
    a, b = hit.lines
    return f"{hit.path}:{a}" if a == b else f"{hit.path}:{a}-{b}"


def table_rows(result) -> list[dict[str, Any]]:
    """One dict per hit: ``rank``, ``score`` (fused), ``hit``, then ``<layer> rank`` and
    ``<layer> score`` for every route (None where that layer did not find the hit), ``id``."""
    res = getattr(result, "result", result)
    names = route_names(res)
    rows = []
    for i, h in enumerate(res.hits, 1):
        row: dict[str, Any] = {"rank": h.rank or i, "score": h.score, "hit": hit_label(h)}
        for n in names:
            ev = h.evidence.get(n)
            row[f"{n} rank"] = ev.rank if ev is not None else None
            row[f"{n} score"] = float(ev.score) if ev is not None else None
        row["id"] = h.id
        rows.append(row)
    return rows


def columns(result) -> list[str]:
    names = route_names(result)
    return ["rank", "score", "hit", *[f"{n} {c}" for n in names for c in ("rank", "score")], "id"]


def table_frame(result):
    """The table as a polars frame (columns as :func:`table_rows`)."""
    import polars as pl

    cols = columns(result)
    schema = {c: (pl.Utf8 if c in ("hit", "id") else pl.Int64 if c.endswith("rank")
                  else pl.Float64) for c in cols}
    return pl.DataFrame(table_rows(result), schema=schema, orient="row")


def _cell(col: str, value: Any) -> str:
    if value is None:
        return "<td class='lar-none'></td>"
    if isinstance(value, float):
        return f"<td data-sort='{value!r}'>{value:.4g}</td>"
    return f"<td>{html.escape(str(value))}</td>"


def table_html(result) -> str:
    """The table as static HTML (``<table class='lar-table'>``): fused score and per-layer rank
    and score of every hit; the scale of the fused scores in the score column's title."""
    res = getattr(result, "result", result)
    cols = columns(res)
    scale = getattr(res, "score_scale", "") or getattr(res, "fusion", "")
    head = "".join(f"<th title='fused score ({html.escape(scale)} scale)'>score</th>"
                   if c == "score" else f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(_cell(c, row[c]) for c in cols) + "</tr>"
                   for row in table_rows(res))
    return (f"<table class='lar-runs lar-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def grid(frame, caption: str = ""):
    """A sortable, filterable data grid of a polars (or pandas) frame: itables' ``ITable``
    widget with a search box and one filter box under each column; no paging below 200 rows."""
    require("itables", "notebook")
    widget_mod = require("itables.widget", "notebook")
    height = getattr(frame, "height", None) or len(frame)
    opts: dict[str, Any] = {"layout": dict(GRID_LAYOUT), "column_filters": "footer",
                            "classes": "display compact", "order": [], "autoWidth": False}
    if height <= 200:
        opts["paging"] = False
    table = widget_mod.ITable(frame, caption=caption, **opts)
    table.layout.overflow_x = "auto"  # a wide table scrolls inside the view, never cut
    table.add_class("lar-grid")
    return table


def results_grid(result):
    """The live results table of a search (:func:`grid` of :func:`table_frame`)."""
    res = getattr(result, "result", result)
    scale = getattr(res, "score_scale", "") or getattr(res, "fusion", "")
    return grid(table_frame(res), caption=f"score: fused, on the {scale} scale" if scale else "")


__all__ = ["GRID_LAYOUT", "columns", "grid", "hit_label", "results_grid", "route_names",
           "table_frame", "table_html", "table_rows"]
