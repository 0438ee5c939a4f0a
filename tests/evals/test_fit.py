"""Fitting the adaptive fusion model on recorded route lists (lar_evals.fit)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from lar_evals.errors import EvalConfigError
from lar_evals.fit import FitSet, query_data, fit_params, load_set, objective, run_fit

ROUTES = ["grep", "bm25", "names", "trigram"]


def synthetic(n_queries: int = 12, seed: int = 1) -> FitSet:
    """'good' puts the relevant document first, far above its background; 'bad' puts a wrong
    document first, just as far above its own."""
    rng = random.Random(seed)
    lists, qrels = {}, {}
    for i in range(n_queries):
        rel = f"rel{i}"
        docs = [f"q{i}d{j}" for j in range(60)]
        bg = [5.0 - 0.5 * math.log(r) for r in range(2, 62)]
        good = [(rel, 9.0)] + list(zip(docs[:59], bg[:59]))
        wrong = rng.choice(docs[30:])
        bad = [(wrong, 9.5)] + [(d, s) for d, s in zip([rel] + docs[:58], bg) if d != wrong][:59]
        lists[f"q{i}"] = {"good": good, "bad": bad}
        qrels[f"q{i}"] = {rel: 1}
    return FitSet("synthetic-test", qrels, lists, {})


def test_fit_learns_to_ignore_a_misleading_route():
    fs = synthetic()
    routes = ["bad", "good"]
    qs = [query_data(fs.lists[q], routes, fs.qrels[q]) for q in fs.lists]
    equal = np.tile([1.0, 0.0, 0.0], (2, 1))
    assert objective(qs, equal) < 1.0  # equal weights: 'bad' wins the top slot
    params = fit_params(qs, routes)
    assert objective(qs, params) == pytest.approx(1.0)
    w = np.maximum(0, params[:, 0] + params[:, 1] * qs[0].top + params[:, 2] * qs[0].agree)
    assert w[1] > w[0]


def test_run_fit_cross_fits_and_reports(tmp_path):
    fs = synthetic(16)
    model, report = run_fit([fs], folds=2, seed=0)
    s = report["sets"]["synthetic-test"]
    assert s["n_queries"] == 16 and s["best_route"] == "route:good"
    assert s["scores"]["route:good"]["ndcg@10"] == 1.0
    assert s["scores"]["fusion:adaptive"]["ndcg@10"] == pytest.approx(1.0)  # held out, both folds
    assert s["scores"]["fusion:adaptive"]["ndcg@10"] > s["scores"]["fusion:pvalue"]["ndcg@10"]
    assert {t["a"] for t in s["tests"]} == {"fusion:adaptive", "fusion:rrf"}
    assert len(report["fold_models"]) == 2
    assert model.trained_on == ("synthetic-test (16 queries)",)
    qd = query_data(fs.lists["q0"], ["bad", "good"], fs.qrels["q0"])
    w = {r: max(0.0, model.weights_for(r).base + model.weights_for(r).signal * qd.top[j]
                + model.weights_for(r).agree * qd.agree[j]) for j, r in enumerate(["bad", "good"])}
    assert w["good"] > w["bad"]  # the final model trusts the route that is right
    with pytest.raises(EvalConfigError):
        run_fit([fs], folds=1)


def test_fit_on_a_real_harness_run(evaluation, beir_dir):
    _, ev, out = evaluation
    fs = load_set(str(beir_dir), "test", str(out / "result" / "runs"))
    assert set(fs.qrels) <= set(ev.qids) and fs.qrels
    model, report = run_fit([fs], folds=2)
    s = report["sets"][fs.name]
    found = [r for r in ROUTES if any(ev.pools.get(r, {}).values())]
    assert report["routes"] == sorted(found) and "bm25" in found
    for r in found:  # the recorded lists score as the harness's own route lists
        assert s["scores"][f"route:{r}"]["ndcg@10"] == ev.summary["routes"][r]["ndcg@10"]
    assert set(model.routes) <= set(ROUTES)
    assert s["scores"]["fusion:rrf"]["ndcg@10"] is not None
    # bm25 scores its whole index per query: the recorded background is what norm "bgz" reads
    with_bm25 = [q for q in fs.lists if fs.lists[q].get("bm25")]
    assert with_bm25
    for q in with_bm25:
        bg = fs.backgrounds[q]["bm25"]
        assert bg["n"] >= len(fs.lists[q]["bm25"]) and bg["std"] > 0
        assert fs.lists[q]["bm25"][0][1] > bg["mean"]
    _, report = run_fit([fs], folds=2, norms=["bgz"])
    assert report["norm"] == "bgz" and report["model"]["norm"] == "bgz"


def test_bgz_reads_the_recorded_backgrounds():
    fs = synthetic(4)
    fs.backgrounds.update({q: {"good": {"n": 5000, "mean": 1.0, "std": 2.0}} for q in fs.lists})
    qd = query_data(fs.lists["q0"], ["bad", "good"], fs.qrels["q0"], "bgz", fs.backgrounds["q0"])
    rel = qd.docs.index("rel0")
    assert qd.ev[rel, 1] == pytest.approx((9.0 - 1.0) / 2.0)  # good's top, read against its background
    tz = query_data(fs.lists["q0"], ["bad", "good"], fs.qrels["q0"], "tailz")
    assert np.allclose(qd.ev[:, 0], tz.ev[:, 0])  # 'bad' has none: the tailz scale


@pytest.mark.parametrize("method", ["listwise", "ascent"])
def test_fit_picks_the_normalisation_that_fits_its_training_queries(method):
    from lar_evals.fit import best_fit
    from lar_evals.fit_listwise import fit_listwise

    fitter = (lambda qs, routes: fit_params(qs, routes)) if method == "ascent" else fit_listwise

    fs = synthetic(12)
    routes = ["bad", "good"]
    by_norm = {n: [query_data(fs.lists[q], routes, fs.qrels[q], n) for q in fs.lists]
               for n in ("minmax", "evidence", "zscore")}
    # equal weights on the evidence scale: 'bad''s top (9.5 on a 5.0 background) beats 'good''s 9.0
    assert objective(by_norm["evidence"], np.tile([1.0, 0.0, 0.0], (2, 1))) < 1.0
    norm, params, tried = best_fit(by_norm, routes, method=method, select="train")
    assert tried == {n: pytest.approx(objective(by_norm[n], fitter(by_norm[n], routes))) for n in by_norm}
    assert tried[norm] == max(tried.values()) == pytest.approx(1.0)
    assert norm == next(n for n in by_norm if tried[n] == max(tried.values()))  # ties: first listed
    assert np.array_equal(params, np.round(fitter(by_norm[norm], routes), 4))
    model, report = run_fit([fs], folds=2, norms=("zscore", "minmax"), method=method, select="train")
    assert report["method"] == method
    assert model.info["fit"].startswith({"listwise": "listwise softmax", "ascent": "coordinate ascent"}[method])
    assert model.norm == report["norm"] == max(report["norms_tried"], key=lambda n: (report["norms_tried"][n], n == "zscore"))
    assert all(m["norm"] in ("zscore", "minmax") for m in report["fold_models"])
    with pytest.raises(EvalConfigError, match="norms must be some of"):
        run_fit([fs], norms=("l2",))


def test_min_gain_keeps_equal_weights_unless_a_move_pays():
    fs = synthetic(12)
    routes = ["bad", "good"]
    qs = [query_data(fs.lists[q], routes, fs.qrels[q]) for q in fs.lists]
    equal = np.tile([1.0, 0.0, 0.0], (2, 1))
    start = objective(qs, equal)
    # trusting 'good' gains 1 - start; a threshold above that keeps equal weights
    assert np.array_equal(fit_params(qs, routes, min_gain=1.0 - start + 0.01), equal)
    assert objective(qs, fit_params(qs, routes, min_gain=0.0)) == pytest.approx(1.0)
    assert objective(qs, fit_params(qs, routes, min_gain=(1.0 - start) / 4)) > start
    with pytest.raises(EvalConfigError, match="min_gain"):
        run_fit([fs], min_gain=-0.1)
    _, report = run_fit([fs], min_gain=0.0, method="ascent")
    assert report["min_gain"] == 0.0 and "l2" not in report


def test_load_set_joins_the_routes_of_several_runs(evaluation, beir_dir, tmp_path):
    import gzip
    import json

    _, ev, out = evaluation
    src = out / "result" / "runs" / "route-lists.jsonl.gz"
    rows = [json.loads(line) for line in gzip.open(src, "rt", encoding="utf-8")]
    assert len(rows) >= 2
    whole = load_set(str(beir_dir), "test", str(src.parent))

    def write(folder, keep, rows):
        folder.mkdir()
        with gzip.open(folder / "route-lists.jsonl.gz", "wt", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps({"qid": r["qid"],
                                     "routes": {k: v for k, v in r["routes"].items() if k in keep},
                                     "backgrounds": {k: v for k, v in r["backgrounds"].items() if k in keep}}) + "\n")

    write(tmp_path / "a", {"bm25"}, rows)
    write(tmp_path / "b", {"grep", "names", "trigram"}, rows[1:])  # one query fewer
    joined = load_set(str(beir_dir), "test", f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert set(joined.qrels) == set(whole.qrels) - {rows[0]["qid"]}
    for q in joined.qrels:
        assert joined.lists[q] == whole.lists[q]
        assert joined.backgrounds[q] == whole.backgrounds[q]
    write(tmp_path / "c", {"bm25", "names"}, rows)  # the same bm25 lists twice: accepted
    again = load_set(str(beir_dir), "test", f"{tmp_path / 'a'},{tmp_path / 'c'}")
    assert again.lists == {q: {r: v for r, v in whole.lists[q].items() if r in ("bm25", "names")}
                           for q in whole.qrels}
    changed = [dict(r, routes={k: [[d, (s or 0) + 1] for d, s in v] for k, v in r["routes"].items()})
               for r in rows]
    write(tmp_path / "d", {"bm25"}, changed)
    with pytest.raises(EvalConfigError, match="route 'bm25' is in both .* with different lists"):
        load_set(str(beir_dir), "test", f"{tmp_path / 'a'},{tmp_path / 'd'}")
    with pytest.raises(EvalConfigError, match="is missing"):
        load_set(str(beir_dir), "test", f"{tmp_path / 'a'},{tmp_path / 'nowhere'}")


def test_fit_starts_from_the_best_route_alone_when_equal_weights_are_stuck():
    """Five noisy routes, each listing 40 of 80 documents at random: with equal weights their
    wrong documents pile up above the relevant one, and no single step away from equal weights
    fixes that. The second start (the best route alone) finds the good route's ranking."""
    from lar_evals.fit_ascent import _ascend

    rng = random.Random(0)
    routes = ["good"] + [f"noise{i}" for i in range(5)]
    qs = []
    for i in range(30):
        rel, docs = f"rel{i}", [f"q{i}d{j}" for j in range(80)]
        lists = {"good": [(d, 10 - 0.1 * k) for k, d in enumerate([rel] + docs[:40])]}
        for b in range(5):
            mixed = docs[:]
            rng.shuffle(mixed)
            lists[f"noise{b}"] = [(d, 10 - 0.1 * k + rng.random()) for k, d in enumerate(mixed[:40])]
        qs.append(query_data(lists, routes, {rel: 1}, "zscore"))
    equal = np.tile([1.0, 0.0, 0.0], (len(routes), 1))
    _, got = _ascend(qs, equal, 3, 0.005)
    assert got < 0.5  # equal weights, and the ascent from them, rank noise first
    params = fit_params(qs, routes)
    assert objective(qs, params) == pytest.approx(1.0)
    weights = np.maximum(0, params[:, 0])
    assert weights[0] > 0 and not weights[1:].any()


def test_the_batched_objective_equals_the_per_query_ndcg_including_ties():
    """QueryBatch ranks by counting, not sorting: it must give the stable sort's nDCG@10,
    ties broken by listing order, the RRF fallback when no route has weight, and 0 for a query
    whose relevant document no route listed."""
    from lar_evals.fit_data import QueryBatch, _ndcg10, query_scores as _scores

    rng = random.Random(3)
    routes = ["a", "b", "c"]
    qs = []
    for i in range(25):
        docs = [f"q{i}d{j}" for j in range(rng.randint(5, 60))]
        lists = {r: [(d, float(rng.randint(0, 12))) for d in rng.sample(docs, min(len(docs), 30))]
                 for r in routes if rng.random() < 0.9}
        lists = {r: sorted(v, key=lambda x: -x[1]) for r, v in lists.items()} or {"a": [(docs[0], 1.0)]}
        rel = {rng.choice(docs): rng.choice([1, 2])} if i % 5 else {"never-listed": 1}
        qs.append(query_data(lists, routes, rel, "minmax"))
    batch = QueryBatch(qs)
    grid = [np.zeros((3, 3)), np.tile([1.0, 0.0, 0.0], (3, 1)),
            np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.0, -1.0]]),
            np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])]  # 'a' alone: many exact ties
    for params in grid:
        expected = [_ndcg10(q, _scores(q, params)) for q in qs]
        assert batch.ndcg(params) == pytest.approx(expected)
        assert objective(qs, params) == pytest.approx(float(np.mean(expected)))
    assert objective(batch, grid[0]) == objective(qs, grid[0])
    assert 0.0 < objective(qs, grid[1]) < 1.0
    assert sum(q.usable.all() for q in qs) > 10  # most queries are fused, not left to RRF
    assert all(batch.ndcg(grid[1])[i] == 0.0 for i in range(0, 25, 5))  # relevant doc never listed


def test_listwise_fit_trusts_the_right_route_and_leaves_silent_routes_at_equal_weight():
    from lar_evals.fit_listwise import fit_listwise

    fs = synthetic(12)
    routes = ["bad", "good", "silent"]  # 'silent' lists nothing for any query
    qs = [query_data(fs.lists[q], routes, fs.qrels[q], "evidence") for q in fs.lists]
    assert objective(qs, np.tile([1.0, 0.0, 0.0], (3, 1))) < 1.0
    params = fit_listwise(qs, routes)
    assert objective(qs, params) == pytest.approx(1.0)
    assert params[1, 0] > params[0, 0]
    assert params[2].tolist() == [1.0, 0.0, 0.0]  # no data: the pull keeps equal weight
    strong = fit_listwise(qs, routes, l2=1e4)  # a pull this strong leaves the weights where they start
    assert np.allclose(strong, np.tile([1.0, 0.0, 0.0], (3, 1)), atol=1e-3)
    assert np.array_equal(fit_listwise(qs, routes), params)  # deterministic
    with pytest.raises(EvalConfigError, match="l2 must be"):
        fit_listwise(qs, routes, l2=-1.0)
    with pytest.raises(EvalConfigError, match="3 routes, 2 route names"):
        fit_listwise(qs, routes[:2])
    with pytest.raises(EvalConfigError, match="method must be one of"):
        run_fit([fs], method="newton")
    with pytest.raises(EvalConfigError, match="l2 must be"):
        run_fit([fs], l2=float("nan"))


def test_listwise_fit_learns_a_query_adaptive_weight():
    """'sharp' is right exactly when its top hit stands far out (a strong top evidence) and
    wrong otherwise; 'steady' is right on every query but lists its relevant document second.
    The fit must learn to follow 'sharp' only when its top is strong: a positive ``signal``."""
    from lar_evals.fit_listwise import fit_listwise

    rng = random.Random(7)
    routes = ["sharp", "steady"]
    qs = []
    for i in range(40):
        rel, docs = f"rel{i}", [f"q{i}d{j}" for j in range(60)]
        bg = [5.0 - 0.5 * math.log(r) for r in range(2, 62)]
        strong = i % 2 == 0
        first = rel if strong else rng.choice(docs[20:])
        sharp = [(first, 12.0 if strong else 5.2)] + [(d, s) for d, s in zip(docs, bg) if d != first][:59]
        steady = [(docs[0], 9.0), (rel, 8.9)] + list(zip(docs[1:59], bg))
        qs.append(query_data({"sharp": sharp, "steady": steady}, routes, {rel: 1}, "zscore"))
    tops = np.array([q.top[0] for q in qs])
    assert tops[::2].min() > tops[1::2].max()  # the probe separates the two kinds of query
    params = fit_listwise(qs, routes)
    assert params[0, 1] > 0  # sharp's weight rises with its top evidence
    static = np.array([[params[0, 0], 0.0, 0.0], params[1]])
    assert objective(qs, params) > objective(qs, static)


def test_inner_selection_scores_each_norm_held_out_on_alternate_queries():
    """With select="inner" each norm is scored by fitting on alternate queries and ranking the
    others (both ways), and the kept norm is the best of those held-out scores; the final weights
    are then fitted on all queries with that norm."""
    from lar_evals.fit import best_fit

    fs = synthetic(16)
    routes = ["bad", "good"]
    honest = [query_data(fs.lists[q], routes, fs.qrels[q], "zscore") for q in sorted(fs.lists)]
    by_norm = {"zscore": honest, "minmax": [query_data(fs.lists[q], routes, fs.qrels[q], "minmax")
                                             for q in sorted(fs.lists)]}
    norm, params, tried = best_fit(by_norm, routes, select="inner")  # listwise
    assert set(tried) == {"zscore", "minmax"}
    # each norm's score is its held-out nDCG@10 over both inner halves
    from lar_evals.fit_data import QueryBatch
    from lar_evals.fit_listwise import fit_listwise

    for n, qs in by_norm.items():
        a, b = qs[0::2], qs[1::2]
        expected = np.concatenate([QueryBatch(a).ndcg(fit_listwise(b, routes)),
                                   QueryBatch(b).ndcg(fit_listwise(a, routes))]).mean()
        assert tried[n] == pytest.approx(expected)
    assert tried[norm] == max(tried.values())
    assert np.array_equal(params, np.round(fit_listwise(by_norm[norm], routes), 4))
    _, report = run_fit([fs], norms=("zscore", "minmax"), select="inner")
    assert report["norm_select"] == "inner"
    _, report = run_fit([fs], norms=("zscore",))
    assert report["norm_select"] == "only one"
    with pytest.raises(EvalConfigError, match="select must be one of"):
        run_fit([fs], select="oracle")


def test_run_fit_reports_progress_per_step():
    calls = []
    run_fit([synthetic(8)], folds=2, seed=0, progress=lambda done, total: calls.append((done, total)))
    # two folds, the final fit, one set scored
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_fit_command_shows_a_progress_bar():
    import io

    from lar_evals.progress import Bars

    err = io.StringIO()
    bars = Bars(stream=err)
    run_fit([synthetic(8)], folds=2, progress=bars.fit)
    bars.close()
    assert "fit: 100%" in err.getvalue() and "4/4" in err.getvalue()
    plain = io.StringIO()
    lines = Bars(stream=plain, plain=True)
    run_fit([synthetic(8)], folds=3, progress=lines.fit)
    assert plain.getvalue().splitlines() == [f"evals: fit {i}/5 steps" for i in range(1, 6)]
