"""The explain view of late hits: its numbers against the late layer's own details, with the real
all-MiniLM-L6-v2 model on the four prose notes of the demo corpus (datasets/demo/prose)."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import lar
from lar_magics.explain_view import (ExplainView, NoLateEvidenceError, explain_data, explain_view,
                                     heatmap_html, span_html)

PROSE = Path(__file__).resolve().parents[2] / "datasets" / "demo" / "prose"
QUERY = "where should researchers keep the original measurements untouched"
QUERY_TOKENS = ("where", "should", "researchers", "keep", "the", "original", "measurements",
                "untouched")
RANKED = "reciprocal rank fusion timebox"


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain")
    shutil.copytree(PROSE, root / "corpus")
    e = lar.open(root / "corpus", state=root / "state")
    built = e.build(timebox=300, layers=["late"])
    assert built["layers"]["late"]["ok"] == 4, built
    yield e
    e.close()


def late_search(eng, query, weights=None, k=10):
    q = {"text": query} if weights is None else {"text": query, "weights": weights}
    return eng.search({"late": q}, layers=["late"], timebox=10.0, k=k)


def test_row_maxima_are_the_details_similarities(eng):
    res = late_search(eng, QUERY)
    assert len(res.hits) >= 3
    for hit in res.hits[:3]:
        data = explain_data(eng, res, hit.id)
        det = hit.evidence["late"].details
        assert data.query_tokens == QUERY_TOKENS
        assert data.sim.shape == (8, len(data.doc_tokens))
        assert tuple(det["chunk"]) == data.chunk
        np.testing.assert_allclose(data.row_max, [t["sim"] for t in det["tokens"]], atol=1e-5)
        # each row's best document token is the one the layer reported, span and text
        for i, t in enumerate(det["tokens"]):
            j = int(data.argmax[i])
            assert list(data.doc_spans[j]) == t["span"]
            assert data.doc_tokens[j] == t["match"]
        assert data.span == (hit.span.start, hit.span.end)  # the same localisation
        assert data.tokens_table()[0]["q"] == "where"


def test_contributions_sum_to_the_score(eng):
    res = late_search(eng, QUERY)
    hit = res.hits[0]
    ev = hit.evidence["late"]
    data = explain_data(eng, res, hit.id)
    np.testing.assert_allclose(data.contributions, [t["contrib"] for t in ev.details["tokens"]],
                               atol=1e-5)
    assert sum(t["contrib"] for t in ev.details["tokens"]) == pytest.approx(ev.score, abs=1e-4)
    assert data.score == pytest.approx(ev.score, abs=1e-5)
    assert data.hit_score == ev.score and data.rank == 1
    assert ev.details["score_mean"] * float(data.weights.sum()) == pytest.approx(ev.score)
    df = data.to_polars()
    assert df.columns == ["i", "q", "w", "sim", "contrib", "match", "span"]
    assert df["contrib"].sum() == pytest.approx(ev.score, abs=1e-4)
    # the rendered pieces carry the numbers and the text
    assert heatmap_html(data).count("<tr>") == 9  # header + one row per query token
    assert "<mark" in span_html(data)


def test_weight_zero_removes_a_tokens_contribution(eng):
    res = late_search(eng, QUERY)
    before = explain_data(eng, res, res.hits[0].id)
    view = explain_view(eng, res, res.hits[0].id)
    assert isinstance(view, ExplainView) and len(view.sliders) == 8
    assert "lar-explain" in view._dom_classes
    after = view.set_weights({"where": 0})
    assert [s.value for s in view.sliders] == [0.0] + [1.0] * 7
    assert after.chunk == before.chunk and after.hash == before.hash
    assert after.contributions[0] == 0.0
    assert after.rank is not None
    assert after.hit_score == pytest.approx(before.score - before.contributions[0], abs=1e-4)
    # every re-run hit scores as the sum of its tokens' contributions, "where" counting nothing
    scores = []
    for h in view.result.hits:
        toks = h.evidence["late"].details["tokens"]
        assert toks[0]["q"] == "where" and toks[0]["w"] == 0.0 and toks[0]["contrib"] == 0.0
        assert sum(t["contrib"] for t in toks) == pytest.approx(h.evidence["late"].score, abs=1e-4)
        scores.append(h.evidence["late"].score)
    assert scores == sorted(scores, reverse=True)
    # index and token keys work too; all zero is refused with a message, nothing re-run
    view.set_weights({0: 1.0, "measurements": 2.5})
    assert view.data.weights.tolist() == [1, 1, 1, 1, 1, 1, 2.5, 1]
    view.set_weights([0.0] * 8)
    assert "every query token has weight 0" in view.notice.value


def test_boosting_a_token_changes_the_ranking(eng):
    base = late_search(eng, RANKED)
    assert base.hits[0].path == "fusion-rrf-vs-route-unique.md"
    boosted = late_search(eng, RANKED, {"timebox": 3.0})
    assert boosted.hits[0].path == "glossary.md"
    assert "Timebox" in eng.fetch(boosted.hits[0].id).text
    dropped = late_search(eng, RANKED, {"reciprocal": 0, "rank": 0, "fusion": 0})
    assert dropped.hits[0].path == "glossary.md"
    # through the view: the same flip, the explained chunk leaves rank 1
    view = explain_view(eng, base, base.hits[0].id)
    data = view.set_weights({"timebox": 3.0})
    assert view.result.hits[0].path == "glossary.md"
    assert data.rank != 1
    assert data.query_tokens == ("reciprocal", "rank", "fusion", "time", "##box")
    assert data.weights.tolist() == [1, 1, 1, 3, 3]  # a word's weight goes to all its pieces


def test_a_hit_without_late_evidence_says_so(eng):
    res = eng.search({"grep": "Timebox"}, layers=["grep"], timebox=5.0)
    assert res.hits
    with pytest.raises(NoLateEvidenceError, match="no late-interaction evidence"):
        explain_data(eng, res, res.hits[0].id)
    w = explain_view(eng, res, res.hits[0].id)
    assert "no late-interaction evidence" in w.children[0].value and "grep" in w.children[0].value


def test_a_query_explains_its_top_hit(eng):
    data = explain_data(eng, QUERY)
    assert data.rank == 1 and data.query == QUERY
    assert data.path == late_search(eng, QUERY).hits[0].path


def test_layer_rebuilt_underneath_is_noticed_and_refreshed(eng):
    res = late_search(eng, QUERY)
    view = explain_view(eng, res, res.hits[0].id)
    assert view.check() is None
    eng.layers["late"].manifest.forget([view.data.hash])  # as if the layer dropped the unit
    assert "no current vectors" in view.check()
    data = view.set_weights({"where": 1.0})  # a re-run notices, rebuilds and refreshes
    assert "data changed underneath this view" in view.notice.value
    assert view.check() is None and data.path == res.hits[0].path


def test_file_edited_underneath_is_noticed_and_refreshed(eng):
    res = late_search(eng, QUERY)
    view = explain_view(eng, res, res.hits[0].id)
    old_hash = view.data.hash
    path = eng.root / view.data.path
    path.write_text(path.read_text() + "\nResearchers keep the original measurements untouched.\n")
    assert "edited" in view.check() or "changed" in view.check()
    data = view.refresh(view.check())
    assert data.hash != old_hash and data.path == res.hits[0].path
    assert "data changed underneath this view" in view.notice.value
    assert view.check() is None
