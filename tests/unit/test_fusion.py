"""Unit tests for lar.fusion.policies, with expected values computed by hand."""
from __future__ import annotations

import math

import pytest

from lar.core.errors import ConfigError
from lar.fusion.comb import combmnz, combsum
from lar.fusion.policies import POLICIES, fuse
from lar.fusion.route_unique import route_unique
from lar.fusion.rrf import rrf
from lar.fusion.table import FusedItem

SEED = {"lexical": [("A", 9.0), ("B", 5.0), ("C", 1.0)], "dense": [("D", 0.9), ("A", 0.8), ("B", 0.7)]}


def keys(items: list[FusedItem]) -> list:
    return [it.key for it in items]


# -- rrf ----------------------------------------------------------------------------------------
def test_rrf_scores_and_order():
    out = rrf(SEED)
    assert keys(out) == ["A", "B", "D", "C"]
    by = {it.key: it for it in out}
    assert by["A"].score == pytest.approx(1 / 61 + 1 / 62)
    assert by["B"].score == pytest.approx(1 / 62 + 1 / 63)
    assert by["D"].score == pytest.approx(1 / 61)
    assert by["C"].score == pytest.approx(1 / 63)
    assert dict(by["A"].ranks) == {"lexical": 1, "dense": 2}
    assert by["A"].routes == ("lexical", "dense")
    assert by["D"].routes == ("dense",)
    assert all(it.slot == "core" for it in out)


def test_rrf_seed_k2_keeps_a_and_b():
    assert keys(rrf(SEED, k=2)) == ["A", "B"]


def test_rrf_custom_c():
    out = rrf(SEED, k=1, c=1.0)
    assert out[0].key == "A"
    assert out[0].score == pytest.approx(1 / 2 + 1 / 3)


def test_rrf_equal_rank_sets_tie_exactly_then_first_appearance():
    # X: ranks (1, 2), Y: ranks (2, 1) -> both 1/61 + 1/62, bit-equal whatever the summing order
    out = rrf({"a": [("X", 0), ("Y", 0)], "b": [("Y", 0), ("X", 0)]})
    assert out[0].score == out[1].score
    assert keys(out) == ["X", "Y"]


def test_more_routes_breaks_ties():
    # c=1: P at rank 1 in one route -> 1/2; Q at rank 3 in two routes -> 1/4 + 1/4 = 1/2
    runs = {"a": [("P", 0), ("m1", 0), ("Q", 0)], "b": [("m2", 0), ("m3", 0), ("Q", 0)]}
    out = rrf(runs, c=1.0)
    assert out[0].score == out[1].score == 0.5
    assert keys(out)[:2] == ["Q", "P"]


def test_best_single_rank_breaks_ties():
    # c=1: G ranks (1, 5) -> 1/2 + 1/6 = 2/3 ; H ranks (2, 2) -> 1/3 + 1/3 = 2/3
    runs = {
        "a": [("H0", 0), ("H", 0), ("x1", 0), ("x2", 0), ("G", 0)],
        "b": [("G", 0), ("H", 0)],
    }
    out = rrf(runs, c=1.0)
    by = {it.key: it for it in out}
    assert by["G"].score == pytest.approx(2 / 3)
    assert by["H"].score == by["G"].score  # a real tie, bit for bit
    assert keys(out).index("G") < keys(out).index("H")


def test_duplicate_key_in_route_keeps_first_rank():
    out = rrf({"a": [("A", 3.0), ("B", 2.0), ("A", 1.0), ("C", 0.5)]})
    by = {it.key: it for it in out}
    assert by["A"].ranks["a"] == 1
    assert by["C"].ranks["a"] == 3  # ranks count distinct keys
    assert by["A"].score == pytest.approx(1 / 61)


def test_any_hashable_key():
    out = rrf({"a": [(("f", 1), 1.0), (7, 0.5)]})
    assert keys(out) == [("f", 1), 7]


# -- route-unique ---------------------------------------------------------------------------------
def test_route_unique_seed_keeps_a_and_d():
    out = route_unique(SEED, k=2)
    assert keys(out) == ["A", "D"]
    assert [it.slot for it in out] == ["route-unique", "route-unique"]
    assert out[1].score == pytest.approx(1 / 61)


def test_route_unique_three_routes():
    runs = {
        "lex": [("A", 0), ("B", 0), ("C", 0)],
        "dense": [("A", 0), ("B", 0), ("E", 0)],
        "grep": [("F", 0), ("A", 0)],
    }
    # RRF: A = 1/61+1/61+1/62, B = 1/62+1/62, F = 1/61, C = 1/63, E = 1/63
    assert keys(rrf(runs)) == ["A", "B", "F", "C", "E"]
    # k=4, n=3 -> core = [A]; lex best unselected: B; dense: B taken -> E; grep: F
    out = route_unique(runs, k=4)
    assert keys(out) == ["A", "B", "F", "E"]
    assert [it.slot for it in out] == ["core", "route-unique", "route-unique", "route-unique"]
    # k=2: core empty; lex -> A; dense -> B; grep not reached (k full)
    out = route_unique(runs, k=2)
    assert keys(out) == ["A", "B"]
    # k=6 > candidates: core = top 3 of RRF (A, B, F); lex -> C; dense -> E; all 5 selected
    out = route_unique(runs, k=6)
    assert keys(out) == ["A", "B", "F", "C", "E"]
    assert [it.slot for it in out] == ["core", "core", "core", "route-unique", "route-unique"]


def test_route_unique_fill_and_order():
    # a route whose candidates are all selected adds nothing, the slot is filled in RRF order
    runs = {"a": [("A", 0), ("B", 0), ("C", 0)], "b": [("A", 0)]}
    # n=2, k=3 -> core = [A]; a -> B; b: A taken -> nothing; fill -> C
    out = route_unique(runs, k=3)
    assert keys(out) == ["A", "B", "C"]
    assert [it.slot for it in out] == ["core", "route-unique", "fill"]


def test_route_unique_ignores_empty_routes_and_k_none():
    runs = {"a": [("A", 0), ("B", 0)], "empty": [], "b": [("C", 0)]}
    out = route_unique(runs, k=2)  # n=2 -> core empty; a -> A, b -> C
    assert keys(out) == ["A", "C"]
    # k=None selects all 3: core = top 3-2 = [A]; a -> B, b -> C; the non-core part in RRF
    # order: C (1/61) before B (1/62)
    out = route_unique(runs, k=None)
    assert keys(out) == ["A", "C", "B"]
    assert [it.slot for it in out] == ["core", "route-unique", "route-unique"]


# -- combsum / combmnz ---------------------------------------------------------------------------
COMB = {
    "x": [("A", 10.0), ("B", 6.0), ("C", 2.0)],  # minmax: A 1, B 0.5, C 0
    "y": [("B", 4.0), ("D", 3.0), ("A", 2.0)],  # minmax: B 1, D 0.5, A 0
}


def test_combsum_minmax():
    out = combsum(COMB)
    by = {it.key: it.score for it in out}
    assert by == pytest.approx({"A": 1.0, "B": 1.5, "C": 0.0, "D": 0.5})
    assert keys(out) == ["B", "A", "D", "C"]


def test_combmnz_minmax():
    out = combmnz(COMB)
    by = {it.key: it.score for it in out}
    assert by == pytest.approx({"A": 2.0, "B": 3.0, "C": 0.0, "D": 0.5})
    assert keys(out) == ["B", "A", "D", "C"]
    assert keys(combmnz(COMB, k=2)) == ["B", "A"]


def test_minmax_constant_route_gives_one():
    out = combsum({"x": [("A", 3.0), ("B", 3.0)]})
    assert [it.score for it in out] == [1.0, 1.0]


def test_rank_none_and_zscore_norms():
    by = {it.key: it.score for it in combsum(COMB, norm="rank")}
    assert by == pytest.approx({"A": 1 + 1 / 3, "B": 1 / 2 + 1, "C": 1 / 3, "D": 1 / 2})
    by = {it.key: it.score for it in combsum(COMB, norm="none")}
    assert by == pytest.approx({"A": 12.0, "B": 10.0, "C": 2.0, "D": 3.0})
    # x: mean 6, pstdev sqrt(32/3); y: mean 3, pstdev sqrt(2/3)
    sx, sy = math.sqrt(32 / 3), math.sqrt(2 / 3)
    by = {it.key: it.score for it in combsum(COMB, norm="zscore")}
    assert by == pytest.approx({"A": 4 / sx - 1 / sy, "B": 0.0 + 1 / sy, "C": -4 / sx, "D": 0.0})


def test_nonfinite_score_rejected_unless_rank_norm():
    runs = {"x": [("A", math.inf), ("B", 1.0)]}
    with pytest.raises(ConfigError, match="not finite"):
        combsum(runs)
    assert keys(combsum(runs, norm="rank")) == ["A", "B"]


# -- fuse and validation -------------------------------------------------------------------------
def test_fuse_dispatch():
    assert POLICIES == ("route-unique", "rrf", "combsum", "combmnz", "adaptive", "pvalue")
    assert keys(fuse("route-unique", SEED, k=2)) == ["A", "D"]
    assert keys(fuse("rrf", SEED, k=2)) == ["A", "B"]
    assert keys(fuse("combsum", COMB)) == keys(combsum(COMB))
    assert keys(fuse("combmnz", COMB, norm="rank")) == keys(combmnz(COMB, norm="rank"))


@pytest.mark.parametrize("policy", POLICIES)
def test_empty_runs(policy):
    assert fuse(policy, {}) == []
    assert fuse(policy, {"a": [], "b": []}, k=3) == []


def test_unknown_policy_lists_policies():
    with pytest.raises(ConfigError, match="route-unique, rrf, combsum, combmnz"):
        fuse("borda", SEED)


def test_unknown_norm_lists_norms():
    with pytest.raises(ConfigError, match="minmax, zscore, tailz, rank, pvalue, none"):
        combsum(COMB, norm="l2")
    with pytest.raises(ConfigError, match="minmax"):
        fuse("combmnz", COMB, norm="l2")


@pytest.mark.parametrize("k", [0, -1, 1.5, "3", True])
def test_bad_k(k):
    with pytest.raises(ConfigError, match="k must be"):
        rrf(SEED, k=k)
    with pytest.raises(ConfigError, match="k must be"):
        fuse("combsum", SEED, k=k)


@pytest.mark.parametrize("c", [0, -60, 0.0, math.inf, math.nan, "60"])
def test_bad_c(c):
    with pytest.raises(ConfigError, match="c must be"):
        rrf(SEED, c=c)
    with pytest.raises(ConfigError, match="c must be"):
        route_unique(SEED, k=2, c=c)


@pytest.mark.parametrize(
    "runs",
    [
        [("a", 1.0)],
        {"a": [("A",)]},
        {"a": [(["unhashable"], 1.0)]},
        {"a": [("A", "high")]},
        {"a": [("A", math.nan)]},
        {"a": "AB"},
    ],
)
def test_bad_runs(runs):
    with pytest.raises(ConfigError):
        rrf(runs)


def test_fused_item_is_frozen():
    item = rrf(SEED)[0]
    with pytest.raises(AttributeError):
        item.score = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        item.ranks["x"] = 1  # type: ignore[index]
