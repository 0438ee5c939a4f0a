"""The per-query section, its table (TSV / CSV / parquet through polars) and the wins and
losses of the default search against the best route."""
from __future__ import annotations

import polars as pl
import pytest

from lar_evals.errors import EvalConfigError
from lar_evals.per_query import wins_losses, write_table

SECTION = {"metrics": ["ndcg@10"], "labels": ["default", "route:bm25"], "rows": [
    {"qid": "q1", "type": "a", "text": "tab\there", "values": {"default": {"ndcg@10": 1.0}, "route:bm25": {"ndcg@10": 0.25}}},
    {"qid": "q2", "type": None, "text": "two\nlines", "values": {"default": {"ndcg@10": 0.0}, "route:bm25": {"ndcg@10": 0.5}}},
    {"qid": "q3", "type": "a", "text": "same", "values": {"default": {"ndcg@10": 0.3}, "route:bm25": {"ndcg@10": 0.3}}},
    {"qid": "q4", "type": "b", "text": "win", "values": {"default": {"ndcg@10": 0.75}, "route:bm25": {"ndcg@10": None}}},
    {"qid": "q5", "type": "b", "text": "small", "values": {"default": {"ndcg@10": 0.6}, "route:bm25": {"ndcg@10": 0.5}}},
]}


def test_wins_and_losses_are_the_largest_differences():
    got = wins_losses(SECTION, "default", "route:bm25", "ndcg@10", n=5)
    assert [(w["qid"], w["delta"]) for w in got["wins"]] == [("q1", 0.75), ("q5", 0.1)]
    assert [(w["qid"], w["delta"], w["text"]) for w in got["losses"]] == [("q2", -0.5, "two\nlines")]
    assert wins_losses(SECTION, "default", "route:bm25", "ndcg@10", n=1)["wins"][0]["qid"] == "q1"


@pytest.mark.parametrize("ext", [".tsv", ".csv", ".parquet"])
def test_table_round_trips(tmp_path, ext):
    path = write_table(tmp_path / f"pq{ext}", SECTION)
    if ext == ".parquet":
        frame = pl.read_parquet(path)
    else:
        frame = pl.read_csv(path, separator="\t" if ext == ".tsv" else ",",
                            schema_overrides={"default ndcg@10": pl.Float64, "route:bm25 ndcg@10": pl.Float64})
    assert frame.columns == ["qid", "type", "text", "default ndcg@10", "route:bm25 ndcg@10"]
    assert frame["qid"].to_list() == ["q1", "q2", "q3", "q4", "q5"]
    assert frame["text"].to_list()[:2] == ["tab\there", "two\nlines"]  # quoted, not split
    assert frame["route:bm25 ndcg@10"].to_list() == [0.25, 0.5, 0.3, None, 0.5]
    assert frame["default ndcg@10"].to_list() == [1.0, 0.0, 0.3, 0.75, 0.6]


def test_table_format_is_checked(tmp_path):
    with pytest.raises(EvalConfigError, match="parquet"):
        write_table(tmp_path / "pq.xlsx", SECTION)


def test_run_writes_the_per_query_section_and_table(evaluation):
    data, ev, out = evaluation
    s = ev.summary
    pq = s["per_query"]
    assert [r["qid"] for r in pq["rows"]] == ev.qids
    assert pq["labels"][-1] == "default" and "route:bm25" in pq["labels"]
    row = next(r for r in pq["rows"] if r["qid"] == "q1")
    assert row["type"] == "rare-term" and row["text"] == "quokka marsupial Rottnest"
    assert row["values"]["route:bm25"]["ndcg@10"] == 1.0
    assert row["values"]["route:bm25"]["ndcg@10"] == ev.per_query["route:bm25"]["ndcg@10"]["q1"]
    table = pl.read_csv(s["per_query_table"], separator="\t")
    assert table.height == len(ev.qids)
    for r in pq["rows"]:  # the TSV holds the same numbers
        got = table.filter(pl.col("qid") == r["qid"])["fusion:rrf map"].item()
        assert got == pytest.approx(r["values"]["fusion:rrf"]["map"])
    wl = s["wins_losses"]
    assert wl["a"] == "default" and wl["b"] == f"route:{s['comparisons']['significance']['best_route']}"
    for w in wl["wins"]:
        assert w["delta"] > 0 and w["text"] == data.queries[w["qid"]]["text"]


def test_report_shows_wins_and_losses_with_the_query_text():
    from lar_evals.report import render_markdown

    s = {"dataset": "x", "per_query": SECTION, "per_query_table": "runs/per-query.tsv",
         "wins_losses": {"a": "default", "b": "route:bm25", "metric": "ndcg@10",
                         **wins_losses(SECTION, "default", "route:bm25", "ndcg@10")}}
    md = render_markdown([s])
    assert "### Biggest wins and losses: default vs route:bm25" in md
    assert "| 1 | q1 | a | tab\there | 1.0000 | 0.2500 | 0.7500 |" in md
    assert "| 1 | q2 | – | two lines | 0.0000 | 0.5000 | -0.5000 |" in md
    assert "Other fields" not in md  # per_query itself is not dumped
