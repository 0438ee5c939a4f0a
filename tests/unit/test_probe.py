"""Probing a route's list (background fit, evidence) and the adaptive / p-value fusion."""
from __future__ import annotations

import math

import pytest

from lar.core.errors import ConfigError
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.policies import fuse
from lar.fusion.rrf import rrf
from lar.fusion.model import FusionModel, RouteWeights, load_model
from lar.fusion.probe import TailFit, agreement, fit_tail, probe_list


def background(n: int, a: float = 5.0, beta: float = 0.5, start: int = 1) -> list[float]:
    return [a - beta * math.log(r) for r in range(start, n + 1)]


def test_tail_fit_recovers_a_known_law():
    fit, why = fit_tail(background(60))
    assert why == "" and fit.a == pytest.approx(5.0) and fit.beta == pytest.approx(0.5)
    assert fit.n == 51 and fit.r0 == 10  # ranks 10..60
    # the score of rank 3 on the trend: 3 background units expected at least that good
    assert fit.evalue(5.0 - 0.5 * math.log(3)) == pytest.approx(3.0)
    # two betas above the trend's top: E = e^-2, p = 1 - exp(-e^-2), evidence = -ln p
    s = 5.0 + 2 * 0.5
    assert fit.p_value(s) == pytest.approx(1 - math.exp(-math.exp(-2)))
    assert fit.evidence(s) == pytest.approx(-math.log(1 - math.exp(-math.exp(-2))))
    assert fit.evidence(5.0 - 0.5 * math.log(1000)) == pytest.approx(0.0, abs=1e-12)
    assert fit.evidence(1e6) == 30.0  # capped


def test_lists_without_signal_have_no_fit():
    assert fit_tail([1.0] * 40) == (None, "scores do not fall with rank (constant or tied): no signal to read")
    fit, why = fit_tail([3.0, float("nan")] + background(30))
    assert fit is None and "rank 2 is not a finite number" in why
    fit, why = fit_tail(background(15))
    assert fit is None and "too few" in why and "19" in why
    with pytest.raises(ConfigError):
        TailFit(a=1.0, beta=0.0, r0=10, n=5)


def test_probe_list_and_agreement():
    scores = [7.0] + background(60, start=2)
    probe, fit = probe_list("bm25", scores)
    assert probe.usable and probe.n == 60
    assert probe.margin == pytest.approx((7.0 - (5.0 - 0.5 * math.log(2))) / 0.5, rel=1e-6)
    assert probe.top_evidence == pytest.approx(fit.evidence(7.0))
    empty, _ = probe_list("grep", [])
    assert not empty.usable and empty.reason == "no hits"
    tops = {"a": ["x", "y", "z", "w"], "b": ["y", "q"], "c": ["w"]}
    assert agreement(tops, "a") == 0.5 and agreement(tops, "b") == 0.5 and agreement(tops, "c") == 1.0
    assert agreement(tops, "missing") == 0.0


def runs_with_a_standout():
    dense = [("x", 9.0)] + [(f"d{r}", s) for r, s in enumerate(background(60, start=2), start=2)]
    flat = [(f"f{i}", 1.0) for i in range(40)]
    bm25 = [(f"b{r}", s) for r, s in enumerate(background(60, a=12.0, beta=2.0), start=1)]
    return {"dense": dense, "flat": flat, "bm25": bm25}


def test_adaptive_fusion_drops_a_route_without_signal_and_ranks_the_standout_first():
    items, probes, weights, _ = adaptive_fusion(runs_with_a_standout(), k=5, model=FusionModel())
    assert not probes["flat"].usable and weights["flat"] == 0.0
    assert weights["dense"] == 1.0 and weights["bm25"] == 1.0
    assert items[0].key == "x"  # far above its route's background; bm25's top is on its trend
    assert all(not it.key.startswith("f") for it in items)
    assert probes["dense"].top_evidence > 5 > probes["bm25"].top_evidence


def test_adaptive_weights_follow_the_model_and_fall_back_to_rrf():
    runs = runs_with_a_standout()
    only_bm25 = FusionModel({"bm25": RouteWeights(1.0)}, default=RouteWeights(0.0))
    items, _, weights, _ = adaptive_fusion(runs, k=3, model=only_bm25)
    assert weights == {"dense": 0.0, "flat": 0.0, "bm25": 1.0}
    assert [it.key for it in items] == ["b1", "b2", "b3"]
    nothing = FusionModel(default=RouteWeights(0.0))
    assert [it.key for it in fuse("adaptive", runs, k=4, model=nothing)] == [it.key for it in rrf(runs, 4)]
    signal = FusionModel(default=RouteWeights(base=0.0, signal=1.0))
    _, probes, w, _ = adaptive_fusion(runs, k=3, model=signal)
    assert w["dense"] == pytest.approx(min(probes["dense"].top_evidence, 30.0) / 30.0)


def test_pvalue_policy_is_combsum_of_evidence():
    runs = runs_with_a_standout()
    got = fuse("pvalue", runs, k=2)
    assert got[0].key == "x"
    assert got[0].score == pytest.approx(fit_tail([s for _, s in runs["dense"]])[0].evidence(9.0))


def test_fusion_model_round_trip_and_bad_files(tmp_path):
    m = FusionModel({"late": RouteWeights(0.5, 1.5, -0.25)}, RouteWeights(0.1), name="fit",
                    trained_on=("scifact-train",), info={"ndcg@10": 0.75})
    path = tmp_path / "m.json"
    m.save(path)
    back = load_model(path)
    assert back.to_dict() == m.to_dict() and back.weights_for("late").agree == -0.25
    assert back.weights_for("bm25") == RouteWeights(0.1)
    (tmp_path / "bad.json").write_text('{"kind": "other"}')
    with pytest.raises(ConfigError, match="not a lar adaptive fusion model"):
        load_model(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_model(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="finite"):
        RouteWeights(float("nan"))


def test_a_flat_background_does_not_make_the_top_impossibly_strong():
    scores = [10.0, 9.0] + [1.0 + 1e-6 * (100 - r) for r in range(3, 101)]  # a near-tie plateau
    fit, _ = fit_tail(scores)
    assert fit.beta == pytest.approx((10.0 - scores[-1]) / (4 * math.log(100)))
    assert fit.evidence(10.0) < 30.0


def test_search_reports_probes_on_runs_and_hits(tmp_path):
    import lar

    for i in range(40):
        extra = " zebra zebra" if i == 3 else ""
        (tmp_path / f"f{i:02d}.txt").write_text(f"document {i} about topic {i % 7}{extra}\n" * 3)
    with lar.open(tmp_path) as eng:
        eng.build(timebox=30, layers=["bm25"])
        for fusion in ("adaptive", "rrf"):
            res = eng.search("zebra topic", layers=["bm25", "grep"], fusion=fusion, k=5, timebox=5)
            assert res.hits[0].path == "f03.txt"
            bm25, grep = res.run("bm25"), res.run("grep")
            assert bm25.probe["usable"] and bm25.probe["n"] >= 20
            assert not grep.probe["usable"] and "no signal" in grep.probe["reason"]
            assert ("weight" in bm25.probe) == (fusion == "adaptive")
            ev = res.hits[0].evidence["bm25"]
            assert 0 <= ev.p_value <= ev.evalue < 1e-3  # stands far above bm25's background
            assert res.hits[0].evidence["grep"].evalue is None
            d = res.to_dict()
            assert "probe" not in d["runs"][0] and "probe" in res.to_dict(full=True)["runs"][0]


def test_a_model_file_is_read_once_per_version(tmp_path):
    import os

    path = tmp_path / "m.json"
    FusionModel({"bm25": RouteWeights(2.0)}, name="v1").save(path)
    first = load_model(path)
    assert load_model(path) is first  # cached: the same object, no second read
    FusionModel({"bm25": RouteWeights(3.0)}, name="v2").save(path)
    os.utime(path, ns=(1, os.stat(path).st_mtime_ns + 1_000_000))  # a new version on disk
    again = load_model(path)
    assert again.name == "v2" and again.weights_for("bm25").base == 3.0


def test_background_z_reads_the_tail_from_rank_r0():
    from lar.fusion.probe import background_z

    scores = [9.0] + [2.0] * 8 + [1.0, 3.0] * 10  # ranks 10..29 alternate 1, 3
    mean, std = background_z(scores)
    assert (mean, std) == (pytest.approx(2.0), pytest.approx(1.0))
    short = [4.0, 2.0, 0.0]  # too short for a background: the whole list
    assert background_z(short) == (pytest.approx(2.0), pytest.approx(math.sqrt(8 / 3)))
    assert background_z([]) == (0.0, 0.0)
    by = {it.key: it.score for it in fuse("combsum", {"r": [(f"k{i}", s) for i, s in enumerate(scores)]},
                                          norm="tailz")}
    assert by["k0"] == pytest.approx(7.0) and by["k9"] == pytest.approx(-1.0)
    flat = fuse("combsum", {"r": [("a", 1.0), ("b", 1.0)]}, norm="tailz")
    assert [it.score for it in flat] == [0.0, 0.0]


@pytest.mark.parametrize("norm", ["evidence", "tailz", "minmax", "zscore"])
def test_adaptive_uses_the_models_norm_and_floors_missing_keys(norm):
    from lar.fusion.scales import normalise
    from lar.fusion.table import collect

    runs = runs_with_a_standout()
    model = FusionModel({r: RouteWeights(1.0) for r in runs}, norm=norm)
    items, probes, weights, fits = adaptive_fusion(runs, None, model)
    table = collect(runs)
    expect = {}
    assert weights["flat"] == 0.0  # no background fit: no signal, whatever the norm
    for r in ("dense", "bm25"):
        if norm == "evidence":
            vals, floor = {k: fits[r].evidence(s) for k, s in runs[r]}, 0.0
        else:
            vals = normalise(table, r, norm)
            floor = min(vals.values())
        for key in table.cands:
            expect[key] = expect.get(key, 0.0) + weights[r] * vals.get(key, floor)
    assert {it.key: it.score for it in items} == pytest.approx(expect)
    assert items[0].key == "x"


def test_model_norm_round_trips_and_is_checked(tmp_path):
    m = FusionModel({"bm25": RouteWeights(2.0)}, norm="tailz")
    m.save(tmp_path / "m.json")
    assert load_model(tmp_path / "m.json").norm == "tailz"
    old = dict(m.to_dict())
    del old["norm"]  # models written before norms existed read as evidence
    assert FusionModel.from_dict(old).norm == "evidence"
    with pytest.raises(ConfigError, match="unknown norm 'l2'"):
        FusionModel.from_dict({**old, "norm": "l2"})
    with pytest.raises(ConfigError, match="norm must be one of"):
        FusionModel(norm="rank")


def test_partial_factors_measure_how_much_of_the_finished_lists_a_cut_run_scored():
    from lar.fusion.adaptive import partial_factors

    runs = {"a": [("x", 3.0), ("y", 2.0)], "b": [("y", 1.0), ("z", 0.5)],
            "late": [("x", 9.0), ("q", 8.0)]}
    assert partial_factors(runs, ["late"], depth=1) == {"late": 0.5}  # leading {x, y}: x scored
    assert partial_factors(runs, ["late"]) == {"late": pytest.approx(1 / 3)}  # {x, y, z}
    assert partial_factors(runs, ["late", "missing"]) == {"late": pytest.approx(1 / 3)}
    assert partial_factors({"late": [("x", 1.0)]}, ["late"]) == {"late": 1.0}  # nothing to compare
    assert partial_factors(runs, []) == {}


def test_a_cut_run_that_scanned_elsewhere_does_not_outvote_the_finished_ones():
    runs = runs_with_a_standout()
    model = FusionModel({"dense": RouteWeights(1.0), "bm25": RouteWeights(1.0),
                         "late": RouteWeights(1.0)})
    # a cut-short late list over units no finished route ranks first, with a strong standout
    late = [("elsewhere", 50.0)] + [(f"e{i}", 5.0 - 0.5 * math.log(i)) for i in range(1, 60)]
    with_late = {**runs, "late": late}
    kept, _, w_kept, _ = adaptive_fusion(with_late, k=3, model=model)
    assert kept[0].key == "elsewhere" and w_kept["late"] == 1.0
    guarded, _, w_guard, _ = adaptive_fusion(with_late, k=3, model=model, partial=["late"])
    assert w_guard["late"] == 0.0
    alone, _, _, _ = adaptive_fusion(runs, k=3, model=model)
    assert [it.key for it in guarded] == [it.key for it in alone]
    # the same list over the finished routes' leading units keeps part of its weight
    over = [(key, s) for key, s in late[1:]] + [(key, 1.0) for key, _ in runs["dense"][:5]]
    _, p_over, w_over, _ = adaptive_fusion({**runs, "late": over}, k=3, model=model, partial=["late"])
    top = {key for r in ("dense", "flat", "bm25") for key, _ in runs[r][:10]}
    assert w_over["late"] == pytest.approx(5 / len(top))
    # the probe carries the factor applied (the run report shows it); complete routes none
    assert p_over["late"].partial_factor == pytest.approx(5 / len(top))
    assert p_over["late"].to_dict()["partial_factor"] == round(5 / len(top), 4)
    assert p_over["dense"].partial_factor is None and "partial_factor" not in p_over["dense"].to_dict()


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "half", True])
def test_a_route_probe_refuses_a_partial_factor_outside_0_1(bad):
    from lar.fusion.probe import RouteProbe

    with pytest.raises(ConfigError, match="partial_factor"):
        RouteProbe("late", 3, True, partial_factor=bad)


def _two_routes_split_evidence():
    """Unit U is found by 'a' at place u1 and by 'b' at place u2 (each route's second best);
    unit V is first in 'a' at v1 and nowhere in 'b'; W first in 'b' only. Per place nobody
    has two routes; per unit, U has both. ('a' also lists a third place of U, u3, last.)"""
    bg = background(60, start=3)
    a = [("v1", 8.0), ("u1", 7.5)] + [(f"a{r}", s) for r, s in enumerate(bg, start=3)] + [("u3", bg[-1])]
    b = [("w1", 8.0), ("u2", 7.5)] + [(f"b{r}", s) for r, s in enumerate(bg, start=3)]
    units = {"u1": "U", "u2": "U", "u3": "U", "v1": "V", "w1": "W"}
    return {"a": a, "b": b}, units


def test_unit_fusion_combines_a_units_evidence_found_at_different_places():
    runs, units = _two_routes_split_evidence()
    model = FusionModel(norm="zscore")
    by_place, *_ = adaptive_fusion(runs, k=4, model=model)
    assert {it.key for it in by_place[:2]} == {"v1", "w1"}  # each route's top, alone
    by_unit, probes, weights, _ = adaptive_fusion(runs, k=4, model=model, units=units)
    assert by_unit[0].key in ("u1", "u2")  # U stands out in both routes: combined, it leads
    assert {it.key for it in by_unit[1:3]} == {"v1", "w1"}
    # U's other place does not ride on the unit's score: it sits below V and W
    keys = [it.key for it in adaptive_fusion(runs, k=None, model=model, units=units)[0]]
    assert keys.index({"u1": "u2", "u2": "u1"}[by_unit[0].key]) > keys.index("v1")
    assert by_unit[0].score > by_unit[1].score
    assert probes["a"].n == 60 and weights == {"a": 1.0, "b": 1.0}  # probed on unit lists (u3 is U)
    assert adaptive_fusion(runs, k=4, model=model)[1]["a"].n == 61
    # keys absent from units are their own unit: the same as fusing by place
    assert [it.key for it in adaptive_fusion(runs, k=4, model=model, units={})[0]] == [it.key for it in by_place]


def test_unit_fusion_falls_back_to_places_when_one_unit_holds_every_hit():
    """Every hit in one file: a unit list of one entry carries no signal, so the places are
    fused as before (not RRF)."""
    bg = background(40)
    runs = {"a": [(f"p{i}", s) for i, s in enumerate(bg)], "b": [(f"p{39 - i}", s) for i, s in enumerate(bg)]}
    units = {f"p{i}": "only" for i in range(40)}
    model = FusionModel(norm="zscore", routes={"a": RouteWeights(2.0), "b": RouteWeights(1.0)})
    got, probes, weights, _ = adaptive_fusion(runs, k=5, model=model, units=units)
    want, _, _, _ = adaptive_fusion(runs, k=5, model=model)
    assert [it.key for it in got] == [it.key for it in want] and got[0].key == "p0"
    assert weights == {"a": 2.0, "b": 1.0} and probes["a"].n == 40
