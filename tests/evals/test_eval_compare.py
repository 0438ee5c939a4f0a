"""Comparisons (Holm correction, route-unique relevant documents, per-type breakdown) and the
attribution of missed relevant documents."""
from __future__ import annotations

import math

import pytest

from lar_evals.compare import holm


def test_holm_adjusts_known_pvalues():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.4]) == pytest.approx([0.8, 0.8])  # 0.4 x 2 = 0.8, then max(0.8, 0.5)
    assert holm([0.6, float("nan"), None]) == [1.0, 1.0, 1.0]  # capped at 1; NaN / None count as 1
    assert holm([]) == []


def test_significance_family(evaluation):
    """Corrected within each metric: a metric's adjusted p-values are Holm over that metric's
    non-degenerate comparisons only."""
    _, ev, _ = evaluation
    sig = ev.summary["comparisons"]["significance"]
    assert sig["correction"] == "holm" and sig["best_route"] in ev.summary["routes"]
    pairs = {(t["a"], t["b"]) for t in sig["tests"]}
    best = f"route:{sig['best_route']}"
    assert ("fusion:rrf", "fusion:route-unique") in pairs
    assert {("fusion:combsum", best), ("default", best)} <= pairs
    assert len(sig["tests"]) == len(pairs) * 4  # every pair on each of the 4 metrics
    for metric in ev.summary["settings"]["metrics"]:
        rows = [t for t in sig["tests"] if t["metric"] == metric]
        live = [t for t in rows if not t["degenerate"]]
        assert [t["p_adjusted"] for t in live] == pytest.approx(holm([t["p_value"] for t in live]))
        for t in rows:
            assert t["degenerate"] == (t["p_value"] is None)
            assert t["significant"] == (t["p_adjusted"] is not None and t["p_adjusted"] < 0.05)
            assert math.isclose(t["delta"], t["mean_a"] - t["mean_b"], abs_tol=2e-4)
            assert t["ci_low"] <= t["delta"] + 1e-9 and t["delta"] <= t["ci_high"] + 1e-9
            assert t["wins"] + t["losses"] + t["ties"] == ev.summary["n_queries"]


def test_route_unique_relevant(evaluation):
    _, ev, _ = evaluation
    ru = ev.summary["comparisons"]["route_unique_relevant"]
    assert ru["k"] == 10 and ru["relevant_pairs"] == 6
    # q2 "glaciers melting": only bm25 (stemming) finds "The glacier melts ..."
    assert "d3" in ev.top["route:bm25"]["q2"] and "d3" not in ev.top["route:grep"]["q2"]
    assert ru["route_unique"]["bm25"] >= 1
    assert ru["route_unique_total"] == sum(ru["route_unique"].values())
    assert set(ru["recovered_by"]) == {"rrf", "route-unique", "combsum", "combmnz", "default"}
    assert all(0 <= n <= ru["route_unique_total"] for n in ru["recovered_by"].values())
    assert ru["recovered_by"]["rrf"] >= 1  # the lone bm25 find survives fusion at k=10
    assert ru["found_by_any_route"] == 4  # all but d6 (binary) and d8 (no words in common)
    pw = ru["pairwise"]
    routes = list(ru["found_by_route"])
    for a in routes:
        assert pw[a][a] == ru["found_by_route"][a]
        for b in routes:
            assert pw[a][b] == pw[b][a] <= min(ru["found_by_route"][a], ru["found_by_route"][b])
    # recomputed from the per-route lists: pairs found by both bm25 and grep
    both = sum(1 for q, rel in ev.qrels.items() for d in rel
               if d in ev.top["route:bm25"].get(q, ()) and d in ev.top["route:grep"].get(q, ()))
    assert pw["bm25"]["grep"] == both


def test_per_type_breakdown(evaluation):
    _, ev, _ = evaluation
    pt = ev.summary["per_type"]
    assert set(pt["by_type"]) == {"rare-term", "paraphrase"} and pt["untyped_queries"] == 2
    rare = pt["by_type"]["rare-term"]
    assert rare["n_queries"] == 2
    assert set(rare["routes"]) == set(ev.summary["routes"]) and set(rare["fusion"]) == set(ev.summary["fusion"])
    q1, q5 = (ev.per_query["route:bm25"]["ndcg@10"][q] for q in ("q1", "q5"))
    assert rare["routes"]["bm25"]["ndcg@10"] == round((q1 + q5) / 2, 4)


def test_attribution_reasons(evaluation):
    _, ev, _ = evaluation
    att = ev.summary["attribution"]
    assert att["k"] == 10 and att["relevant_pairs"] == 6
    assert att["counts"]["not_in_index"] == 1  # d6 holds NUL bytes: skipped as binary
    assert att["counts"]["below_candidate_window"] == 1  # d8: no route returned it
    assert sum(att["counts"].values()) == att["missed"] == 2
    by_doc = {e["docid"]: e for e in att["examples"]}
    assert by_doc["d6"]["reason"] == "not_in_index" and by_doc["d6"]["qid"] == "q3"
    assert "binary" in by_doc["d6"]["detail"]["why"]
    assert by_doc["d8"]["reason"] == "below_candidate_window"


def test_attribution_layer_coverage_and_ranked_below_k(evaluation):
    """Unit-level: the same evaluation, re-attributed with a building route that built nothing,
    and with a default list that stops before the relevant document."""
    import lar
    from lar_evals.attribution import attribute

    _, ev, _ = evaluation
    eng = lar.open(ev.root, state=ev.summary["settings"]["state_dir"])
    try:
        layer = eng.layers["bm25"]
        built = dict(layer.built())
        layer.built = lambda: {}  # as if nothing had been built yet
        att = attribute(eng, ev, ["bm25"], k=10)
        assert att["counts"]["layer_coverage"] == att["missed"] - att["counts"]["not_in_index"]
        layer.built = lambda: built
        saved = ev.top["default"]["q1"]
        ev.top["default"]["q1"] = []
        try:
            att = attribute(eng, ev, ["bm25", "grep"], k=10)
        finally:
            ev.top["default"]["q1"] = saved
        ex = [e for e in att["examples"] if e["qid"] == "q1"]
        assert ex and ex[0]["reason"] == "ranked_below_k" and ex[0]["detail"]["route_ranks"]["bm25"] == 1
    finally:
        eng.close()
