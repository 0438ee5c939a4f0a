"""Issue 20 item 7: the results table (fused score, each layer's rank and score; a sortable,
filterable grid), the status bars' fixed width, unique path suffixes on the fusion chart, and
the anytime chart against time (quality with qrels, each hit's rank without)."""
from __future__ import annotations

import pytest

import lar_magics
from lar.core.result import Result
from lar.core.types import Evidence, Hit, LayerRun, RunState, Span
from lar_magics import render, results_table
from lar_magics.anytime_view import AnytimeView, Stage, ranked_paths
from lar_magics.charts import anytime_rows, fusion_chart
from lar_magics.labels import unique_suffixes
from lar_magics.results import search
from lar_magics.status_view import BAR_WIDTH, StatusView


@pytest.fixture
def eng(engine):
    lar_magics.use(engine)
    yield engine
    lar_magics.SESSION.close()


def known_result() -> Result:
    h1 = Hit(Span("ab" * 16, 0, 10), ("bm25", "grep"),
             {"bm25": Evidence("bm25", 1, 7.5, "bm25"), "grep": Evidence("grep", 3, 2.0, "matches")},
             paths=("docs/fusion.md",), lines=(3, 4), score=0.03252, rank=1)
    h2 = Hit(Span("cd" * 16, 0, 10), ("grep",), {"grep": Evidence("grep", 1, 4.0, "matches")},
             paths=("notes/a.md",), lines=(7, 7), score=0.01639, rank=2)
    runs = (LayerRun("names", RunState.RAN), LayerRun("grep", RunState.RAN),
            LayerRun("bm25", RunState.RAN))
    return Result("fusion", (h1, h2), runs, 2.0, 0.1, 5, "rrf", "balanced", score_scale="rrf")


def test_results_table_has_fused_score_and_each_layers_rank_and_score():
    res = known_result()
    assert results_table.route_names(res) == ["grep", "bm25"]  # the call's order; names found none
    assert results_table.columns(res) == ["rank", "score", "hit", "grep rank", "grep score",
                                          "bm25 rank", "bm25 score", "id"]
    html = results_table.table_html(res)
    assert "<th title='fused score (rrf scale)'>score</th>" in html
    first = html.split("<tr>")[2]  # [0] before the table, [1] the header row
    assert first.startswith("<td>1</td><td data-sort='0.03252'>0.03252</td>"
                            "<td>docs/fusion.md:3-4</td><td>3</td><td data-sort='2.0'>2</td>"
                            "<td>1</td><td data-sort='7.5'>7.5</td>")
    second = html.split("<tr>")[3]
    assert second.startswith("<td>2</td><td data-sort='0.01639'>0.01639</td><td>notes/a.md:7</td>"
                             "<td>1</td><td data-sort='4.0'>4</td><td class='lar-none'></td>"
                             "<td class='lar-none'></td>")
    df = results_table.table_frame(res)
    assert df["bm25 rank"].to_list() == [1, None] and df["score"].to_list() == [0.03252, 0.01639]
    chips = render.chips_html(res.hits[0])  # each chip: the layer's rank and its score
    assert "bm25 #1 <span class='lar-lscore'>7.5</span>" in chips
    assert "grep #3 <span class='lar-lscore'>2</span>" in chips


def test_results_grid_is_sortable_and_filterable():
    import json

    g = results_table.results_grid(known_result())
    args = g._dt_args
    assert args["column_filters"] == "footer" and args["layout"]["topEnd"] == "search"
    assert args["paging"] is False and args["order"] == []  # every row shown, lar's order first
    assert g.caption == "score: fused, on the rrf scale"
    rows = json.loads(args["data_json"])
    assert rows[0][:3] == [1, ["0.03252", 0.03252], "docs/fusion.md:3-4"]
    assert "<th>bm25 rank</th>" in args["table_html"]


def test_results_view_has_a_table_tab_for_a_real_search(eng):
    eng.build(timebox=60, layers=["bm25"])
    res = search(eng, "Reciprocal rank fusion", layers=["grep", "bm25"], k=5, timebox=5.0)
    view = res.widget()
    assert view.tabs.titles == ("hits", "table")
    grid = view.table_box.children[0]
    df = results_table.table_frame(res)
    assert df["rank"].to_list() == list(range(1, len(res.hits) + 1))
    for row, h in zip(df.iter_rows(named=True), res.hits):
        assert row["score"] == pytest.approx(h.score)
        for n in ("grep", "bm25"):
            ev = h.evidence.get(n)
            assert row[f"{n} rank"] == (ev.rank if ev else None)
    assert "grep rank" in grid._dt_args["table_html"]
    assert "<summary>table</summary><table class='lar-runs lar-table'>" in res._repr_html_()


def test_unique_suffixes_tell_paths_apart():
    paths = ["lar/layers/bm25/index.py:1-5", "lar/layers/dense/index.py:1-5", "docs/readme.md:3",
             "lar/layers/bm25/layer.py:2", "docs/readme.md:3"]
    assert unique_suffixes(paths) == ["…/bm25/index.py:1-5", "…/dense/index.py:1-5",
                                      "…/readme.md:3", "…/layer.py:2", "…/readme.md:3"]
    # a path that is a suffix of another stays whole; absolute paths keep their slash
    assert unique_suffixes(["a/x/y.py", "b/x/y.py", "x/y.py"]) == ["a/x/y.py", "b/x/y.py", "x/y.py"]
    assert unique_suffixes(["/abs/a.py", "/abs/b/a.py", "top.md"]) == ["/abs/a.py", "…/b/a.py", "top.md"]


def test_fusion_chart_labels_rows_by_unique_suffix():
    import polars as pl

    frame = pl.DataFrame([
        {"policy": "rrf", "rank": 1, "id": "a", "hit": "lar/layers/bm25/index.py:1-5", "signals": "bm25"},
        {"policy": "rrf", "rank": 2, "id": "b", "hit": "lar/layers/dense/index.py:1-5", "signals": "dense"},
    ])
    spec = fusion_chart(frame).to_dict()
    values = spec["datasets"][next(iter(spec["datasets"]))] if "datasets" in spec else spec["data"]["values"]
    assert [v["label"] for v in values] == ["…/bm25/index.py:1-5", "…/dense/index.py:1-5"]
    y = spec["layer"][0]["encoding"]["y"]
    assert y["field"] == "label" and y["axis"]["labelLimit"] == 0  # never cut by the axis


def test_status_bars_keep_their_width_whatever_the_note(eng):
    import dataclasses

    view = StatusView(eng)
    st = eng.status()
    long_note = "a very long note " * 30
    view._refresh(dataclasses.replace(st, layers=tuple(
        dataclasses.replace(l, notes=long_note if l.name == "bm25" else "") for l in st.layers)))
    rows = {r.children[0].description: r.children for r in view.bars_box.children}
    bar, count, note = rows["bm25"]
    assert (bar.layout.width, bar.layout.min_width, bar.layout.flex) == (BAR_WIDTH, BAR_WIDTH, "0 0 auto")
    assert count.layout.flex == "0 0 auto" and note.layout.min_width == "0"
    assert long_note.strip() in note.value and "%" in count.value and "note" not in count.value
    assert rows["grep"][2].value == ""


def test_anytime_rows_plot_hits_against_time(eng):
    view = AnytimeView(eng, "timebox", timebox=5.0, steps=["25ms"], layers=["grep"], k=5, run=True)
    rows = anytime_rows(view.stages)
    last = view.stages[-1]
    assert [r["rank"] for r in rows if r["timebox_ms"] == 5000.0] == list(range(1, len(last.hits) + 1))
    assert {r["elapsed_ms"] for r in rows if r["timebox_ms"] == 5000.0} == {round(last.elapsed * 1000, 3)}
    assert "<svg" in view.chart.value  # the chart is drawn in the view


@pytest.mark.slow  # ranx (the evaluation harness's scorer) takes tens of seconds to import
def test_anytime_quality_against_time_with_qrels(eng):
    """With qrels: nDCG@10 per stage, against the time each stage's search took."""
    import math

    plain = eng.search("timebox", layers=["grep"], k=5, timebox=5.0)
    docs = ranked_paths(plain, {})
    assert docs  # the corpus has files that mention "timebox"
    judged = {docs[-1]: 1}
    graded = AnytimeView(eng, "timebox", timebox=5.0, steps=[], layers=["grep"], k=5, run=True,
                         qrels=judged)
    q = graded.stages[-1].quality["ndcg@10"]
    assert q == pytest.approx(1 / math.log2(len(docs) + 1))  # the one judged file is last
    qrows = anytime_rows(graded.stages)
    assert qrows == [{"elapsed_ms": round(graded.stages[-1].elapsed * 1000, 3), "timebox_ms": 5000.0,
                      "metric": "ndcg@10", "value": q, "hits": len(graded.stages[-1].hits)}]


def test_anytime_rows_label_hits_by_unique_suffix():
    from types import SimpleNamespace

    def hit(hid, path):
        return SimpleNamespace(id=hid, path=path, lines=(1, 2))

    res = SimpleNamespace(result=SimpleNamespace(hits=[hit("a", "x/one/f.py"), hit("b", "x/two/f.py")]))
    stage = Stage(0.1, 0.05, ("a", "b"), ("a", "b"), (), {}, res)
    rows = anytime_rows([stage])
    assert [(r["label"], r["rank"], r["new"]) for r in rows] == [("…/one/f.py:1-2", 1, True),
                                                                 ("…/two/f.py:1-2", 2, True)]
