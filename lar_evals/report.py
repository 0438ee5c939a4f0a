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

from lar_evals.errors import EvalDataError
from lar_evals.report_charts import PAIR_KEYS, chart_html, charts, overlap_pairs

__all__ = ["add_arguments", "charts", "load_summaries", "main", "overlap_pairs", "render_html",
           "render_markdown", "run", "sections"]

Table = tuple[list[str], list[list[Any]], set[int]]  # headers, rows, columns whose max is bold
_KNOWN = {"schema", "dataset", "split", "n_queries", "settings", "routes", "fusion", "default",
          "timing", "coverage", "build", "run_states", "data_report", "comparisons",
          "attribution", "per_type", "anytime", "anytime_stages", "runs_dir", "run_files",
          "per_query", "per_query_table", "wins_losses"}


def load_summaries(paths: list[str | Path]) -> list[dict]:
    """Read summary JSON files (``EvalDataError`` naming the file when one is unreadable)."""
    out = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise EvalDataError(f"cannot read the summary: {exc}", path=str(p)) from exc
        if not isinstance(data, dict):
            raise EvalDataError("a summary must be a JSON object", path=str(p))
        out.append(data)
    return out


# -- the shared model ---------------------------------------------------------------------
def _metrics(*tables: Any) -> list[str]:
    """Metric names of ``{name: {metric: value}}`` tables, in first-seen order."""
    seen: dict[str, None] = {}
    for t in tables:
        for vals in (t or {}).values() if isinstance(t, dict) else ():
            if isinstance(vals, dict):
                seen.update((m, None) for m in vals)
    return list(seen)


def _scores(s: dict) -> Table | None:
    groups = [("route", s.get("routes") or {}), ("fusion", s.get("fusion") or {})]
    if isinstance(s.get("default"), dict) and s["default"]:
        groups.append(("default", {"default": s["default"]}))
    metrics = _metrics(*(g for _, g in groups))
    if not metrics:
        return None
    qms = (s.get("timing") or {}).get("query_ms") or {}
    rows = []
    for kind, group in groups:
        for name, vals in group.items():
            t = qms.get(name) or {}
            rows.append([kind, name] + [vals.get(m) for m in metrics]
                        + [t.get("mean"), t.get("p95")])
    return (["kind", "name"] + metrics + ["mean ms", "p95 ms"], rows,
            set(range(2, 2 + len(metrics))))


def _layers(s: dict) -> Table | None:
    build = (s.get("timing") or {}).get("build_s") or {}
    cov = s.get("coverage") or {}
    names = list(dict.fromkeys(list(build) + list(cov)))
    if not names:
        return None
    return ["layer", "build s", "coverage"], [[n, build.get(n), cov.get(n)] for n in names], set()


def _per_type(s: dict) -> Table | None:
    pt = s.get("per_type") or {}
    by_type = pt.get("by_type", pt) if isinstance(pt, dict) else {}
    rows: list[list[Any]] = []
    labelled: list[tuple[str, Any, str, str, dict]] = []
    for t, entry in by_type.items():
        if not isinstance(entry, dict):
            continue
        if any(k in entry for k in ("routes", "fusion", "default")):  # lar_evals.compare's form
            for kind in ("routes", "fusion"):
                for name, vals in (entry.get(kind) or {}).items():
                    labelled.append((t, entry.get("n_queries"), kind.rstrip("s"), name, vals))
            if isinstance(entry.get("default"), dict):
                labelled.append((t, entry.get("n_queries"), "default", "default",
                                 entry["default"]))
        else:  # {type: {name: {metric: value}}}
            for name, vals in entry.items():
                if isinstance(vals, dict):
                    labelled.append((t, None, "", name, vals))
    metrics = _metrics({i: row[4] for i, row in enumerate(labelled)})
    if not metrics:
        return None
    for t, n, kind, name, vals in labelled:
        rows.append([t, n, kind, name] + [vals.get(m) for m in metrics])
    return ["type", "queries", "kind", "name"] + metrics, rows, set()


def _records(items: Any) -> Table | None:
    """A table of a list of flat dicts (keys in first-seen order)."""
    items = [r for r in items or () if isinstance(r, dict)]
    if not items:
        return None
    keys = list(dict.fromkeys(k for r in items for k in r))
    return keys, [[r.get(k) for k in keys] for r in items], set()


def _wins_table(what: str, items: Any) -> Table | None:
    items = [r for r in items or () if isinstance(r, dict)]
    if not items:
        return None
    return ([what, "qid", "type", "query", "a", "b", "delta"],
            [[i + 1, r.get("qid"), r.get("type"), r.get("text"), r.get("a"), r.get("b"),
              r.get("delta")] for i, r in enumerate(items)], set())


def _mapping(d: Any, key: str = "key", value: str = "value") -> Table | None:
    if not isinstance(d, dict) or not d:
        return None
    return [key, value], [[k, v] for k, v in d.items()], set()


def sections(s: dict) -> list[tuple[str, list[Any]]]:
    """``[(title, [Table | str | ("json", obj)])]`` for one summary, in reading order."""
    out: list[tuple[str, list[Any]]] = []

    def add(title: str, *blocks: Any) -> None:
        blocks = tuple(b for b in blocks if b)
        if blocks:
            out.append((title, list(blocks)))

    add("Scores", _scores(s))
    add("Build time and coverage", _layers(s))
    add("Per query type", _per_type(s))
    add("Anytime curve", _records(s.get("anytime")))
    add("Anytime curve per cascade stage", _records(s.get("anytime_stages")))
    comp = s.get("comparisons") or {}
    sig = comp.get("significance") or {}
    if sig:
        note = (f"{sig.get('stat_test', '')}, correction {sig.get('correction', '')}, alpha "
                f"{sig.get('alpha', '')}; best route: {sig.get('best_route')}")
        add("Significance", note, _records(sig.get("tests")))
    rur = comp.get("route_unique_relevant") or {}
    if rur:
        facts = ", ".join(f"{k} {v}" for k, v in rur.items() if not isinstance(v, (dict, list)))
        routes = list(dict.fromkeys(list(rur.get("found_by_route") or {})
                                    + list(rur.get("route_unique") or {})))
        per_route = (["route", "found", "route-unique"],
                     [[r, (rur.get("found_by_route") or {}).get(r),
                       (rur.get("route_unique") or {}).get(r)] for r in routes], set()) \
            if routes else None
        pols = list(dict.fromkeys(list(rur.get("kept_by") or {})
                                  + list(rur.get("recovered_by") or {})))
        per_pol = (["policy", "kept", "route-unique recovered"],
                   [[p, (rur.get("kept_by") or {}).get(p), (rur.get("recovered_by") or {}).get(p)]
                    for p in pols], set()) if pols else None
        add("Relevant documents by route", facts, per_route, per_pol)
    wl = s.get("wins_losses") or {}
    if wl.get("wins") or wl.get("losses"):
        note = (f"Queries where {wl.get('a')} beats {wl.get('b')} on {wl.get('metric')} by most, "
                f"and where it loses by most ({len((s.get('per_query') or {}).get('rows') or ())} "
                f"queries in the per-query table{': ' + s['per_query_table'] if s.get('per_query_table') else ''}).")
        add(f"Biggest wins and losses: {wl.get('a')} vs {wl.get('b')}", note,
            _wins_table("wins", wl.get("wins")), _wins_table("losses", wl.get("losses")))
    pairs = overlap_pairs(s)
    add("Route overlap", _records(pairs))
    rest = {k: v for k, v in comp.items() if k not in ("significance", "route_unique_relevant")
            and k not in PAIR_KEYS}
    add("Other comparisons", ("json", rest) if rest else None)
    att = s.get("attribution") or {}
    if att:
        ex = att.get("examples") or []
        add("Miss attribution", _mapping(att.get("counts"), "reason", "misses"),
            _records(ex[:10]), ("json", {k: v for k, v in att.items()
                                         if k not in ("counts", "examples")}) if
            set(att) - {"counts", "examples"} else None)
    add("Data report", _mapping(s.get("data_report")))
    add("Run states", _mapping(s.get("run_states"), "runs", "states"))
    files = s.get("run_files") or {}
    if files:
        keys = ["scores", "queries", "own_scores", "rank_scores", "tied", "unordered", "lines"]
        add("Run files", f"TREC run files in {s.get('runs_dir')}: each list's own scores where "
            "known, rank-derived otherwise.",
            (["run"] + keys, [[lab] + [(v or {}).get(k) for k in keys] for lab, v in files.items()],
             set()))
    add("Settings", _mapping(s.get("settings"), "setting"))
    other = {k: v for k, v in s.items() if k not in _KNOWN}
    add("Other fields", ("json", other) if other else None)
    return out


def _title(s: dict, i: int) -> str:
    name = s.get("dataset") or f"summary {i + 1}"
    return f"{name} / {s['split']}" if s.get("split") else str(name)


def _overview(summaries: list[dict]) -> Table:
    metrics = _metrics({i: s.get("default") or {} for i, s in enumerate(summaries)})
    first = metrics[0] if metrics else None
    rows = []
    for i, s in enumerate(summaries):
        routes = s.get("routes") or {}
        best = max(routes, key=lambda r: (routes[r] or {}).get(first) or -1.0) \
            if routes and first else None
        rows.append([_title(s, i), s.get("n_queries")] + [(s.get("default") or {}).get(m)
                                                          for m in metrics] + [best])
    return (["summary", "queries"] + [f"default {m}" for m in metrics]
            + [f"best route ({first})"], rows, set(range(2, 2 + len(metrics))))


# -- text rendering -----------------------------------------------------------------------
def fmt(v: Any) -> str:
    """A cell: numbers to 4 decimals, None as a dash, containers as compact JSON."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.1f}"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, ensure_ascii=False, sort_keys=False)
        return text if len(text) <= 160 else text[:159] + "…"
    return str(v)


def _best(table: Table) -> dict[int, float]:
    headers, rows, cols = table
    best = {}
    for c in cols:
        vals = [r[c] for r in rows if isinstance(r[c], (int, float)) and not isinstance(r[c], bool)]
        if len(vals) > 1:
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
        parts += ["## Overview", "", _md_table(_overview(summaries)), ""]
    for i, s in enumerate(summaries):
        n = s.get("n_queries")
        parts += [f"## {_title(s, i)}" + (f" ({n} queries)" if n is not None else ""), ""]
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
        parts += ["<h2>Overview</h2>", _html_block(_overview(summaries))]
    for i, s in enumerate(summaries):
        parts.append(f"<h2>{html.escape(_title(s, i))}</h2>")
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
    except (LarError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {md} and {page}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m lar_evals.report SUMMARY.json --out REPORT``."""
    parser = argparse.ArgumentParser(prog="python -m lar_evals.report",
                                     description="Render evaluation summaries as Markdown+HTML.")
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
