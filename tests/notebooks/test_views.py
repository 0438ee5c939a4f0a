"""The widgets on the shared test corpus (tests/conftest.py): results cards and fetch in place,
change detection and refresh, the status view's coverage bars and live refresh, the anytime
view's stages, the charts, and the HTML helpers."""
from __future__ import annotations

import time

import pytest

import lar_magics
from lar_magics import render
from lar_magics.anytime_view import AnytimeView, plan_steps
from lar_magics.charts import anytime_chart, compare_fusion, coverage_chart, fusion_chart, runs_chart
from lar_magics.results import search
from lar_magics.status_view import StatusView

QUERY = "Reciprocal rank fusion"


@pytest.fixture
def eng(engine):
    lar_magics.use(engine)
    yield engine
    lar_magics.SESSION.close()


def test_results_view_cards_fetch_and_refresh(eng, corpus):
    res = search(eng, QUERY, layers=["grep"], k=5, timebox=5.0)
    view = res.widget()
    assert [c.hit.id for c in view.cards] == [h.id for h in res.hits]
    assert [render.location(c.hit) for c in view.cards] == ["docs/fusion.md:3", "docs/fusion.md:1"]
    assert ("# <mark class='lar-mark' title='grep'>Reciprocal rank fusion</mark></div>"
            in view.cards[1].card.value)
    f = view.cards[0].fetch()  # the button's action: fetch in place with 2 lines of context
    assert f.context_lines == (1, 4) and not f.changed
    assert "<b>Reciprocal rank fusion adds 1/(c + rank)" in view.cards[0].text.value
    assert res.changes() == [] and view.check() == []
    # the file is edited underneath: a fetch from the old card says so, check() refreshes
    doc = corpus / "docs" / "fusion.md"
    doc.write_text("# Notes\n\n" + doc.read_text())
    old = view.cards[0]
    f = old.fetch()
    assert f.changed and f.current_id != old.hit.id
    assert "docs/fusion.md changed since this search" in view.notice.value
    assert view.refresh_button.button_style == "warning"
    assert view.check() == ["docs/fusion.md changed since this search"]
    assert "refreshed: docs/fusion.md changed since this search" in view.notice.value
    assert [render.location(c.hit) for c in view.cards] == ["docs/fusion.md:5", "docs/fusion.md:3"]
    assert view.results.changes() == []


def test_results_notice_a_layer_that_built_since(eng):
    res = search(eng, "timebox", layers=["grep", "bm25"], k=5, timebox=5.0)
    assert res.result.run("bm25").coverage == 0.0
    eng.build(timebox=60, layers=["bm25"])
    assert res.changes() == ["layer bm25 has built more since this search (coverage 0% -> 100%)"]


def test_status_view_refresh_reports_coverage(eng):
    view = StatusView(eng)
    cov = view.coverage()
    assert cov["grep"] == 1.0 and cov["names"] == 1.0 and cov["bm25"] == 0.0
    assert "no search yet" in view.runs.value
    eng.build(timebox=60, layers=["bm25"])
    res = search(eng, QUERY, layers=["grep"], k=2)
    lar_magics.SESSION.last = res
    view.refresh()
    assert view.coverage()["bm25"] == 1.0
    bars = {row.children[0].description: row.children[0] for row in view.bars_box.children}
    assert bars["bm25"].value == 1.0 and bars["bm25"].bar_style == "success"
    assert bars["trigram"].value == 0.0 and bars["trigram"].bar_style == "info"
    assert "<td>grep</td><td class='lar-state-ran'>ran</td><td>2</td>" in view.runs.value
    assert "<td>bm25</td><td class='lar-state-skipped'>skipped</td>" in view.runs.value
    view._versions["grep"] = "0"  # as if the layer had been at another version before
    view.refresh()
    assert "layer grep was rebuilt: version 0 -&gt; 1" in view.notice.value


def test_status_view_refreshes_on_a_timer(eng):
    view = StatusView(eng, interval=0.05)
    ticks = view.ticks
    view.start(build=False)
    assert view.running and view.live_button.value
    deadline = time.monotonic() + 60
    while view.ticks < ticks + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert view.ticks >= ticks + 3
    view.stop(build=False)
    assert not view.running and not view.live_button.value


def test_anytime_stages(eng):
    assert plan_steps("1s", ["25ms", "2s", "100ms"]) == [0.025, 0.1, 1.0]
    assert plan_steps(0.05) == [0.025, 0.05]
    view = AnytimeView(eng, "timebox", timebox=5.0, steps=["25ms", "100ms"], layers=["grep"], k=5,
                       run=True)
    stages = view.stages
    assert [s.timebox for s in stages] == [0.025, 0.1, 5.0]
    prev: tuple = ()
    for s in stages:
        assert s.added == tuple(i for i in s.hits if i not in prev)
        assert s.dropped == tuple(i for i in prev if i not in s.hits)
        assert s.states["grep"] in ("ran", "aborted") and s.states["bm25"] == "skipped"
        prev = s.hits
    direct = eng.search("timebox", layers=["grep"], k=5, timebox=5.0)
    assert stages[-1].hits == tuple(h.id for h in direct.hits) and len(direct.hits) == 4
    assert view.results.result.hits == stages[-1].results.result.hits
    assert len(view.rows.children) == 3
    df = view.to_polars()
    assert df.height == sum(len(s.hits) for s in stages)
    assert df.filter(df["timebox_ms"] == 5000.0)["id"].to_list() == list(stages[-1].hits)
    spec = anytime_chart(stages).to_dict()
    assert {v["timebox_ms"] for v in spec["data"]["values"]} <= {25.0, 100.0, 5000.0}
    assert spec["encoding"]["x"]["field"] == "elapsed_ms"  # hits against time, not counts


def test_anytime_magic_binds_the_view(shell, eng):
    with_steps = '%lar anytime "timebox" --layers grep --k 3 --timebox 2s --steps 50ms'
    r = shell.run_cell(with_steps)
    view = shell.user_ns["_lar_anytime"]
    assert r.result is view and [s.timebox for s in view.stages] == [0.05, 2.0]
    assert lar_magics.SESSION.last is view.results


def test_charts(eng):
    res = search(eng, "timebox deadline", layers=["grep", "bm25"], k=5, timebox=5.0)
    spec = runs_chart(res).to_dict()
    assert {v["layer"]: v["state"] for v in spec["data"]["values"]}["names"] == "skipped"
    frame = compare_fusion(eng, "timebox deadline", layers=["grep"], k=3, timebox=5.0)
    assert frame["policy"].unique(maintain_order=True).to_list() == [
        "route-unique", "rrf", "combsum", "combmnz"]
    assert frame.height == 12 and frame["rank"].to_list() == [1, 2, 3] * 4
    assert "layer" in fusion_chart(frame).to_dict()
    cov = coverage_chart(eng.status()).to_dict()
    assert {v["layer"]: v["coverage"] for v in cov["data"]["values"]}["grep"] == 1.0


def test_highlight_merges_layers_and_never_splits_a_character():
    data = "naïve café and more text".encode()
    start = data.index("café".encode())
    html = render.highlight(data, 0, len(data), [(start, start + 5, "grep"),
                                                 (start, start + 2, "bm25")])
    assert html == ("naïve <mark class='lar-mark' title='bm25, grep'>ca</mark>"
                    "<mark class='lar-mark' title='grep'>fé</mark> and more text")
    cut = data.index("é".encode()) + 1  # inside the two bytes of é: the cut moves past it
    assert render.highlight(data, 0, cut, []) == "naïve café"
    assert render.highlight(b"a<b>&", 0, 5, [(1, 4, "grep")]) == (
        "a<mark class='lar-mark' title='grep'>&lt;b&gt;</mark>&amp;")


def test_window_of_a_long_span_starts_before_the_first_match():
    import lar

    h = "ab" * 16
    span = lar.Span(h, 0, 2000)
    hit = lar.Hit.single("bm25", span, rank=1, score=1.0, score_kind="bm25",
                         sub_spans=[(900, 905), (1500, 1505)])
    assert render.window(hit) == (900 - render.LEAD, 900 - render.LEAD + render.WINDOW)
    short = lar.Hit.single("grep", lar.Span(h, 10, 50), rank=1, score=1.0, score_kind="x")
    assert render.window(short) == (10, 50)


def test_results_view_shows_each_layers_probe():
    from lar.core.types import Evidence, Hit, LayerRun, RunState, Span

    ev = Evidence("bm25", 1, 7.5, "bm25", evalue=2.5e-4, p_value=2.4997e-4)
    hit = Hit(Span("ab" * 16, 0, 10), ("bm25", "grep"),
              {"bm25": ev, "grep": Evidence("grep", 3, 1.0, "matches")})
    chips = render.chips_html(hit)
    assert "bm25 #1 <span class='lar-lscore'>7.5</span> <span class='lar-p'>p=0.0002</span>" in chips
    assert "E-value 0.00025, p 0.00025 against this layer" in chips
    assert "grep #3 <span class='lar-lscore'>1</span></span>" in chips  # no probe: rank, score
    probed = LayerRun("bm25", RunState.RAN, probe={"usable": True, "top_evidence": 8.29,
                                                    "agreement": 0.3, "weight": 1.5})
    flat = LayerRun("grep", RunState.RAN, probe={"usable": False, "reason": "scores do not fall"})
    assert render.probe_html(probed) == "top -ln p 8.3, agreement 30%, weight 1.50"
    assert "no signal" in render.probe_html(flat) and "scores do not fall" in render.probe_html(flat)
    scanned = LayerRun("dense", RunState.RAN, probe={"usable": True, "top_evidence": 3.0, "agreement": 0.5,
                                                      "top_z": 4.256, "background": {"n": 812, "mean": 0.1, "std": 0.05}})
    html = render.probe_html(scanned)
    assert ">top -ln p 3.0, top z 4.3, agreement 50%</span>" in html
    assert "4.26 sds above the mean of all 812 scores" in html
    table = render.runs_html([probed, flat, LayerRun("names", RunState.RAN)])
    assert "signal (probe)" in table and table.count("<tr>") == 4
