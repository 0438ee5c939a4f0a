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
    # the packaged model: late strong, the layer kind the fit found weak (static: a quarter of
    # late's total) pure noise
    model = load_model(None)
    best, got = [], []
    for rng, rel in queries(1):
        runs = {"late": route_list(rng, rel, 4.0), "static": route_list(rng, rel, 0.0)}
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
    assert model.weights_for("names").base < 1.0  # no training set had names: the default
    rng = random.Random(4)
    rel = {"d1", "d2", "d3"}
    runs = {"bm25": route_list(rng, rel, 3.0), "grep": route_list(rng, rel, 2.0)}
    assert fused(runs, model) == fused({**runs, "late": []}, model)  # an empty list is no route


# --- the per-query decisions (lar/fusion/decide.py) on hand-built lists with known orders ---

from lar.fusion.decide import ExactRule, FollowRule, decided_order, followed, pins, signature  # noqa: E402


def ranked(prefix_or_keys, n=20, top=20.0):
    keys = [f"{prefix_or_keys}{i}" for i in range(n)] if isinstance(prefix_or_keys, str) else list(prefix_or_keys)
    return [(key, top - i) for i, key in enumerate(keys)]


def test_a_dominant_route_that_nobody_agrees_with_is_followed():
    # a's first ten keys are nobody else's; b lists a's ranks 11-20 first, then its own keys
    a = ranked("a")
    b = ranked([f"a{i}" for i in range(10, 20)] + [f"b{i}" for i in range(10)])
    combine = FusionModel({"a": RouteWeights(2.0), "b": RouteWeights(1.0)}, norm="zscore")
    follow = FusionModel(combine.routes, norm="zscore", follow=FollowRule(0.5, 2.0))
    assert fused({"a": a, "b": b}, follow) == [f"a{i}" for i in range(10)]  # a's own order
    got = fused({"a": a, "b": b}, combine)
    assert "a10" in got[:3] and "a9" not in got  # combined, b's evidence lifts a's 11th above its 10th
    # b breaks a's ties: a tie at a's top goes to the key b also found
    tied = [("a0", 20.0), ("a10", 20.0)] + ranked([f"a{i}" for i in range(1, 10)] + [f"a{i}" for i in range(11, 20)],
                                                   top=19.0)
    assert fused({"a": tied, "b": b}, follow)[:2] == ["a10", "a0"]


def test_the_follow_rule_needs_disagreement_and_a_clear_favourite():
    rule = FollowRule(0.3, 2.0)
    assert followed({"a": 2.0, "b": 1.0}, {"a": 0.0, "b": 0.0}, rule) == "a"
    assert followed({"a": 2.0, "b": 1.0}, {"a": 0.5, "b": 0.0}, rule) is None   # a agrees: combine
    assert followed({"a": 1.5, "b": 1.0}, {"a": 0.0, "b": 0.0}, rule) is None   # no clear favourite
    assert followed({"a": 2.0, "b": 1.0}, {"a": 0.0}, FollowRule()) is None     # the rule off
    assert followed({"a": 0.0}, {"a": 0.0}, rule) is None                       # nobody weighs


def test_two_complementary_routes_are_combined_not_followed():
    # both routes list s second: agreement is high, so the key both found leads
    a = ranked(["p", "s"] + [f"a{i}" for i in range(18)])
    b = ranked(["q", "s"] + [f"b{i}" for i in range(18)])
    model = FusionModel({"a": RouteWeights(1.0), "b": RouteWeights(1.0)}, norm="zscore", follow=FollowRule(0.05, 1.0))
    got = fused({"a": a, "b": b}, model)
    assert got[:3] == ["s", "p", "q"]  # each route's agreement is 0.1: combined


def test_a_short_exact_match_list_is_pinned_on_top():
    # grep found two files (too few for a background fit: score fusion alone drops it); bm25
    # ranks them 15th and 16th
    bm25 = ranked([f"d{i}" for i in range(14)] + ["x", "y"] + [f"e{i}" for i in range(10)])
    grep = [("y", 2.0), ("x", 1.0)]
    plain = FusionModel({}, RouteWeights(1.0), norm="zscore")
    pinned = FusionModel({}, RouteWeights(1.0), norm="zscore", exact=ExactRule(("grep",), 5))
    assert "x" not in fused({"bm25": bm25, "grep": grep}, plain)
    got = fused({"bm25": bm25, "grep": grep}, pinned)
    assert got[:2] == ["x", "y"] and got[2:5] == ["d0", "d1", "d2"]  # ties among pins: the fused order
    assert pins({"grep": grep * 1}, ExactRule(("grep",), 1)) == {}      # two hits is more than 1
    assert pins({"grep": grep}, ExactRule(("grep",), 5), skip=["grep"]) == {}  # a cut-short grep is no evidence
    assert decided_order(["a", "b", "c"], {"c": 2, "b": 1}) == ["c", "b", "a"]


def test_weights_follow_the_signature_of_the_routes_present_and_fall_back():
    model = FusionModel({"bm25": RouteWeights(0.1), "grep": RouteWeights(1.0)}, RouteWeights(0.1), norm="zscore",
                        subsets={"lexical": {"bm25": RouteWeights(2.0)}})
    rng = random.Random(7)
    rel = {"d1"}
    runs = {"bm25": route_list(rng, rel, 3.0), "grep": route_list(rng, rel, 2.0)}
    assert signature(runs) == "lexical" and signature({**runs, "dense": []}) == "dense+lexical"
    w = adaptive_fusion(runs, model=model)[2]
    assert w == {"bm25": 2.0, "grep": 1.0}          # the lexical table, grep from the global one
    w = adaptive_fusion({**runs, "dense": route_list(rng, rel, 1.0)}, model=model)[2]
    assert w == {"bm25": 0.1, "grep": 1.0, "dense": 0.1}  # a signature never fitted: global, then default


def test_kind_totals_balance_many_layers_of_one_kind():
    model = FusionModel({"bm25": RouteWeights(1.0), "grep": RouteWeights(3.0), "dense": RouteWeights(1.0)},
                        norm="zscore", kinds={"lexical": 2.0, "dense": 1.0})
    rng = random.Random(8)
    runs = {r: route_list(rng, {"d1"}, 2.0) for r in ("bm25", "grep", "dense")}
    w = adaptive_fusion(runs, model=model)[2]
    assert w == pytest.approx({"bm25": 0.5, "grep": 1.5, "dense": 1.0})  # lexical: 2 * (1, 3) / 4
def test_a_model_with_every_decision_round_trips_through_json(tmp_path):
    m = FusionModel({"bm25": RouteWeights(1.0)}, RouteWeights(0.1), norm="zscore",
                    subsets={"lexical": {"bm25": RouteWeights(2.0)}}, exact=ExactRule(("grep",), 10),
                    follow=FollowRule(0.2, 2.0), kinds={"lexical": 1.0})
    m.save(tmp_path / "m.json")
    back = load_model(tmp_path / "m.json")
    assert back.to_dict() == m.to_dict() and back.exact.max_hits == 10 and back.follow.min_ratio == 2.0
    assert back.weights_for("bm25", "lexical").base == 2.0 and back.weights_for("bm25").base == 1.0


def test_a_route_is_read_in_its_own_order():
    from lar.fusion.decide import in_list_order

    # a refine layer lists by its own key: its scores are not best-first
    items = [("a", 70.0), ("b", 90.0), ("c", 80.0)]
    assert in_list_order(items) == [("a", 90.0), ("b", 80.0), ("c", 70.0)]
    assert in_list_order([("a", 2.0), ("b", 2.0), ("c", 1.0)]) == [("a", 2.0), ("b", 2.0), ("c", 1.0)]
    fuzzy = [(f"d{i}", float(s)) for i, s in enumerate([60, 90, 70, 85] + list(range(50, 34, -1)))]
    assert fused({"fuzzy": fuzzy}, FusionModel({}, RouteWeights(1.0), norm="zscore")) == [f"d{i}" for i in range(10)]


def test_a_cut_short_route_that_contradicts_the_finished_ones_is_left_out():
    from lar.fusion.adaptive import concordance

    assert concordance(["a", "b", "c"], {"a": 3.0, "b": 2.0, "c": 1.0}) == 1.0
    assert concordance(["a", "b", "c"], {"a": 1.0, "b": 2.0, "c": 3.0}) == 0.0
    assert concordance(["a", "b", "c"], {"b": 1.0}) == 1.0  # one scored key: nothing to contradict
    bm25 = ranked("d")
    model = FusionModel({"bm25": RouteWeights(1.0), "late": RouteWeights(4.0)}, norm="zscore")
    # late read d0..d19 but ranks them backwards: the cheap stage's order stands
    backwards = ranked([f"d{i}" for i in range(19, -1, -1)])
    assert fused({"bm25": bm25, "late": backwards}, model, partial=["late"]) == [f"d{i}" for i in range(10)]
    # late agrees on most pairs and swaps d0 and d1: it re-sorts what it read
    swapped = ranked(["d1", "d0"] + [f"d{i}" for i in range(2, 20)])
    assert fused({"bm25": bm25, "late": swapped}, model, partial=["late"])[:2] == ["d1", "d0"]

