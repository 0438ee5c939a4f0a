"""Static HTML of the workbench: hit cards (path:lines, excerpt with the matched sub-spans
highlighted, signal chips with each route's rank), the per-layer run table and coverage bars.

The widgets use the same HTML inside ipywidgets; ``Results._repr_html_`` uses it alone, so a
notebook opened without a kernel still shows the results.
"""
from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

from lar.core.errors import LarError


def unit_text(engine, hit) -> bytes | None:
    """The text the hit's span indexes into (the snapshot kept at search time), or None."""
    try:
        return engine.read_bytes(hit.hash)
    except (LarError, OSError):
        return None


WINDOW = 480  # bytes of a span shown in a card; longer spans show a window at the first match
LEAD = 120  # bytes shown before the first match when the window is cut

CSS = """<style>
.lar-results{font-family:system-ui,sans-serif;font-size:13px}
.lar-card{border:1px solid #ddd;border-radius:6px;padding:6px 10px;margin:6px 0;background:#fff}
.lar-card .lar-loc{font-family:monospace;font-weight:600}
.lar-card .lar-id{color:#888;font-family:monospace;font-size:11px;margin-left:8px}
.lar-chip{display:inline-block;border-radius:10px;padding:0 8px;margin:2px 4px 2px 0;
 background:#e8eef9;color:#234;font-size:11px}
.lar-excerpt{white-space:pre-wrap;font-family:monospace;font-size:12px;background:#fafafa;
 padding:4px 6px;margin:4px 0;max-height:14em;overflow:auto}
.lar-mark{background:#ffe58a;padding:0}
.lar-lscore{color:#567}.lar-score{font-weight:600;color:#1a4d8f}
.lar-grid tfoot input{width:6em;box-sizing:border-box;font-size:11px}
.lar-note{color:#8a5a00;background:#fff6e0;padding:4px 8px;border-radius:4px;margin:4px 0}
.lar-runs td,.lar-runs th{padding:1px 8px;text-align:left}
.lar-state-ran{color:#1a7f37}.lar-state-aborted{color:#b35900}
.lar-state-skipped{color:#777}.lar-state-failed{color:#c62828}
.lar-bar{display:inline-block;height:9px;background:#4c78a8;vertical-align:middle}
.lar-barbg{display:inline-block;width:120px;height:9px;background:#e5e5e5;vertical-align:middle}
</style>"""


def esc(x: Any) -> str:
    return html.escape(str(x))


def location(hit) -> str:
    """``path:12-14`` (or ``path:12``) of a hit; other paths of identical files are appended."""
    loc = str(hit.path)
    if hit.lines:
        a, b = hit.lines
        loc += f":{a}" if a == b else f":{a}-{b}"
    if len(hit.paths) > 1:
        loc += f" (+{len(hit.paths) - 1} identical)"
    return loc


def chips_html(hit) -> str:
    """One chip per signal: the layer, its rank and score for this hit and, when the layer's list
    was probed, the hit's p-value against that layer's background (lar.fusion.probe); the
    score's kind in the tooltip."""
    out = []
    for name in hit.signals:
        ev = hit.evidence[name]
        tip = f"{name}: rank {ev.rank}, {ev.score_kind} {ev.score:.4g}"
        p = getattr(ev, "p_value", None)
        strength = ""
        if p is not None:
            tip += f"; E-value {ev.evalue:.3g}, p {p:.3g} against this layer's background"
            strength = f" <span class='lar-p'>p={p:.1g}</span>"
        out.append(f"<span class='lar-chip lar-chip-{esc(name)}' title='{esc(tip)}'>"
                   f"{esc(name)} #{ev.rank} <span class='lar-lscore'>{ev.score:.3g}</span>"
                   f"{strength}</span>")
    return "".join(out)


def marks_of(hit) -> list[tuple[int, int, str]]:
    """Every evidence sub-span of a hit as ``(start, end, layer)`` (unit byte offsets)."""
    return [(s, e, name) for name in hit.signals for s, e in hit.evidence[name].sub_spans if e > s]


def window(hit, size: int = WINDOW) -> tuple[int, int]:
    """The byte window of the hit's span a card shows: all of it, or ``size`` bytes from just
    before the first sub-span inside it."""
    s, e = hit.span.start, hit.span.end
    if e - s <= size:
        return s, e
    inside = sorted(a for a, b, _ in marks_of(hit) if s <= a < e)
    start = max(s, inside[0] - LEAD) if inside else s
    return start, min(e, start + size)


def _cut(data: bytes, pos: int) -> int:
    """Move ``pos`` forward off a UTF-8 continuation byte, so a cut never splits a character."""
    while 0 < pos < len(data) and 0x80 <= data[pos] <= 0xBF:
        pos += 1
    return pos


def highlight(data: bytes, start: int, end: int, marks: Iterable[tuple[int, int, str]]) -> str:
    """HTML of ``data[start:end]`` with ``marks`` (byte ranges, layer) as ``<mark>``; a
    range several layers share is one mark whose title names them all."""
    start, end = _cut(data, start), _cut(data, min(end, len(data)))
    bounds = {start, end}
    clipped = []
    for a, b, name in marks:
        a, b = max(a, start), min(b, end)
        if b > a:
            a, b = _cut(data, a), _cut(data, b)
            clipped.append((a, b, name))
            bounds.update((a, b))
    points = sorted(p for p in bounds if start <= p <= end)
    out = []
    for a, b in zip(points, points[1:]):
        text = esc(data[a:b].decode("utf-8", errors="replace"))
        layers = sorted({n for s, e, n in clipped if s <= a and b <= e})
        out.append(f"<mark class='lar-mark' title='{esc(', '.join(layers))}'>{text}</mark>"
                   if layers else text)
    return "".join(out)


def excerpt_html(hit, data: bytes | None) -> str:
    """The card's excerpt: the span's text with highlights, or the hit's plain excerpt when
    the unit's text cannot be read."""
    if data is None or hit.span.end > len(data):
        return esc(hit.excerpt)
    s, e = window(hit)
    body = highlight(data, s, e, marks_of(hit))
    return ("…" if s > hit.span.start else "") + body + ("…" if e < hit.span.end else "")


def context_html(hit) -> str:
    """Match-time context of a hit (source page or cell, enclosing symbol) as one line."""
    if not hit.context:
        return ""
    parts = [f"{esc(k)}: {esc(v)}" for k, v in hit.context.items()]
    return f"<div class='lar-context' style='color:#666;font-size:11px'>{'; '.join(parts)}</div>"


def score_html(hit, scale: str = "") -> str:
    """The hit's fused score (and, in the tooltip, the scale it is on), or nothing."""
    score = getattr(hit, "score", None)
    if score is None:
        return ""
    tip = f"fused score on the {scale} scale" if scale else "fused score"
    return f"<span class='lar-score' title='{esc(tip)}'>{score:.4g}</span> "


def card_html(rank: int, hit, data: bytes | None, scale: str = "") -> str:
    return (f"<div class='lar-card' data-id='{esc(hit.id)}'>"
            f"<div><b>{getattr(hit, 'rank', None) or rank}.</b> {score_html(hit, scale)}"
            f"<span class='lar-loc'>{esc(location(hit))}</span>"
            f"<span class='lar-id'>{esc(hit.id)}</span></div>"
            f"<div class='lar-chips'>{chips_html(hit)}</div>"
            f"<div class='lar-excerpt'>{excerpt_html(hit, data)}</div>{context_html(hit)}</div>")


def runs_html(runs: Sequence[Any]) -> str:
    """The per-layer table of one call: state, reason, hits, elapsed, coverage at call time."""
    if not runs:
        return ""
    rows = []
    for r in runs:
        cov = "" if r.coverage is None else f"{r.coverage:.0%}"
        rows.append(f"<tr><td>{esc(r.name)}</td><td class='lar-state-{esc(r.state.value)}'>"
                    f"{esc(r.state.value)}</td><td>{r.contributions}</td>"
                    f"<td>{r.elapsed * 1000:.1f} ms</td><td>{cov}</td><td>{probe_html(r)}</td>"
                    f"<td>{esc(r.reason)}</td></tr>")
    return ("<table class='lar-runs'><thead><tr><th>layer</th><th>state</th><th>hits</th>"
            "<th>elapsed</th><th>coverage</th><th>signal (probe)</th><th>reason</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>")


def probe_html(run) -> str:
    """The layer's probe for this query: its best hit's evidence (-ln p against the layer's own
    background), agreement with other layers, and the fusion weight; or why it has no signal."""
    pr = getattr(run, "probe", None)
    if not pr:
        return ""
    if not pr.get("usable"):
        return f"<span title='{esc(pr.get('reason', ''))}'>no signal</span>"
    weight = f", weight {pr['weight']:.2f}" if "weight" in pr else ""
    z = f", top z {pr['top_z']:.1f}" if "top_z" in pr else ""
    bg = pr.get("background")
    title = (f" title='best hit {pr['top_z']:.2f} sds above the mean of all {bg['n']} scores the "
             f"layer computed'" if z and isinstance(bg, dict) and "n" in bg else "")
    text = esc(f"top -ln p {pr['top_evidence']:.1f}{z}, agreement {pr['agreement']:.0%}{weight}")
    return f"<span{title}>{text}</span>" if title else text


def header_html(result) -> str:
    return (f"<div><b>lar</b>: {len(result.hits)} hits for <code>{esc(result.query)}</code> in "
            f"{result.elapsed * 1000:.0f} ms (timebox {result.timebox * 1000:.0f} ms, fusion "
            f"{esc(result.fusion)}"
            + (f", scores on the {esc(result.score_scale)} scale"
               if getattr(result, "score_scale", "") else "") + ")</div>")


def _notes(layer) -> str:
    """The layer's notes, and what it keeps resident on its scan device (issue 23)."""
    resident = layer.resident_text() if hasattr(layer, "resident_text") else ""
    return "; ".join(x for x in (layer.notes, resident) if x)


def coverage_html(status) -> str:
    """Static coverage bars, one per layer."""
    rows = []
    for l in status.layers:
        width = int(round(120 * l.coverage))
        rows.append(f"<tr><td>{esc(l.name)}</td><td><span class='lar-barbg'><span class='lar-bar' "
                    f"style='width:{width}px'></span></span></td><td>{l.coverage:.0%}</td>"
                    f"<td>{f'{l.built_units}/{l.units}' if l.units else ''}</td>"
                    f"<td>{esc(getattr(l, 'device', ''))}</td><td>{esc(_notes(l))}</td></tr>")
    return ("<table class='lar-runs lar-coverage'><thead><tr><th>layer</th><th>coverage</th>"
            "<th></th><th>units</th><th>device</th><th>notes</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def note_html(lines: Sequence[str]) -> str:
    return "".join(f"<div class='lar-note'>{esc(x)}</div>" for x in lines)


__all__ = ["unit_text", "CSS", "card_html", "chips_html", "coverage_html", "excerpt_html", "header_html",
           "probe_html",
           "highlight", "location", "marks_of", "note_html", "runs_html", "window"]
