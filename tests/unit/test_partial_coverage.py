"""A missing, partial or weak layer contributes less, never something wrong: hand-built lists
with known answers for routes that covered part of the units (cut short or partly built)."""
from __future__ import annotations

import math
import random

from lar.core.types import LayerRun, RunState
from lar.fusion.adaptive import adaptive_fusion, partial_factors
from lar.fusion.coverage import coverage_factors, coverages, run_coverages, weighted_rrf_scores
from lar.fusion.model import FusionModel, RouteWeights, load_model
from lar.fusion.table import collect

N_DOCS = 400


def ndcg10(ranking, relevant):
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking[:10]) if d in relevant)
    return dcg / sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))


def scores(rng, relevant, quality):
    return {f"d{i}": rng.gauss(0.0, 1.0) + (quality if f"d{i}" in relevant else 0.0) for i in range(N_DOCS)}


def listed(scored, n=100, built=None):
    """The best-first top ``n`` of ``scored``, over the ``built`` units only (None: all)."""
    items = [(d, s) for d, s in scored.items() if built is None or d in built]
    return sorted(items, key=lambda kv: -kv[1])[:n]


def built_share(rng, share):
    return {f"d{i}" for i in range(N_DOCS) if rng.random() < share}


def fused(runs, model, **kw):
    return [it.key for it in adaptive_fusion(runs, k=10, model=model, **kw)[0]]


def queries(seed, n=60):
    rng = random.Random(seed)
    for _ in range(n):
        yield rng, set(rng.sample([f"d{i}" for i in range(N_DOCS)], 4))


def mean(xs):
    return sum(xs) / len(xs)


def test_a_partial_route_over_a_fifth_of_the_units_never_ranks_below_the_complete_route():
    # a complete strong route and a heavy route built for 20 % of the units, either noise or
    # informative: the default is never below the complete route alone
    model = FusionModel({"bm25": RouteWeights(1.0), "dense": RouteWeights(4.0)}, norm="zscore")
    for quality in (0.0, 3.0):
        alone, got = [], []
        for rng, rel in queries(7):
            bm25 = listed(scores(rng, rel, 3.0))
            dense = listed(scores(rng, rel, quality), built=built_share(rng, 0.2))
            alone.append(ndcg10([d for d, _ in bm25], rel))
            got.append(ndcg10(fused({"bm25": bm25, "dense": dense}, model, partial={"dense": 0.2}), rel))
        assert mean(got) >= mean(alone) - 0.005, quality


def test_with_no_complete_route_the_most_covered_route_leads():
    # the first minutes on a fresh folder: grep's scan cut at 40 %, bm25 built for 5 % of the
    # units, derived (noise) for 3 %; no complete route. Two of derived's few units stand out
    # in its own short list (irrelevant ones); weighted by coverage it cannot outvote grep
    model = FusionModel({"grep": RouteWeights(1.0), "bm25": RouteWeights(1.0), "derived": RouteWeights(1.0)},
                        norm="zscore")
    cov = {"grep": 0.4, "bm25": 0.05, "derived": 0.03}
    grep_alone, got, names_only = [], [], []
    for rng, rel in queries(8):
        derived = listed(scores(rng, rel, 0.0), built=built_share(rng, cov["derived"]))
        derived = sorted([(d, s + 4.0) for d, s in derived[:2]] + derived[2:], key=lambda kv: -kv[1])
        runs = {"grep": listed(scores(rng, rel, 3.0), built=built_share(rng, cov["grep"])),
                "bm25": listed(scores(rng, rel, 3.0), built=built_share(rng, cov["bm25"])),
                "derived": derived}
        grep_alone.append(ndcg10([d for d, _ in runs["grep"]], rel))
        got.append(ndcg10(fused(runs, model, partial=cov), rel))
        names_only.append(ndcg10(fused(runs, model, partial=list(cov)), rel))
    assert mean(got) >= mean(grep_alone) - 0.005
    assert mean(names_only) < mean(grep_alone) - 0.02  # coverage unknown: derived's units take slots


def test_the_factor_is_the_coverage_squared_alone_and_the_overlap_with_complete_routes():
    lists = {"bm25": [(f"d{i}", 10.0 - i) for i in range(10)],
             "late": [("d0", 1.0), ("d1", 0.5), ("x", 0.2)]}
    assert coverage_factors(lists, {"late": 0.1}, depth=10) == {"late": 0.2}  # 2 of bm25's 10
    assert coverage_factors(lists, {"late": 0.9}, depth=10) == {"late": 0.81}  # never below c ** 2
    assert coverage_factors(lists, ["late"], depth=10) == {"late": 0.2}
    assert coverage_factors(lists, {"bm25": 0.5, "late": 0.2}, depth=10) == {"bm25": 0.25, "late": 0.2 * 0.2}
    assert coverage_factors(lists, ["bm25", "late"], depth=10) == {"bm25": 1.0, "late": 1.0}
    assert partial_factors(lists, {"late": 0.1}) == {"late": 0.2}
    assert coverages({"a": 1.5, "b": None}) == {"a": 1.0, "b": None}


def test_short_partial_lists_fall_back_to_rrf_counted_by_coverage():
    # lists too short for a background fit: RRF, each partial list counted by its factor
    runs = {"grep": [("g1", 3.0), ("g2", 2.0)], "bm25": [("b1", 9.0), ("b2", 8.0)]}
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    assert fused(runs, model, partial={"grep": 0.6, "bm25": 0.1}) == ["g1", "g2", "b1", "b2"]
    assert fused(runs, model, partial={"grep": 0.1, "bm25": 0.6}) == ["b1", "b2", "g1", "g2"]
    table = collect(runs)
    got = weighted_rrf_scores(table, {"grep": 0.5}, 60.0)
    assert got == {"g1": 0.5 / 61, "g2": 0.5 / 62, "b1": 1 / 61, "b2": 1 / 62}


def test_keys_only_partial_routes_found_follow_the_better_covered_list():
    # the finished route lists two keys; both partial routes scanned elsewhere (factor from
    # coverage alone), their lists too short to weigh: the keys they found follow the finished
    # route's in the order of the better covered list, whichever route is listed first
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    names = [("n1", 2.0), ("n2", 1.0)]
    derived = [("x1", 5.0), ("x2", 4.0)]
    bm25 = [("y1", 5.0), ("y2", 4.0)]
    for order in (("derived", "bm25"), ("bm25", "derived")):
        lists = {"derived": derived, "bm25": bm25}
        runs = {"names": names, **{r: lists[r] for r in order}}
        got = fused(runs, model, partial={"derived": 0.05, "bm25": 0.5})
        assert got == ["n1", "n2", "y1", "y2", "x1", "x2"], order


def run(name, state=RunState.RAN, coverage=None, role="generate"):
    return LayerRun(name, state, "cut" if state is RunState.ABORTED else "", coverage=coverage, role=role)


def test_run_coverages_marks_cut_short_partly_built_and_fed_refine_runs():
    runs = {"grep": run("grep", RunState.ABORTED, 0.3), "bm25": run("bm25", coverage=0.5),
            "names": run("names", coverage=1.0), "fuzzy": run("fuzzy", role="refine")}
    assert run_coverages(runs, runs) == {"grep": 0.3, "bm25": 0.5, "fuzzy": 0.5}
    # a cut-short scan that did not report its coverage: known to be partial, coverage unknown
    runs["grep"] = run("grep", RunState.ABORTED)
    assert run_coverages(runs, runs) == {"grep": None, "bm25": 0.5, "fuzzy": None}
    # every generate run complete: a refine run rescored a complete pool
    done = {"bm25": run("bm25", coverage=1.0), "fuzzy": run("fuzzy", role="refine")}
    assert run_coverages(done, done) == {}
    assert run_coverages(done, ["bm25"]) == {}


def test_the_packaged_model_with_a_partly_built_heavy_layer_keeps_the_complete_order_on_noise():
    model = load_model(None)
    alone, got = [], []
    for rng, rel in queries(9, n=40):
        bm25 = listed(scores(rng, rel, 3.0))
        late = listed(scores(rng, rel, 0.0), built=built_share(rng, 0.2))
        alone.append(ndcg10(fused({"bm25": bm25}, model), rel))
        got.append(ndcg10(fused({"bm25": bm25, "late": late}, model, partial={"late": 0.2}), rel))
    assert mean(got) >= mean(alone) - 0.005


def test_with_nothing_finished_a_barely_covered_list_cannot_flip_the_best_covered_one():
    # grep's scan cut at a third, static at 9 %: both too short for a background fit. Under
    # plain RRF one more vote from static lifts grep's third key over its first; with the best
    # covered route standing in for the finished ones, static re-sorts only what it scored,
    # and only when it agrees with grep on enough pairs (here it scored one of grep's keys)
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    grep = [(f"g{i}", 10.0 - i) for i in range(15)]
    static = [("g2", 0.9), ("s1", 0.8), ("s2", 0.7)]
    cov = {"grep": 0.34, "static": 0.09}
    got = fused({"grep": grep, "static": static}, model, partial=cov)
    assert got == [f"g{i}" for i in range(10)]
    # coverage unknown (names only): both count fully, as before, and g2 moves up
    assert fused({"grep": grep, "static": static}, model, partial=list(cov))[0] == "g2"
    # the same lists with static the better covered: static leads, grep's keys follow
    got = fused({"grep": grep, "static": static}, model, partial={"grep": 0.09, "static": 0.34})
    assert got[:3] == ["g2", "s1", "s2"]


def test_the_pipeline_reads_each_runs_coverage_from_its_report():
    # the engine's path: the coverage comes from the LayerRun (a cut-short grep at 34 %, static
    # built for 9 %), through lar.fusion.pipeline.fuse_hits
    from lar.core.types import Hit, Span
    from lar.fusion.pipeline import FusionSettings, fuse_hits

    def h(name):  # a hex content hash per name: g0 -> 00a..., s1 -> 01b...
        return f"{int(name[1:]):02x}" + ("a" if name[0] == "g" else "b") * 30

    def hits(layer, names):
        return [Hit.single(layer, Span(h(n), 0, 10), rank=i, score=20.0 - i, score_kind="x")
                for i, n in enumerate(names, 1)]

    per_layer = {"grep": hits("grep", [f"g{i}" for i in range(15)]), "static": hits("static", ["g2", "s1", "s2"])}
    runs = {"grep": run("grep", RunState.ABORTED, 0.34), "static": run("static", coverage=0.09)}
    got = fuse_hits(per_layer, FusionSettings("adaptive", k=10), runs)
    assert [x.hash for x in got.hits] == [h(f"g{i}") for i in range(10)]
    assert got.report.routes["static"]["partial_factor"] < got.report.routes["grep"]["partial_factor"]
    # without the run reports both lists count fully: static's second vote lifts g2 to the top
    assert fuse_hits(per_layer, FusionSettings("adaptive", k=10)).hits[0].hash == h("g2")
