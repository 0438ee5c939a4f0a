"""Reports of evaluation summaries: Markdown and a self-contained HTML page.

``python -m lar_evals report SUMMARY.json [SUMMARY2.json ...] --out REPORT`` writes ``REPORT.md``
and ``REPORT.html``. Every key of the summary schema (``lar_evals.run``) that is present is
rendered and missing ones are skipped; keys this module does not know are shown as JSON.

Both renderings share one model (``sections``: titled tables and notes). The HTML adds charts
built with altair: scores per route, fusion policy and default search (bars per metric), the
anytime curve (metric against timebox, log x) and, when the comparisons hold it, the route
overlap (pairs of routes against relevant documents both found) or each route's found and
route-unique relevant documents. With ``vl-convert-python`` installed the charts are rendered
offline to inline SVG; without it the page embeds their Vega-Lite JSON specs (with their data)
and says so; without altair it has the tables only. Nothing is loaded from the network.
"""
from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

from lar.core.errors import LarError

from lar_evals.report_charts import chart_html, charts, overlap_pairs
from lar_evals.report_sections import Ms, Table, load_summaries, overview, sections
from lar_evals.report_sections import title as summary_title

__all__ = ["add_arguments", "charts", "load_summaries", "main", "overlap_pairs", "render_html",
           "render_markdown", "run", "sections"]

# -- text rendering -----------------------------------------------------------------------
def fmt(v: Any) -> str:
    """A cell: numbers to 4 decimals, None as a dash, containers as compact JSON."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, Ms):
        return f"{v:.2f}" if abs(v) < 1 else f"{v:.1f}"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.1f}"
    if isinstance(v, dict):  # a small mapping as "key value, ..." (never JSON in a cell)
        text = ", ".join(f"{k} {fmt(x)}" for k, x in v.items())
        return text if len(text) <= 160 else text[:159] + "…"
    if isinstance(v, (list, tuple)):
        text = ", ".join(fmt(x) for x in v)
        return text if len(text) <= 160 else text[:159] + "…"
    return str(v)


def _best(table: Table) -> dict[int, float]:
    headers, rows, cols = table
    best = {}
    for c in cols:
        vals = [r[c] for r in rows if isinstance(r[c], (int, float)) and not isinstance(r[c], bool)]
        if len(set(vals)) > 1:  # nothing bold when every value is the same
            best[c] = max(vals)
    return best


def _md_table(table: Table) -> str:
    headers, rows, _ = table
    best = _best(table)
    esc = lambda x: x.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        cells = [f"**{esc(fmt(v))}**" if best.get(i) == v and v is not None else esc(fmt(v))
                 for i, v in enumerate(r)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _md_block(b: Any) -> str:
    if isinstance(b, str):
        return b
    if isinstance(b, tuple) and len(b) == 2 and b[0] == "json":
        return "```json\n" + json.dumps(b[1], indent=2, ensure_ascii=False) + "\n```"
    return _md_table(b)


def render_markdown(summaries: list[dict]) -> str:
    """The Markdown report of ``summaries`` (one section per summary, an overview first
    when there are several)."""
    parts = ["# Evaluation report", ""]
    if len(summaries) > 1:
        parts += ["## Overview", "", _md_table(overview(summaries)), ""]
    for i, s in enumerate(summaries):
        n = s.get("n_queries")
        parts += [f"## {summary_title(s, i)}" + (f" ({n} queries)" if n is not None else ""), ""]
        for title, blocks in sections(s):
            parts += [f"### {title}", ""]
            for b in blocks:
                parts += [_md_block(b), ""]
    return "\n".join(parts).rstrip() + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:78em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.2em}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
.note{color:#555;font-style:italic}pre{background:#f7f7f7;padding:.6em;overflow:auto}
figure{margin:1em 0}"""


def _html_block(b: Any) -> str:
    if isinstance(b, str):
        return f"<p>{html.escape(b)}</p>"
    if isinstance(b, tuple) and len(b) == 2 and b[0] == "json":
        return f"<pre>{html.escape(json.dumps(b[1], indent=2, ensure_ascii=False))}</pre>"
    headers, rows, _ = b
    best = _best(b)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td><b>{html.escape(fmt(v))}</b></td>" if best.get(i) == v
                         and v is not None else f"<td>{html.escape(fmt(v))}</td>"
                         for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(summaries: list[dict]) -> str:
    """A self-contained HTML page: the tables of ``render_markdown`` plus charts."""
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Evaluation report</title>",
             f"<style>{_CSS}</style></head><body><h1>Evaluation report</h1>"]
    if len(summaries) > 1:
        parts += ["<h2>Overview</h2>", _html_block(overview(summaries))]
    for i, s in enumerate(summaries):
        parts.append(f"<h2>{html.escape(summary_title(s, i))}</h2>")
        parts.append(chart_html(charts(s), prefix=f"s{i}"))
        for title, blocks in sections(s):
            parts.append(f"<h3>{html.escape(title)}</h3>")
            parts.extend(_html_block(b) for b in blocks)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- command line -------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``SUMMARY.json [SUMMARY2.json ...] --out REPORT``."""
    parser.add_argument("summaries", nargs="+", metavar="SUMMARY.json",
                        help="summary files written by `python -m lar_evals beir`")
    parser.add_argument("--out", required=True, metavar="REPORT",
                        help="writes REPORT.md and REPORT.html")
    parser.add_argument("--latex", action="store_true",
                        help="also REPORT.tex: booktabs tables of the scores and per-type scores")
    return parser


def run(args: argparse.Namespace) -> int:
    """Write ``REPORT.md`` and ``REPORT.html``; print their paths."""
    try:
        summaries = load_summaries(args.summaries)
        base = Path(args.out)
        if base.suffix.lower() in (".md", ".html", ".htm"):
            base = base.with_suffix("")
        base.parent.mkdir(parents=True, exist_ok=True)
        md, page = base.with_name(base.name + ".md"), base.with_name(base.name + ".html")
        md.write_text(render_markdown(summaries), encoding="utf-8")
        page.write_text(render_html(summaries), encoding="utf-8")
        tex = None
        if getattr(args, "latex", False):
            from lar_evals.latex import render_latex

            tex = base.with_name(base.name + ".tex")
            tex.write_text(render_latex(summaries), encoding="utf-8")
    except (LarError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {md} and {page}" + (f" and {tex}" if tex else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m lar_evals.report SUMMARY.json --out REPORT``."""
    parser = argparse.ArgumentParser(prog="python -m lar_evals.report",
                                     description="Render evaluation summaries as Markdown+HTML.")
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
