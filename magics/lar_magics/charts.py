"""altair charts of the workbench: a call's layers, coverage, a fusion comparison, anytime
stages. Each function returns an ``altair.Chart`` (``.to_dict()`` for its Vega-Lite spec);
the data functions beside them return polars frames.
"""
from __future__ import annotations

from typing import Any, Sequence

from lar.core.errors import require

from lar_magics.results import Results, search

POLICIES = ("route-unique", "rrf", "combsum", "combmnz")
STATE_COLORS = {"domain": ["ran", "aborted", "skipped", "failed"],
                "range": ["#1a7f37", "#d9822b", "#9e9e9e", "#c62828"]}


def _alt():
    return require("altair", "notebook")


def runs_chart(result):
    """Elapsed ms per layer of one call, coloured by state (ran / aborted / skipped / failed)."""
    alt = _alt()
    res = getattr(result, "result", result)
    rows = [{"layer": r.name, "state": r.state.value, "elapsed_ms": r.elapsed * 1000,
             "hits": r.contributions, "reason": r.reason} for r in res.runs]
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("elapsed_ms:Q", title="elapsed (ms)"), y=alt.Y("layer:N", sort="-x"),
        color=alt.Color("state:N", scale=alt.Scale(**STATE_COLORS)),
        tooltip=["layer:N", "state:N", "hits:Q", "elapsed_ms:Q", "reason:N"],
    ).properties(title="layers of this call", width=360)


def coverage_chart(status):
    """Coverage of the applicable scope per layer."""
    alt = _alt()
    rows = [{"layer": l.name, "coverage": l.coverage, "units": l.units, "built": l.built_units}
            for l in status.layers]
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("coverage:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        y=alt.Y("layer:N"), tooltip=["layer:N", "coverage:Q", "built:Q", "units:Q"],
    ).properties(title="coverage per layer", width=360)


def compare_fusion(engine, query: Any, policies: Sequence[str] = POLICIES, **params: Any):
    """The same query under each fusion policy: a polars frame with one row per (policy, hit):
    policy, rank, id, path, lines, signals. Layers run once per policy."""
    import polars as pl

    rows = []
    for pol in policies:
        res: Results = search(engine, query, fusion=pol, **params)
        for i, h in enumerate(res.hits, 1):
            lines = f"{h.lines[0]}-{h.lines[1]}" if h.lines else ""
            rows.append({"policy": pol, "rank": i, "id": h.id, "hit": f"{h.path}:{lines}",
                         "signals": ", ".join(h.signals)})
    return pl.DataFrame(rows, schema={"policy": pl.Utf8, "rank": pl.Int64, "id": pl.Utf8,
                                      "hit": pl.Utf8, "signals": pl.Utf8})


def fusion_chart(frame):
    """Heatmap of a ``compare_fusion`` frame: hits (rows) by policy (columns), the rank in
    each cell; blank where a policy left the hit out."""
    alt = _alt()
    rows = frame.to_dicts()
    order = list(dict.fromkeys(r["hit"] for r in sorted(rows, key=lambda r: r["rank"])))
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("policy:N", sort=list(dict.fromkeys(r["policy"] for r in rows))),
        y=alt.Y("hit:N", sort=order, title=None))
    return (base.mark_rect().encode(color=alt.Color("rank:Q", scale=alt.Scale(scheme="blues",
                                                                              reverse=True)),
                                    tooltip=["hit:N", "policy:N", "rank:Q", "signals:N"])
            + base.mark_text(fontSize=10).encode(text="rank:Q")
            ).properties(title="rank of each hit under each fusion policy", width=280)


def anytime_chart(stages):
    """Hits per stage of an anytime run: kept from the stage before vs new."""
    alt = _alt()
    rows = []
    for s in stages:
        ms = f"{s.timebox * 1000:.0f} ms"
        rows.append({"stage": ms, "order": s.timebox, "kind": "new", "hits": len(s.added)})
        rows.append({"stage": ms, "order": s.timebox, "kind": "kept",
                     "hits": len(s.hits) - len(s.added)})
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("stage:N", sort=alt.EncodingSortField("order"), title="timebox"),
        y=alt.Y("hits:Q", stack=True), color=alt.Color("kind:N"),
        tooltip=["stage:N", "kind:N", "hits:Q"],
    ).properties(title="hits as the timebox grows", width=300)


__all__ = ["POLICIES", "anytime_chart", "compare_fusion", "coverage_chart", "fusion_chart",
           "runs_chart"]
