"""One evaluation run over the tiny BEIR folder: the summary's schema and values, TREC files,
offline fusion against the engine's own, the anytime curve, and input errors."""
from __future__ import annotations

import pytest

import lar
from lar_evals import load_beir, run_beir
from lar_evals.errors import EvalConfigError
from lar_evals.metrics import read_trec
from lar.core.errors import UnknownLayerError

ROUTES = ["grep", "bm25", "names", "trigram"]
METRICS = ["ndcg@10", "recall@100", "mrr@10", "map"]


def test_summary_schema(evaluation):
    data, ev, out = evaluation
    s = ev.summary
    for key in ("schema", "dataset", "split", "n_queries", "settings", "routes", "fusion", "default",
                "timing", "coverage", "run_states", "data_report", "comparisons", "attribution",
                "per_type", "anytime", "runs_dir"):
        assert key in s, key
    assert s["schema"] == 2 and s["dataset"] == "tiny" and s["split"] == "test"
    assert s["n_queries"] == 5
    assert s["settings"]["routes"] == sorted(ROUTES)  # engine order
    assert set(s["routes"]) == set(ROUTES)
    assert list(s["fusion"]) == ["rrf", "route-unique", "combsum", "combmnz"]
    for vals in [*s["routes"].values(), *s["fusion"].values(), s["default"]]:
        assert list(vals) == METRICS
        assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in vals.values())
    assert set(s["timing"]["build_s"]) == {"bm25", "trigram"}
    assert all(isinstance(v, float) for v in s["timing"]["build_s"].values())
    for label in [*ROUTES, "rrf", "route-unique", "combsum", "combmnz", "default"]:
        t = s["timing"]["query_ms"][label]
        assert t["mean"] > 0 and t["p95"] >= 0
    assert s["coverage"] == {r: 1.0 for r in sorted(ROUTES)}
    assert s["data_report"]["qrels_docs_missing_from_corpus"] == 1
    assert s["run_states"]["routes"]["bm25"]["ran"] == 5
    assert (out / "result" / "summary.json").is_file()


def test_unique_words_give_perfect_bm25_ndcg(evaluation):
    _, ev, _ = evaluation
    assert ev.per_query["route:bm25"]["ndcg@10"]["q1"] == 1.0
    assert ev.rankings["route:bm25"]["q1"][0] == "d2"
    assert ev.per_query["default"]["ndcg@10"]["q1"] == 1.0
    assert ev.per_query["route:bm25"]["ndcg@10"]["q4"] == 0.0  # nobody finds d8


def test_trec_run_files(evaluation):
    _, ev, out = evaluation
    runs = out / "result" / "runs"
    names = sorted(p.name for p in runs.iterdir())
    assert names == sorted([f"route-{r}.trec" for r in ROUTES]
                           + [f"fusion-{p}.trec" for p in ["rrf", "route-unique", "combsum", "combmnz"]]
                           + ["default.trec", "route-lists.jsonl.gz"])
    import gzip
    import json

    rows = [json.loads(line) for line in gzip.open(runs / "route-lists.jsonl.gz", "rt")]
    assert [r["qid"] for r in rows] == ev.qids
    for row in rows:
        for route in ROUTES:
            got = row["routes"].get(route, [])
            # the whole list, documents in the route's order, each with the layer's own score
            assert [d for d, _ in got] == ev.pools[f"{route}"].get(row["qid"], [])
            assert all(s is None or isinstance(s, float) for _, s in got)
    bm25 = [s for row in rows for _, s in row["routes"].get("bm25", [])]
    assert bm25 and all(s > 0 for s in bm25)
    lines = (runs / "route-bm25.trec").read_text().splitlines()
    assert lines
    prev = {}
    for line in lines:
        qid, q0, doc, rank, score, tag = line.split(" ")
        assert q0 == "Q0" and tag == "lar-route-bm25" and doc in ev.path_to_doc.values()
        assert int(rank) == prev.get(qid, 0) + 1  # ranks count from 1, no gaps
        prev[qid] = int(rank)
        float(score)
    assert read_trec(runs / "route-bm25.trec") == {q: d for q, d in ev.rankings["route:bm25"].items() if d}


def test_offline_rrf_equals_engine_rrf(evaluation):
    data, ev, _ = evaluation
    eng = lar.open(ev.root, state=ev.summary["settings"]["state_dir"])
    try:
        compared = 0
        for qid in ev.qids:
            res = eng.search(data.queries[qid]["text"], layers=ROUTES, k=20, timebox=5, fusion="rrf")
            docs = list(dict.fromkeys(ev.path_to_doc[p] for h in res.hits for p in h.paths))
            assert docs == ev.rankings["fusion:rrf"][qid], qid
            compared += bool(docs)
        assert compared >= 3
    finally:
        eng.close()


def test_anytime_curve_has_one_row_per_timebox(evaluation):
    _, ev, _ = evaluation
    rows = ev.summary["anytime"]
    assert [r["timebox_s"] for r in rows] == [0.05, 1.0]
    for r in rows:
        assert set(METRICS) <= set(r) and r["mean_ms"] > 0 and r["p95_ms"] > 0
        assert isinstance(r["aborted_runs"], int)
        assert set(r["mean_coverage"]) <= set(ROUTES)
    assert rows[1]["ndcg@10"] == ev.summary["default"]["ndcg@10"]


def test_anytime_curve_directly(evaluation):
    from lar_evals.anytime import anytime_curve

    data, ev, _ = evaluation
    eng = lar.open(ev.root, state=ev.summary["settings"]["state_dir"])
    try:
        rows = anytime_curve(eng, data, timeboxes=(0.1, "500ms"), routes=["grep", "bm25"], k=20)
    finally:
        eng.close()
    assert [r["timebox_s"] for r in rows] == [0.1, 0.5]
    assert rows[1]["ndcg@10"] > 0.5  # file paths read back from the engine's folder


def test_stage_curves_are_cumulative_by_cost_and_match_the_plain_curve(evaluation):
    from lar_evals.anytime import anytime_curve, stage_curves, stages_of

    data, ev, _ = evaluation
    eng = lar.open(ev.root, state=ev.summary["settings"]["state_dir"])
    try:
        stages = stages_of(eng, ["bm25", "grep", "names", "trigram"])
        assert stages == [("lexical", ["bm25", "grep", "names", "trigram"])]
        full = stages_of(eng, ["late", "grep", "static", "dense"])
        assert full == [("lexical", ["grep"]), ("+static", ["grep", "static"]),
                        ("+dense", ["grep", "static", "dense"]), ("+late", ["grep", "static", "dense", "late"])]
        rows = stage_curves(eng, data, timeboxes=[2.0], routes=["grep", "bm25"], k=20)
        plain = anytime_curve(eng, data, timeboxes=[2.0], routes=["grep", "bm25"], k=20)
        with pytest.raises(EvalConfigError, match="unknown layers"):
            stages_of(eng, ["nope"])
    finally:
        eng.close()
    assert [(r["stage"], r["layers"]) for r in rows] == [("lexical", ["grep", "bm25"])]
    assert rows[0]["ndcg@10"] == pytest.approx(plain[0]["ndcg@10"])  # grep + bm25: deterministic


def test_anytime_curve_on_a_sample_of_the_queries(beir_dir, tmp_path):
    import random

    from lar_evals import evaluate_beir

    data = load_beir(beir_dir, "test")
    ev = evaluate_beir(data, routes=["grep"], fusion=["rrf"], timebox=2.0, k=20,
                       cache_root=tmp_path, anytime=[2.0], anytime_queries=2, seed=3)
    s = ev.summary
    assert s["n_queries"] > 2 and s["settings"]["anytime_queries"] == 2
    sample = set(random.Random(3).sample(ev.qids, 2))
    per_q = ev.per_query["default"]["ndcg@10"]
    expected = sum(per_q[q] for q in sample) / 2  # grep is deterministic: same lists again
    assert s["anytime"][0]["ndcg@10"] == pytest.approx(expected, abs=1e-4)
    with pytest.raises(EvalConfigError, match="anytime_queries"):
        evaluate_beir(data, routes=["grep"], cache_root=tmp_path, anytime=[1.0], anytime_queries=0)


def test_unknown_route_lists_the_valid_names(beir_dir, tmp_path):
    data = load_beir(beir_dir, "test")
    with pytest.raises(UnknownLayerError) as err:
        run_beir(data, routes=["bm25", "bm52"], cache_root=tmp_path)
    assert "unknown layer 'bm52'" in str(err.value)
    assert all(name in str(err.value) for name in ("bm25", "grep", "names", "trigram"))


def test_unknown_metric_lists_the_valid_names(beir_dir, tmp_path):
    data = load_beir(beir_dir, "test")
    with pytest.raises(EvalConfigError) as err:
        run_beir(data, routes=["grep"], metrics=["ndcg@10", "ndgc@10"], cache_root=tmp_path)
    msg = str(err.value)
    assert "unknown metric 'ndgc@10'" in msg and "ndcg" in msg and "recall" in msg and "mrr" in msg
    with pytest.raises(EvalConfigError, match="valid policies: route-unique, rrf, combsum, combmnz"):
        run_beir(data, routes=["grep"], fusion=["rrf", "borda"], cache_root=tmp_path)


def test_a_refine_route_records_what_it_scored_in_the_default_search(beir_dir, tmp_path):
    from lar_evals import evaluate_beir

    data = load_beir(beir_dir, "test")
    ev = evaluate_beir(data, routes=["bm25", "fuzzy"], fusion=["rrf"], timebox=5.0, k=20,
                       cache_root=tmp_path)
    n = ev.summary["n_queries"]
    # alone, fuzzy has no pool to rescore ...
    assert ev.summary["run_states"]["routes"]["fuzzy"] == {"skipped": n}
    assert all(not ev.pools["fuzzy"][q] for q in ev.qids)
    # ... so its recorded list is what it scored among the default search's hits
    with_fuzzy = [q for q in ev.qids if ev.scored[q].get("fuzzy")]
    assert with_fuzzy
    for q in with_fuzzy:
        docs = [d for d, _ in ev.scored[q]["fuzzy"]]
        assert set(docs) <= set(ev.rankings["default"][q])
        assert all(isinstance(s, float) for _, s in ev.scored[q]["fuzzy"])
        assert set(docs) <= set(ev.pools["bm25"][q])  # the generate route supplied the pool


def test_trec_files_carry_each_lists_own_scores(evaluation):
    """route files: the layer's own score of the document's best hit; policy files: the fused
    score (RRF: sum of 1 / (c + rank) over the routes); both read back exactly."""
    from lar_evals.metrics import read_trec_scores

    _, ev, out = evaluation
    runs = out / "result" / "runs"
    bm25 = read_trec_scores(runs / "route-bm25.trec")
    assert bm25 and bm25 == {q: s for q, s in ev.scores["route:bm25"].items() if s}
    rows = [__import__("json").loads(x) for x in __import__("gzip").open(runs / "route-lists.jsonl.gz", "rt")]
    for row in rows:  # the same numbers the route lists hold (those rounded to 6 digits)
        for doc, score in row["routes"].get("bm25", [])[:20]:
            assert bm25[row["qid"]][doc] == pytest.approx(score, abs=1e-6)
    assert len({s for q in bm25.values() for s in q.values()}) > 3  # not n - position
    rrf = read_trec_scores(runs / "fusion-rrf.trec")
    files = ev.summary["run_files"]
    assert files["fusion:rrf"]["scores"] == "own" and files["route:bm25"]["scores"] == "own"
    c = ev.summary["settings"]["rrf_c"]
    some = 0
    for qid, docs in rrf.items():
        for doc, score in docs.items():
            ranks = [row["routes"] for row in rows if row["qid"] == qid][0]
            expect = 0.0
            for route, lst in ranks.items():
                pos = [d for d, _ in lst[:100]]
                if doc in pos:
                    expect += 1.0 / (c + pos.index(doc) + 1)
            assert score == pytest.approx(expect, rel=1e-9), (qid, doc)
            some += 1
    assert some >= 3


def test_write_trec_round_trips_scores_and_falls_back_to_ranks(tmp_path):
    from lar_evals.metrics import read_trec, read_trec_scores, write_trec

    ranking = {"q1": ["a", "b", "c"], "q2": ["x", "y"], "q3": []}
    scores = {"q1": {"a": 12.345678901234567, "b": 0.1 + 0.2, "c": 0.3}, "q2": {"x": 1.0, "y": None}}
    got = write_trec(tmp_path / "r.trec", ranking, "t", ["q1", "q2", "q3"], scores)
    assert got == {"lines": 5, "queries": 2, "own_scores": 1, "rank_scores": 1, "tied": 0,
                   "unordered": 0, "scores": "mixed"}
    back = read_trec_scores(tmp_path / "r.trec")
    assert back["q1"] == {"a": 12.345678901234567, "b": 0.30000000000000004, "c": 0.3}  # exact
    assert back["q2"] == {"x": 2.0, "y": 1.0}  # a missing score: rank-derived for the query
    assert read_trec(tmp_path / "r.trec") == {"q1": ["a", "b", "c"], "q2": ["x", "y"]}
    tied = write_trec(tmp_path / "t.trec", {"q": ["a", "b", "c"]}, "t", ["q"],
                      {"q": {"a": 2.0, "b": 2.0, "c": 3.0}})
    assert (tied["tied"], tied["unordered"], tied["scores"]) == (1, 1, "own")
    import ranx

    run = ranx.Run.from_file(str(tmp_path / "r.trec"), kind="trec")  # readable by ranx
    assert run["q1"]["a"] == pytest.approx(12.345678901234567)
