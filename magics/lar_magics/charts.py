"""altair charts of the workbench: a call's layers, coverage, a fusion comparison, anytime
stages. Each function returns an ``altair.Chart`` (``.to_dict()`` for its Vega-Lite spec);
the data functions beside them return polars frames.
"""
from __future__ import annotations

from typing import Any, Sequence

from lar.core.errors import require

from lar_magics.labels import unique_suffixes
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
    each cell; blank where a policy left the hit out. Rows are labelled by each hit's shortest
    unique path suffix (``labels.unique_suffixes``), never cut; the full place is in the tooltip."""
    alt = _alt()
    rows = frame.to_dicts()
    hits = list(dict.fromkeys(r["hit"] for r in sorted(rows, key=lambda r: r["rank"])))
    label = dict(zip(hits, unique_suffixes(hits)))
    for r in rows:
        r["label"] = label[r["hit"]]
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("policy:N", sort=list(dict.fromkeys(r["policy"] for r in rows))),
        y=alt.Y("label:N", sort=[label[h] for h in hits], title=None,
                axis=alt.Axis(labelLimit=0)))
    return (base.mark_rect().encode(color=alt.Color("rank:Q", scale=alt.Scale(scheme="blues",
                                                                              reverse=True)),
                                    tooltip=["hit:N", "policy:N", "rank:Q", "signals:N"])
            + base.mark_text(fontSize=10).encode(text="rank:Q")
            ).properties(title="rank of each hit under each fusion policy", width=280)


def anytime_rows(stages) -> list[dict[str, Any]]:
    """The points of ``anytime_chart``: per stage its time (``elapsed_ms``, what the search
    took; ``timebox_ms``, what it was given) and, with qrels, one row per metric (``metric``,
    ``value``); without, one row per hit (``hit``, its unique path suffix ``label``, ``rank``)."""
    rows: list[dict[str, Any]] = []
    if any(s.quality for s in stages):
        for s in stages:
            for metric, value in s.quality.items():
                rows.append({"elapsed_ms": round(s.elapsed * 1000, 3), "timebox_ms": s.timebox * 1000,
                             "metric": metric, "value": value, "hits": len(s.hits)})
        return rows
    places = {}
    for s in stages:
        res = s.results.result if s.results is not None else None
        for h in (res.hits if res is not None else ()):
            places.setdefault(h.id, hit_place(h))
    label = dict(zip(places, unique_suffixes(list(places.values()))))
    for s in stages:
        for rank, hid in enumerate(s.hits, 1):
            rows.append({"elapsed_ms": round(s.elapsed * 1000, 3), "timebox_ms": s.timebox * 1000,
                         "hit": places.get(hid, hid), "label": label.get(hid, hid), "rank": rank,
                         "new": hid in s.added})
    return rows


def hit_place(hit) -> str:
    lines = f":{hit.lines[0]}-{hit.lines[1]}" if hit.lines else ""
    return f"{hit.path}{lines}"


def anytime_chart(stages):
    """An anytime run against time: with qrels, each stage's quality (nDCG@10 by default)
    against the time its search took; without, each hit's rank against that time (one line per
    hit: when it arrived, where it ranked, whether it stayed)."""
    alt = _alt()
    rows = anytime_rows(stages)
    x = alt.X("elapsed_ms:Q", title="time the search took (ms)")
    if rows and "metric" in rows[0]:
        return alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
            x=x, y=alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title="quality"),
            color=alt.Color("metric:N"),
            tooltip=["timebox_ms:Q", "elapsed_ms:Q", "metric:N", "value:Q", "hits:Q"],
        ).properties(title="quality as the timebox grows", width=320)
    return alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=x, y=alt.Y("rank:Q", scale=alt.Scale(reverse=True, zero=False), title="rank",
                     axis=alt.Axis(tickMinStep=1, format="d")),
        color=alt.Color("label:N", title="hit", legend=alt.Legend(labelLimit=0)),
        tooltip=["hit:N", "rank:Q", "timebox_ms:Q", "elapsed_ms:Q", "new:N"],
    ).properties(title="each hit's rank as the timebox grows", width=320)


__all__ = ["POLICIES", "anytime_chart", "anytime_rows", "hit_place", "compare_fusion", "coverage_chart", "fusion_chart",
           "runs_chart"]
