"""Published anchors (bm25s, tantivy) on the same documents and queries, beside lar's routes."""
from __future__ import annotations

import pytest

from lar_evals.anchors import check_anchors, run_anchors
from lar_evals.errors import EvalConfigError

CORPUS = {"d1": {"title": "Volcanoes", "text": "Basaltic lava flows from shield volcanoes."},
          "d2": {"title": "Quokka", "text": "The quokka is a small marsupial on Rottnest Island."},
          "d3": {"title": "Ice", "text": "The glacier melts quickly during warm summers."}}
QUERIES = {"q1": "quokka marsupial", "q2": "glaciers melting", "q3": "(lava) AND: flows?"}
QRELS = {"q1": {"d2": 1}, "q2": {"d3": 1}, "q3": {"d1": 1}}


@pytest.mark.parametrize("name", ["bm25s", "tantivy"])
def test_anchor_finds_the_unique_words(name):
    got = run_anchors(CORPUS, QUERIES, QRELS, [name], ["ndcg@10", "recall@10"], k=10)[name]
    assert got["rankings"]["q1"][0] == "d2"
    assert got["rankings"]["q2"][0] == "d3"  # stemmed: glaciers / glacier, melting / melts
    assert got["rankings"]["q3"][0] == "d1"  # query syntax characters are not parsed
    assert got["metrics"] == {"ndcg@10": 1.0, "recall@10": 1.0}
    scores = list(got["scores"]["q1"].values())
    assert scores == sorted(scores, reverse=True) and scores[0] > 0  # the engine's own scores


def test_unknown_and_missing_anchors():
    with pytest.raises(EvalConfigError, match="bm25s, tantivy, pyserini"):
        check_anchors("lucene")
    got = run_anchors(CORPUS, QUERIES, QRELS, ["pyserini"], ["ndcg@10"])
    assert "skipped" in got["pyserini"]


def test_beir_run_puts_anchors_beside_the_routes(beir_dir, tmp_path):
    from lar_evals import evaluate_beir, load_beir
    from lar_evals.metrics import read_trec_scores
    from lar_evals.report import render_markdown

    ev = evaluate_beir(load_beir(beir_dir, "test"), routes=["bm25"], fusion=["rrf"], k=10,
                       timebox=2.0, cache_root=tmp_path / "c", out_dir=tmp_path / "o",
                       anchors=["bm25s", "tantivy"], comparisons=["bm25/anchor:bm25s"])
    s = ev.summary
    assert set(s["anchors"]) == {"bm25s", "tantivy"}
    assert s["anchors"]["bm25s"]["metrics"]["ndcg@10"] == pytest.approx(
        sum(ev.per_query["anchor:bm25s"]["ndcg@10"].values()) / s["n_queries"], abs=1e-4)
    assert [(t["a"], t["b"]) for t in s["comparisons"]["significance"]["tests"]][0] == \
        ("route:bm25", "anchor:bm25s")
    assert "anchor:tantivy" in s["per_query"]["labels"]
    trec = read_trec_scores(tmp_path / "o" / "runs" / "anchor-bm25s.trec")
    assert trec and all(v > 0 for q in trec.values() for v in q.values())
    md = render_markdown([s])
    assert "| anchor | bm25s |" in md and "### Published anchors" in md
