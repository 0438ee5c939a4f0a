"""The default fusion against its best route, on hand-built per-layer lists with known answers:
a dominant route among noisy ones, two complementary routes, a cut-short route, a missing route."""
from __future__ import annotations

import math
import random

import pytest

from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.model import FusionModel, RouteWeights, load_model
from lar.fusion.partial import positional_scores, slot_order
from lar.fusion.table import collect, ordered

N_DOCS = 200


def ndcg10(ranking, relevant):
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking[:10]) if d in relevant)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    return dcg / idcg


def route_list(rng, relevant, quality, n=60):
    """A best-first list over N_DOCS documents: relevant documents score ``quality`` sds above
    the background on average (0: pure noise)."""
    scores = {f"d{i}": rng.gauss(0.0, 1.0) + (quality if f"d{i}" in relevant else 0.0) for i in range(N_DOCS)}
    return sorted(scores.items(), key=lambda kv: -kv[1])[:n]


def fused(runs, model=None, **kw):
    return [it.key for it in adaptive_fusion(runs, k=10, model=model, **kw)[0]]


def queries(seed, n=40):
    rng = random.Random(seed)
    for _ in range(n):
        rel = set(rng.sample([f"d{i}" for i in range(N_DOCS)], 3))
        yield rng, rel


def test_one_strong_route_among_noisy_ones_is_not_diluted():
    # the packaged model: late strong, the layers the fit found weak (static, derived) and one
    # it never saw (sparse) pure noise
    model = load_model(None)
    best, got = [], []
    for rng, rel in queries(1):
        runs = {"late": route_list(rng, rel, 4.0), "static": route_list(rng, rel, 0.0),
                "derived": route_list(rng, rel, 0.0), "sparse": route_list(rng, rel, 0.0)}
        best.append(ndcg10([d for d, _ in runs["late"]], rel))
        got.append(ndcg10(fused(runs, model), rel))
    b, g = sum(best) / len(best), sum(got) / len(got)
    assert b > 0.95  # the synthetic strong route is near perfect
    assert g >= b - 0.005


def test_equal_weights_do_let_noise_in():
    # what the fitted weights buy: with equal weights the same lists fuse far below the route
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    best, got = [], []
    for rng, rel in queries(1):
        runs = {"late": route_list(rng, rel, 4.0), "static": route_list(rng, rel, 0.0),
                "derived": route_list(rng, rel, 0.0)}
        best.append(ndcg10([d for d, _ in runs["late"]], rel))
        got.append(ndcg10(fused(runs, model), rel))
    assert sum(got) / len(got) < sum(best) / len(best) - 0.2


def test_two_complementary_routes_beat_either():
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    a_s, b_s, f_s = [], [], []
    for rng, rel in queries(2):
        a, b = sorted(rel)[:2], sorted(rel)[1:]  # each route sees two of the three relevant
        runs = {"a": route_list(rng, set(a), 3.0), "b": route_list(rng, set(b), 3.0)}
        a_s.append(ndcg10([d for d, _ in runs["a"]], rel))
        b_s.append(ndcg10([d for d, _ in runs["b"]], rel))
        f_s.append(ndcg10(fused(runs, model), rel))
    best = max(sum(a_s), sum(b_s)) / len(a_s)
    assert sum(f_s) / len(f_s) >= best + 0.02


def cut_short(items, coverage, seed):
    """The list a scan would give after reading a seeded ``coverage`` share of the documents."""
    rng = random.Random(seed)
    read = {f"d{i}" for i in range(N_DOCS) if rng.random() < coverage}
    return [(d, s) for d, s in items if d in read]


@pytest.mark.parametrize("coverage, weight_factor_alone_hurts", [(0.1, False), (0.3, True)])
def test_a_cut_short_route_does_not_pull_below_the_cheap_stage(coverage, weight_factor_alone_hurts):
    # a heavy costly route (as the fitted model weighs late) that read a random share of the units
    model = FusionModel({"late": RouteWeights(4.0)}, RouteWeights(1.0), norm="zscore")
    cheap, guarded, unguarded = [], [], []
    for i, (rng, rel) in enumerate(queries(3, n=60)):
        lex = {"bm25": route_list(rng, rel, 2.5), "grep": route_list(rng, rel, 2.0)}
        late = cut_short(route_list(rng, rel, 3.0, n=N_DOCS), coverage, seed=i)[:60]
        cheap.append(ndcg10(fused(lex, model), rel))
        runs = {**lex, "late": late}
        guarded.append(ndcg10(fused(runs, model, partial=["late"]), rel))
        unguarded.append(ndcg10(fused(runs, model, partial=["late"], guard_slots=False), rel))
    c, g, u = (sum(x) / len(x) for x in (cheap, guarded, unguarded))
    assert g >= c - 0.005
    if weight_factor_alone_hurts:  # without the slot guard the half-done scan buries what it missed
        assert u < c - 0.005


def test_the_slot_guard_moves_only_scored_keys():
    order = ["x", "y", "z", "w"]
    full = {"y": 9.0, "w": 8.0}  # the partial route read y and w only
    assert slot_order(order, full, {"y", "w"}) == ["x", "y", "z", "w"]  # y already above w
    assert slot_order(order, {"y": 1.0, "w": 8.0}, {"y", "w"}) == ["x", "w", "z", "y"]  # they swap slots
    scores = positional_scores(["x", "w", "z", "y"], {"x": 5.0, "y": 4.0, "z": 3.0, "w": 4.0})
    assert scores == {"x": 5.0, "w": 4.0, "z": math.nextafter(4.0, -math.inf), "y": 3.0}


def test_a_cut_short_route_alone_with_no_weighted_route_does_not_take_over():
    # the finished route has no background fit (too short): the fused order is still its own
    model = FusionModel({}, RouteWeights(1.0), norm="zscore")
    rng = random.Random(5)
    short = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    late = route_list(rng, {"z"}, 5.0)
    got = fused({"fuzzy": short, "late": late}, model, partial=["late"])
    assert got[:3] == ["a", "b", "c"]


def test_a_missing_route_changes_nothing_and_an_unknown_route_is_not_trusted_blindly():
    model = load_model(None)
    assert model.default.base < 1.0  # a layer the fit never saw does not get full weight
    for r in ("symbols", "trigram", "names", "sparse"):
        assert r in model.routes, f"{r} has a fitted weight"
    rng = random.Random(4)
    rel = {"d1", "d2", "d3"}
    runs = {"bm25": route_list(rng, rel, 3.0), "grep": route_list(rng, rel, 2.0)}
    assert fused(runs, model) == fused({**runs, "late": []}, model)  # an empty list is no route
