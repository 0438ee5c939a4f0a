"""Rendering of the explain view: the heatmap, the contribution bars and the localised span."""
from __future__ import annotations

from html import escape as esc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lar_magics.explain_view import ExplainData

MAX_WEIGHT = 3.0


# -- rendering -------------------------------------------------------------------------------
def _color(v: float) -> str:
    t = min(max(v + 0.1, 0.0), 1.0)  # cosine -0.1..0.9 -> white..deep blue
    return "rgb({},{},{})".format(*(int(255 - t * (255 - c)) for c in (8, 69, 148)))


HEAT_CSS = ("<style>.lar-heatmap table{border-collapse:collapse;font-size:10px}"
            ".lar-heatmap td{min-width:12px;width:12px;height:16px;padding:0;border:1px solid #fff}"
            ".lar-heatmap th.lar-doc-tok{writing-mode:vertical-rl;transform:rotate(180deg);"
            "font-weight:normal;font-size:9px;line-height:12px;padding:1px 0;max-height:64px;"
            "overflow:hidden;white-space:nowrap}"
            ".lar-heatmap th.lar-q-tok{text-align:right;padding-right:6px;white-space:nowrap}</style>")


def heatmap_html(data: ExplainData) -> str:
    """Query tokens (rows) x document tokens of the chunk (columns), cosine as colour; each
    row's best match is outlined; hover a cell for the numbers."""
    am = data.argmax
    head = "".join(f"<th class='lar-doc-tok'>{esc(t.strip() or '·')}</th>" for t in data.doc_tokens)
    rows = []
    for i, qt in enumerate(data.query_tokens):
        cells = "".join(
            f"<td title='{esc(f'{qt} · {data.doc_tokens[j]}: {v:.3f}', quote=True)}' style='"
            + ("outline:2px solid #d62728;" if j == am[i] else "") + f"background:{_color(v)}'></td>"
            for j, v in enumerate(data.sim[i]))
        rows.append(f"<tr><th class='lar-q-tok'>{esc(qt)} <small>w={data.weights[i]:.2f}</small>"
                    f"</th>{cells}</tr>")
    return (f"<div class='lar-heatmap' style='overflow-x:auto;max-width:100%'>{HEAT_CSS}"
            f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table></div>")


def contribution_chart(data: ExplainData):
    """Altair bars: each query token's contribution (weight x best cosine) to the score."""
    import altair as alt

    rows = [{"token": f"{r['i']:02d} {r['q']}", "contrib": r["contrib"], "sim": r["sim"],
             "w": r["w"], "match": r["match"]} for r in data.tokens_table()]
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        y=alt.Y("token:N", sort=None, title="query token"),
        x=alt.X("contrib:Q", title="contribution (weight x best cosine)"),
        color=alt.Color("w:Q", scale=alt.Scale(domain=[0, MAX_WEIGHT], scheme="blues"),
                        title="weight"),
        tooltip=["token:N", "match:N", "sim:Q", "w:Q", "contrib:Q"],
    ).properties(width=360, height=max(60, 18 * len(rows)),
                 title=f"score {data.score:.3f} = sum of contributions")


def chart_svg(chart) -> str | None:
    """A chart as inline SVG (vl-convert): renders with no network and no frontend extension."""
    try:
        import vl_convert as vlc
    except ImportError:
        return None
    return vlc.vegalite_to_svg(chart.to_dict())


def span_html(data: ExplainData) -> str:
    """The chunk text; the localised span on a yellow ground, matched tokens marked red."""
    t, (cs, ce), (ss, se) = data.text, data.chunk, data.span
    marks: dict[tuple[int, int], list[str]] = {}
    for m in data.matches():
        if m.contribution > 0 and cs <= m.start < m.end <= ce:
            marks.setdefault((m.start, m.end), []).append(f"{m.query_token} ({m.similarity:.2f})")
    cuts = sorted({cs, ce, max(cs, ss), min(ce, se)} | {p for s in marks for p in s})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        piece = esc(t[a:b].decode("utf-8", errors="replace"))
        if (a, b) in marks:
            tip = esc("matched by " + ", ".join(marks[(a, b)]), quote=True)
            piece = f"<mark title='{tip}' style='background:#ffb3b3'>{piece}</mark>"
        if ss <= a and b <= se:
            piece = f"<span style='background:#fff3b0'>{piece}</span>"
        out.append(piece)
    return ("<div class='lar-span' style='white-space:pre-wrap;font-family:monospace;"
            f"font-size:12px;border-left:3px solid #ccc;padding-left:8px'>{''.join(out)}</div>")
