"""lar_evals.report: Markdown and self-contained HTML reports of evaluation summaries."""
from __future__ import annotations

import copy
import json

import pytest

from lar_evals import report_charts
from lar_evals.report import load_summaries, main, overlap_pairs, render_html, render_markdown
from lar.core.errors import LarError

SUMMARY = {
    "schema": 1, "dataset": "scifact", "split": "test", "n_queries": 50,
    "settings": {"routes": ["bm25", "static", "grep"], "k": 10},
    "routes": {"bm25": {"ndcg@10": 0.61, "recall@100": 0.9},
               "static": {"ndcg@10": 0.45, "recall@100": 0.8},
               "grep": {"ndcg@10": 0.3, "recall@100": 0.5}},
    "fusion": {"rrf": {"ndcg@10": 0.63, "recall@100": 0.93},
               "route-unique": {"ndcg@10": 0.64, "recall@100": 0.94}},
    "default": {"ndcg@10": 0.62, "recall@100": 0.91},
    "timing": {"build_s": {"bm25": 1.2, "static": 3.4},
               "query_ms": {"bm25": {"mean": 3.1, "p95": 5.0},
                            "default": {"mean": 30.0, "p95": 45.0}}},
    "coverage": {"bm25": 1.0, "static": 0.75},
    "data_report": {"queries": 50, "dropped_qrels": 2},
    "comparisons": {
        "significance": {"stat_test": "student", "correction": "holm", "alpha": 0.05,
                         "best_route": "bm25",
                         "tests": [{"a": "fusion:rrf", "b": "route:bm25", "metric": "ndcg@10",
                                    "delta": 0.02, "p_value": 0.2, "p_holm": 0.4,
                                    "significant": False}]},
        "route_unique_relevant": {"k": 10, "relevant_pairs": 60,
                                  "found_by_route": {"bm25": 40, "static": 30, "grep": 10},
                                  "route_unique": {"bm25": 8, "static": 5, "grep": 1},
                                  "recovered_by": {"rrf": 6}, "kept_by": {"rrf": 45},
                                  "found_by_pair": {"bm25": {"static": 25, "grep": 9}}}},
    "attribution": {"counts": {"not-indexed": 3, "ranked-low": 7},
                    "examples": [{"query": "q1", "doc": "d1", "reason": "ranked-low"}]},
    "per_type": {"by_type": {"rare-term": {"n_queries": 20, "routes": {"bm25": {"ndcg@10": 0.8}},
                                           "fusion": {"rrf": {"ndcg@10": 0.7}},
                                           "default": {"ndcg@10": 0.75}}},
                 "untyped_queries": 30},
    "anytime": [{"timebox_s": 0.05, "ndcg@10": 0.3, "mean_ms": 50.0, "aborted_runs": 140,
                 "mean_coverage": {"bm25": 0.5}},
                {"timebox_s": 0.2, "ndcg@10": 0.5, "mean_ms": 200.0},
                {"timebox_s": 1.0, "ndcg@10": 0.62, "mean_ms": 900.0}],
    "runs_dir": None,
    "custom_field": {"x": 1},
}


def test_markdown_has_the_route_table_and_every_section():
    md = render_markdown([SUMMARY])
    assert md.startswith("# Evaluation report")
    assert "## scifact / test (50 queries)" in md
    assert "| kind | name | ndcg@10 | recall@100 | mean ms | p95 ms |" in md
    assert "| route | bm25 | 0.6100 | 0.9000 | 3.1 | 5.0 |" in md  # milliseconds to 0.1 ms
    assert "| fusion | route-unique | **0.6400** | **0.9400** | – | – |" in md  # best in bold
    for title in ("Build time and coverage", "Per query type", "Anytime curve", "Significance",
                  "Relevant documents by route", "Route overlap", "Miss attribution",
                  "Data report", "Settings", "Other fields"):
        assert f"### {title}" in md, title
    assert "| rare-term | 20 | route | bm25 | 0.8000 |" in md
    assert '"custom_field"' in md


def test_tables_hold_no_json_and_the_overlap_is_a_matrix():
    md = render_markdown([SUMMARY])
    table_lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert not any("{" in ln or '"' in ln for ln in table_lines)  # no JSON in any cell
    assert "| 0.0500 | 0.3000 | 50.0 | 140 | bm25 0.5000 |" in md
    # the route overlap: one row per route, not one per pair
    assert "|  | bm25 | static | grep |" in md
    assert "| static | 25 | – | – |" in md
    assert "| fusion:rrf | route:bm25 | ndcg@10 | 0.0200 | – | – | 0.2 | 0.4 | no |" in md


def test_anytime_chart_plots_metrics_only():
    specs = dict(report_charts.charts(dict(SUMMARY, settings={"metrics": ["ndcg@10"]})))
    values = json.dumps(specs["Anytime curve"])
    assert '"metric": "ndcg@10"' in values and "aborted_runs" not in values
    assert "mean_coverage" not in values
    specs = dict(report_charts.charts(dict(SUMMARY, settings={})))  # no settings: ranx names only
    assert "aborted_runs" not in json.dumps(specs["Anytime curve"])


def test_missing_keys_are_tolerated():
    md = render_markdown([{"routes": {"grep": {"ndcg@10": 0.5}}}, {}])
    assert "## Overview" in md and "| route | grep | 0.5000 |" in md
    assert "## summary 2" in md
    page = render_html([{}])
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")


def test_per_type_in_the_flat_form():
    s = {"per_type": {"paraphrase": {"bm25": {"ndcg@10": 0.2}, "static": {"ndcg@10": 0.4}}}}
    assert "| paraphrase | – |  | static | 0.4000 |" in render_markdown([s])


def test_overlap_pairs_accepts_several_shapes():
    nested = overlap_pairs(SUMMARY)
    assert {"a": "bm25", "b": "static", "n": 25} in nested and len(nested) == 2
    flat = {"comparisons": {"pairwise": {"bm25|static": 4}}}
    assert overlap_pairs(flat) == [{"a": "bm25", "b": "static", "n": 4}]
    rows = {"comparisons": {"overlap": [{"a": "x", "b": "y", "both": 3}]}}
    assert overlap_pairs(rows) == [{"a": "x", "b": "y", "n": 3}]
    assert overlap_pairs({}) == []


def test_html_has_tables_and_chart_specs_with_data():
    pytest.importorskip("altair")
    page = render_html([SUMMARY])
    for name in ("bm25", "static", "grep", "route-unique"):
        assert f"<td>{name}</td>" in page
    specs = [json.loads(chunk.split(">", 1)[1].split("</script>", 1)[0].replace("<\\/", "</"))
             for chunk in page.split("<script type='application/json' class='vega-lite-spec'")[1:]]
    assert len(specs) == 4  # scores, anytime, overlap, found per route
    values = json.dumps(specs)
    assert '"timebox_s": 0.2' in values and '"name": "route-unique"' in values
    assert '"type": "log"' in values
    assert "<script src" not in page and "http://" not in page.split("<svg")[0]


def test_html_renders_svg_offline_when_vl_convert_is_installed():
    pytest.importorskip("altair")
    pytest.importorskip("vl_convert")
    page = render_html([SUMMARY])
    assert page.count("<svg") == 4


def test_html_without_altair_keeps_the_tables(monkeypatch):
    monkeypatch.setattr(report_charts, "_altair", lambda: None)
    page = render_html([SUMMARY])
    assert "Charts need altair" in page and "<td>bm25</td>" in page
    assert "vega-lite-spec" not in page


def test_html_without_vl_convert_embeds_specs_with_a_note(monkeypatch):
    pytest.importorskip("altair")
    monkeypatch.setattr(report_charts, "_vl_convert", lambda: None)
    page = render_html([SUMMARY])
    assert "<svg" not in page and "vl-convert-python" in page
    assert page.count("class='vega-lite-spec'") == 4


def test_cells_are_escaped():
    s = copy.deepcopy(SUMMARY)
    s["routes"]["<b>odd|name</b>"] = {"ndcg@10": 0.1}
    assert "&lt;b&gt;odd|name&lt;/b&gt;" in render_html([s])
    assert "<b>odd\\|name</b>" in render_markdown([s])


def test_cli_writes_markdown_and_html(tmp_path, capsys):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(SUMMARY), encoding="utf-8")
    assert main([str(path), str(path), "--out", str(tmp_path / "out" / "REPORT")]) == 0
    assert "## Overview" in (tmp_path / "out" / "REPORT.md").read_text(encoding="utf-8")
    assert "<td>static</td>" in (tmp_path / "out" / "REPORT.html").read_text(encoding="utf-8")
    assert "REPORT.html" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main([str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "bad.json" in capsys.readouterr().err
    with pytest.raises(LarError, match="JSON object"):
        (tmp_path / "list.json").write_text("[]", encoding="utf-8")
        load_summaries([tmp_path / "list.json"])
