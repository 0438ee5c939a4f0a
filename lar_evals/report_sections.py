"""The model a report renders: each summary's titled sections of tables and notes.

``sections(summary)`` turns every key of the summary schema (``lar_evals.run``) that is present
into a titled table (headers, rows, the columns whose best value is bold) or note; keys it does
not know are kept as JSON. ``lar_evals.report`` renders them as Markdown and HTML.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lar_evals.errors import EvalDataError
from lar_evals.report_charts import PAIR_KEYS, overlap_pairs

__all__ = ["Ms", "Table", "load_summaries", "overview", "sections", "title"]

Table = tuple[list[str], list[list[Any]], set[int]]  # headers, rows, columns whose max is bold


class Ms(float):
    """A duration in milliseconds: shown to 0.1 ms (0.01 ms under 1 ms), not as a metric."""

    def __new__(cls, v):
        return None if v is None else super().__new__(cls, v)
_KNOWN = {"schema", "dataset", "split", "n_queries", "settings", "routes", "fusion", "default",
          "timing", "coverage", "build", "run_states", "data_report", "comparisons",
          "attribution", "per_type", "anytime", "anytime_stages", "runs_dir", "run_files",
          "per_query", "per_query_table", "wins_losses", "anchors"}


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
    anchors = {n: a.get("metrics") or {} for n, a in (s.get("anchors") or {}).items()
               if isinstance(a, dict) and "metrics" in a}
    if anchors:
        groups.append(("anchor", anchors))
    metrics = _metrics(*(g for _, g in groups))
    if not metrics:
        return None
    qms = (s.get("timing") or {}).get("query_ms") or {}
    rows = []
    for kind, group in groups:
        for name, vals in group.items():
            t = (qms.get(name) or {}) if kind != "anchor" else (s["anchors"][name].get("query_ms") or {})
            rows.append([kind, name] + [vals.get(m) for m in metrics]
                        + [Ms(t.get("mean")), Ms(t.get("p95"))])
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
            found = entry.get("found_at_10") or {}
            for kind in ("routes", "fusion"):
                for name, vals in (entry.get(kind) or {}).items():
                    f = found.get(f"{kind.rstrip('s')}:{name}")
                    labelled.append((t, entry.get("n_queries"), kind.rstrip("s"), name,
                                     {**vals, "found@10": f} if f is not None else vals))
            if isinstance(entry.get("default"), dict):
                f = found.get("default")
                labelled.append((t, entry.get("n_queries"), "default", "default",
                                 {**entry["default"], "found@10": f} if f is not None
                                 else entry["default"]))
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
    return keys, [[Ms(r.get(k)) if k.endswith("_ms") and isinstance(r.get(k), (int, float))
                   else r.get(k) for k in keys] for r in items], set()


def _significance(sig: dict) -> Table | None:
    tests = [t for t in sig.get("tests") or () if isinstance(t, dict)]
    if not tests:
        return None
    p_adj = "p_adjusted" if any("p_adjusted" in t for t in tests) else "p_holm"
    rows = []
    for t in tests:
        ci = (f"[{t['ci_low']:+.4f}, {t['ci_high']:+.4f}]"
              if isinstance(t.get("ci_low"), (int, float)) and isinstance(t.get("ci_high"), (int, float)) else None)
        p = t.get("p_value")
        rows.append([t.get("a"), t.get("b"), t.get("metric"), t.get("delta"), ci, t.get("d_z"),
                     f"{p:.3g}" if isinstance(p, (int, float)) else ("degenerate" if t.get("degenerate") else None),
                     f"{t[p_adj]:.3g}" if isinstance(t.get(p_adj), (int, float)) else None,
                     t.get("significant")])
    return (["a", "b", "metric", "delta", "95% CI", "d_z", "p", "p adjusted", "significant"],
            rows, set())


def _overlap_matrix(pairs: list[dict]) -> Table | None:
    """The route-pair overlap as a square table (one row and one column per route)."""
    pairs = [r for r in pairs if isinstance(r.get("n"), (int, float))]
    if not pairs:
        return None
    names = list(dict.fromkeys([r["a"] for r in pairs] + [r["b"] for r in pairs]))
    cell = {(r["a"], r["b"]): r["n"] for r in pairs}
    rows = [[a] + [cell.get((a, b), cell.get((b, a))) for b in names] for a in names]
    return [""] + names, rows, set()


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
    anchors = s.get("anchors") or {}
    if anchors:
        add("Published anchors", "The same documents and queries through other BM25 "
            "implementations (their own tokenizers and parameters).",
            (["anchor", "build s", "settings"],
             [[n, a.get("build_s"), a.get("settings") if "settings" in a else f"skipped: {a.get('skipped')}"]
              for n, a in anchors.items()], set()))
    add("Per query type", _per_type(s))
    add("Anytime curve", _records(s.get("anytime")))
    add("Anytime curve per cascade stage", _records(s.get("anytime_stages")))
    comp = s.get("comparisons") or {}
    sig = comp.get("significance") or {}
    if sig:
        note = (f"{sig.get('stat_test', '')}, correction {sig.get('correction', '')}, alpha "
                f"{sig.get('alpha', '')}; best route: {sig.get('best_route')}")
        add("Significance", note, _significance(sig))
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
    add("Route overlap", "Relevant documents both routes found in their first hits (the "
        "diagonal: each route's own).", _overlap_matrix(overlap_pairs(s)))
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


def title(s: dict, i: int) -> str:
    name = s.get("dataset") or f"summary {i + 1}"
    return f"{name} / {s['split']}" if s.get("split") else str(name)


def overview(summaries: list[dict]) -> Table:
    metrics = _metrics({i: s.get("default") or {} for i, s in enumerate(summaries)})
    first = metrics[0] if metrics else None
    rows = []
    for i, s in enumerate(summaries):
        routes = s.get("routes") or {}
        best = max(routes, key=lambda r: (routes[r] or {}).get(first) or -1.0) \
            if routes and first else None
        rows.append([title(s, i), s.get("n_queries")] + [(s.get("default") or {}).get(m)
                                                          for m in metrics] + [best])
    return (["summary", "queries"] + [f"default {m}" for m in metrics]
            + [f"best route ({first})"], rows, set(range(2, 2 + len(metrics))))
