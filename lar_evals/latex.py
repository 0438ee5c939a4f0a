"""LaTeX tables of evaluation summaries, for papers (``booktabs``).

:func:`scores_table`: one row per route, fusion policy and the default search, one column per
metric, the best value of each column in bold; a superscript marks a list that the
significance tests (``comparisons.significance``, corrected) found better (``\\dag``) or worse
(``\\ddag``) than the best single route, the layout of ranx's ``Report.to_latex``.
:func:`per_type_table`: the first metric per query type (columns) and list (rows).
:func:`render_latex`: both tables for every summary, one ``table`` float each.
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["escape", "per_type_table", "render_latex", "scores_table"]

_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
            "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def escape(text: Any) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join(_SPECIAL.get(c, c) for c in str(text))


def _rows(s: dict) -> list[tuple[str, str, dict]]:
    out = [(f"route:{r}", r, v or {}) for r, v in (s.get("routes") or {}).items()]
    out += [(f"fusion:{p}", p, v or {}) for p, v in (s.get("fusion") or {}).items()]
    if isinstance(s.get("default"), dict) and s["default"]:
        out.append(("default", "default", s["default"]))
    out += [(f"anchor:{n}", n, a["metrics"]) for n, a in (s.get("anchors") or {}).items()
            if isinstance(a, dict) and isinstance(a.get("metrics"), dict)]
    return out


def _marks(s: dict) -> dict[tuple[str, str], str]:
    """``{(label, metric): mark}`` from the corrected tests against the best route."""
    sig = (s.get("comparisons") or {}).get("significance") or {}
    best = sig.get("best_route")
    out: dict[tuple[str, str], str] = {}
    for t in sig.get("tests") or ():
        if not isinstance(t, dict) or not t.get("significant") or best is None:
            continue
        if t.get("b") == f"route:{best}" and isinstance(t.get("delta"), (int, float)):
            out[(t["a"], t["metric"])] = r"\dag" if t["delta"] > 0 else r"\ddag"
    return out


def _num(v: Any, digits: int) -> str:
    return "--" if not isinstance(v, (int, float)) or isinstance(v, bool) else f"{v:.{digits}f}"


def scores_table(s: dict, metrics: Sequence[str] | None = None, digits: int = 4,
                 caption: str | None = None, label: str | None = None) -> str:
    """The scores of summary ``s`` as a LaTeX ``table`` (see the module docstring)."""
    rows = _rows(s)
    if metrics is None:
        metrics = list(dict.fromkeys(m for _, _, v in rows for m in v))
    best = {}
    for m in metrics:
        vals = [v.get(m) for _, _, v in rows if isinstance(v.get(m), (int, float))]
        best[m] = max(vals) if len(set(vals)) > 1 else None  # nothing bold when all are equal
    marks = _marks(s)
    alpha = ((s.get("comparisons") or {}).get("significance") or {}).get("alpha", 0.05)
    best_route = ((s.get("comparisons") or {}).get("significance") or {}).get("best_route")
    lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{ll" + "r" * len(metrics) + "}",
             r"\toprule", "kind & list & " + " & ".join(escape(m) for m in metrics) + r" \\",
             r"\midrule"]
    previous = None
    for lab, name, vals in rows:
        kind = lab.split(":", 1)[0]
        if previous is not None and kind != previous:
            lines.append(r"\midrule")
        previous = kind
        cells = []
        for m in metrics:
            v = vals.get(m)
            cell = _num(v, digits)
            if best[m] is not None and v == best[m]:
                cell = rf"\textbf{{{cell}}}"
            if (lab, m) in marks:
                cell += rf"\textsuperscript{{{marks[(lab, m)]}}}"
            cells.append(cell)
        lines.append(f"{escape(kind)} & {escape(name)} & " + " & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption is None:
        n = s.get("n_queries")
        caption = (f"{escape(s.get('dataset', ''))}/{escape(s.get('split', ''))}"
                   + (f", {n} queries" if n is not None else "") + ". Best per column in bold")
        if marks and best_route is not None:
            caption += (rf"; \dag{{}} / \ddag{{}}: significantly better / worse than the best route "
                        rf"({escape(best_route)}), adjusted $p < {alpha}$")
        caption += "."
    lines.append(rf"\caption{{{caption}}}")
    if label:
        lines.append(rf"\label{{{escape(label)}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def per_type_table(s: dict, metric: str | None = None, digits: int = 4,
                   label: str | None = None) -> str | None:
    """``metric`` (default: the first of the settings) per query type, or None without types."""
    by_type = ((s.get("per_type") or {}).get("by_type") or {})
    if not by_type:
        return None
    metric = metric or ((s.get("settings") or {}).get("metrics") or [None])[0]
    types = list(by_type)
    names: list[tuple[str, str, str]] = []
    for entry in by_type.values():
        for kind in ("routes", "fusion"):
            for name in entry.get(kind) or {}:
                key = (kind, name, f"{kind.rstrip('s')} {name}")
                if key not in names:
                    names.append(key)
        if "default" in entry and ("default", "default", "default") not in names:
            names.append(("default", "default", "default"))
    if metric is None:
        return None
    lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{l" + "r" * len(types) + "}",
             r"\toprule", "list & " + " & ".join(
                 f"{escape(t)} ({by_type[t].get('n_queries', '?')})" for t in types) + r" \\",
             r"\midrule"]
    for kind, name, shown in names:
        vals = []
        for t in types:
            e = by_type[t]
            v = (e.get("default") or {}).get(metric) if kind == "default" else \
                ((e.get(kind) or {}).get(name) or {}).get(metric)
            vals.append(_num(v, digits))
        lines.append(f"{escape(shown)} & " + " & ".join(vals) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}",
              rf"\caption{{{escape(metric)} per query type (queries in parentheses).}}"]
    if label:
        lines.append(rf"\label{{{escape(label)}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def render_latex(summaries: Sequence[dict]) -> str:
    """Every summary's scores and per-type tables (needs ``\\usepackage{booktabs}``)."""
    parts = ["% lar evaluation tables; needs \\usepackage{booktabs}", ""]
    for i, s in enumerate(summaries):
        name = f"{s.get('dataset', 'summary')}-{s.get('split', i)}"
        parts.append(scores_table(s, label=f"tab:{name}-scores"))
        pt = per_type_table(s, label=f"tab:{name}-types")
        if pt:
            parts.append(pt)
    return "\n".join(parts)
