"""Each fast path of a search (issue 26) gives exactly what the general path gives."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import lar
from lar.core.errors import ConfigError
from lar.core.fasthit import layer_hit
from lar.core.types import Hit, Span
from lar.fusion import pipeline
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.emit import fused_hit
from lar.fusion.grouping import group_hits, merged_hit, runs_for_fusion
from lar.fusion.model import FusionModel, RouteWeights
from lar.fusion.probe import EVIDENCE_CAP, RouteProbe, with_probe
from lar.fusion.weight_bounds import can_weigh

H1, H2 = "a" * 16, "b" * 16


def _hit(layer, h, s, e, rank, score, subs=()):
    return Hit.single(layer, Span(h, s, e), rank=rank, score=score, score_kind="k", query="q",
                      sub_spans=subs)


@pytest.mark.parametrize("kw", [
    dict(rank=1, score=3.5),
    dict(rank=7, score=np.float64(2.25), sub_spans=[(0, 3), [4, 9]]),
    dict(rank=2, score=1, sub_spans=((5, 5),), query=None),
    dict(rank=3, score=float("inf")),
])
def test_layer_hit_equals_hit_single(kw):
    kw = {"score_kind": "bm25", "query": "fox", **kw}
    fast = layer_hit("bm25", Span(H1, 0, 10), **kw)
    slow = Hit.single("bm25", Span(H1, 0, 10), **{**kw, "sub_spans": tuple(kw.get("sub_spans", ()))})
    assert fast == slow
    assert type(fast.evidence["bm25"].score) is float
    assert fast.evidence["bm25"].sub_spans == slow.evidence["bm25"].sub_spans
    with pytest.raises(Exception):
        fast.evidence["bm25"].details["x"] = 1  # frozen like the general one


@pytest.mark.parametrize("kw", [dict(rank=0, score=1.0), dict(rank=1, score=float("nan")),
                                dict(rank=1, score=1.0, sub_spans=[(5, 2)])])
def test_layer_hit_refuses_what_hit_single_refuses(kw):
    with pytest.raises(ConfigError):
        layer_hit("bm25", Span(H1, 0, 10), score_kind="k", **kw)


def _one_layer_list():
    return [_hit("bm25", H1, 0, 10, 1, 9.0), _hit("bm25", H1, 5, 20, 2, 8.0),  # overlapping
            _hit("bm25", H1, 0, 10, 3, 7.0),  # same span again: dropped
            _hit("bm25", H2, 0, 0, 4, 6.0), _hit("bm25", H2, 0, 4, 5, 5.0),  # empty span inside
            _hit("bm25", H1, 30, 40, 6, 4.0)]


def test_one_layer_grouping_equals_the_general_rules():
    lists = {"bm25": _one_layer_list()}
    fast, general = group_hits(lists), group_hits(lists, fast=False)
    assert fast == general
    assert [g.key for g in fast] == [g.key for g in general]
    assert [dict(g.ranks) for g in fast] == [{"bm25": r} for r in (1, 2, 3, 4, 5)]


def _two_layers():
    a = [_hit("bm25", H1 if i % 3 else H2, 100 * i, 100 * i + 50, i + 1, 30.0 - i * 0.9, ((100 * i, 100 * i + 4),))
         for i in range(25)]
    b = [_hit("grep", H1, 100 * i + 10, 100 * i + 20, j + 1, 12.0 - 0.4 * j) for j, i in enumerate(range(24, 0, -1))]
    return {"bm25": a, "grep": b}


def test_fused_hit_equals_merge_then_probe_then_score():
    lists = _two_layers()
    groups = group_hits(lists)
    assert any(len(g.members) == 2 for g in groups)
    places = runs_for_fusion(groups, lists)
    items, _, _, fits = adaptive_fusion(places, k=None, units={g.key: g.span.hash for g in groups})
    assert any(f is not None for f in fits.values())
    by_key = {g.key: g for g in groups}
    for i, it in enumerate(items, 1):
        g = by_key[it.key]
        chain = replace(with_probe(merged_hit(g, dict(it.ranks)), fits), score=float(it.score), rank=i)
        assert fused_hit(g, it.ranks, fits, it.score, i) == chain


def _grid_models():
    vals = (-0.5, -0.1, 0.0, 0.1, 0.5)
    for base in vals:
        for signal in vals:
            for agree in vals:
                yield FusionModel({"bm25": RouteWeights(base, signal, agree)}, RouteWeights(0.0, 0.0, 0.0))


@pytest.mark.parametrize("routes", [["bm25"], ["bm25", "grep"]])
def test_can_weigh_is_the_exact_bound_of_the_weights(routes):
    """False exactly when no probe (top evidence 0..cap, agreement 0..1, none with one route)
    gives any route a weight above 0."""
    grid = [i / 4 for i in range(5)]
    for model in _grid_models():
        agreements = grid if len(routes) > 1 else [0.0]
        best = max(model.weights_for(r).weight(RouteProbe(r, 50, True, "", t * EVIDENCE_CAP, 0.0, 1.0, a))
                   for r in routes for t in grid for a in agreements)
        assert can_weigh(model, routes) == (best > 0), model.routes


def _pool(n=60, seed=0):
    rng = np.random.default_rng(seed)
    scores = np.sort(rng.gamma(2.0, 2.0, n))[::-1]
    scores[:3] += 6.0  # a few hits that stand out
    hs = [f"{i % 23:016x}" for i in range(n)]
    return [(f"{h}:{10 * i}-{10 * i + 5}", float(s)) for i, (h, s) in enumerate(zip(hs, scores))], \
        {f"{h}:{10 * i}-{10 * i + 5}": h for i, h in enumerate(hs)}


@pytest.fixture()
def corpus(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    words = ["fox", "dog", "cat", "bird", "fish", "lion", "bear", "wolf"]
    for i in range(40):
        body = " ".join(words[(i + j) % len(words)] for j in range(1 + i % 7))
        (root / f"d{i:02d}.txt").write_text(f"document {i}\n\n{body} the quick brown {words[i % 8]}\n" * (1 + i % 3))
    return root


def _general(monkeypatch):
    monkeypatch.setattr(pipeline, "group_hits", lambda per_layer: group_hits(per_layer, fast=False))
    monkeypatch.setattr(pipeline, "fused_hit", lambda g, ranks, fits, score, rank: replace(
        with_probe(merged_hit(g, dict(ranks)), fits), score=float(score), rank=rank))
    monkeypatch.setattr("lar.layers.bm25.layer_hit", Hit.single)
    from lar.fusion import adaptive, units

    monkeypatch.setattr(adaptive, "unit_scores", lambda *a: units.unit_scores(*a[:7]))
    monkeypatch.setattr("lar.fusion.scales.distinct_raw", lambda items: None)


@pytest.mark.parametrize("fusion", [None, "rrf", "combsum"])
def test_bm25_search_equals_the_general_path(corpus, tmp_path, monkeypatch, fusion):
    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        eng.build(timebox=60, layers=["bm25"])
        queries = ["fox", "quick brown dog", "lion bear wolf", "document 7 fish"]
        fast = [eng.search(q, layers=["bm25"], k=20, timebox=30, fusion=fusion) for q in queries]
        with monkeypatch.context() as m:
            _general(m)
            slow = [eng.search(q, layers=["bm25"], k=20, timebox=30, fusion=fusion) for q in queries]
    finally:
        eng.close()
    for f, s in zip(fast, slow):
        assert f.hits and f.hits == s.hits
        assert [h.id for h in f.hits] == [h.id for h in s.hits]
        assert f.score_scale == s.score_scale
        assert [r.probe for r in f.runs if r.name == "bm25"] == [r.probe for r in s.runs if r.name == "bm25"]


def test_multi_layer_search_equals_the_general_path(corpus, tmp_path, monkeypatch):
    """bm25, grep and names fused by adaptive: groups of several layers, unit fusion, every
    route's values; the same hits, ids, scores, signals and probes as the general path."""
    layers = ["bm25", "grep", "names"]
    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        eng.build(timebox=60, layers=layers)
        queries = ["fox", "quick brown dog", "d07", "document 7 fish"]
        fast = [eng.search(q, layers=layers, k=20, timebox=30) for q in queries]
        with monkeypatch.context() as m:
            _general(m)
            slow = [eng.search(q, layers=layers, k=20, timebox=30) for q in queries]
    finally:
        eng.close()
    assert any(len(h.signals) > 1 for f in fast for h in f.hits)
    for f, s in zip(fast, slow):
        assert f.hits and f.hits == s.hits
        assert [(h.id, h.score, h.signals) for h in f.hits] == [(h.id, h.score, h.signals) for h in s.hits]
        assert f.score_scale == s.score_scale
        assert [r.probe for r in f.runs] == [r.probe for r in s.runs]


def _fresh_scoped(layer, view):
    layer._scoped = None
    return layer.scoped(view, layer.built())


def test_scoped_units_are_kept_only_while_units_states_and_scope_stay(corpus, tmp_path):
    """The per-call sets of a lexical layer (paths, processed count, built hashes) come from the
    cache only while nothing they depend on moved: each change gives what a fresh pass gives."""
    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        eng.build(timebox=60, layers=["bm25"])
        layer = eng.layers["bm25"]
        view = eng.scope_view()
        first = layer.scoped(view, layer.built())
        assert len(first[0]) == 40 and first[1] == 40 and len(first[2]) == 40
        assert layer.scoped(eng.scope_view(), layer.built()) is first  # nothing moved: kept
        # the built states move
        h = next(iter(first[0]))
        layer.manifest.forget([h])
        moved = layer.scoped(eng.scope_view(), layer.built())
        assert h not in moved[2] and moved[1] == 39
        assert moved == _fresh_scoped(layer, eng.scope_view())
        # a scope: other units
        narrow = layer.scoped(eng.scope_view("d0*.txt"), layer.built())
        assert sorted(narrow[0].values()) == [f"d{i:02d}.txt" for i in range(10)]
        assert narrow == _fresh_scoped(layer, eng.scope_view("d0*.txt"))
        # the live units move
        (corpus / "new.txt").write_text("a new fox\n")
        eng.index_now()
        grown = layer.scoped(eng.scope_view(), layer.built())
        assert "new.txt" in grown[0].values() and len(grown[0]) == 41
        assert grown == _fresh_scoped(layer, eng.scope_view())
    finally:
        eng.close()


def test_the_segment_plan_is_kept_only_while_segments_and_built_units_stay(corpus, tmp_path):
    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        eng.build(timebox=60, layers=["bm25"])
        layer = eng.layers["bm25"]
        index = layer.index
        ok = layer.ok_hashes()
        assert index.plan(ok) == index._plan_for(index.segments(), ok)
        assert index._plan is not None and index._plan[1] is ok
        # most units dead: a merge is due, whatever was cached for the full set
        few = set(list(ok)[:5])
        assert index.plan(few) == index._plan_for(index.segments(), few) == "merge"
        assert index.plan(ok) == index._plan_for(index.segments(), ok)
    finally:
        eng.close()


def _unit_lists():
    lists = _two_layers()
    groups = group_hits(lists)
    places = runs_for_fusion(groups, lists)
    return places, {g.key: g.span.hash for g in groups}


def test_key_fits_equal_the_fits_of_probe_runs():
    """Reused where a unit list has the key list's scores, fitted again where not: each route's
    fit is the one probe_runs gives on the key lists."""
    from lar.fusion.probe import probe_runs
    from lar.fusion.units import by_unit, key_fits

    places, units = _unit_lists()
    single = {"bm25": [(f"k{i}", s) for i, (_, s) in enumerate(_pool()[0])]}
    for runs, unit_of in ((places, units), (single, {})):
        ulists = {r: by_unit(items, unit_of) for r, items in runs.items()}
        _, ufits = probe_runs(ulists)
        _, want = probe_runs(runs)
        assert key_fits(runs, ulists, ufits) == want == key_fits(runs)
    # the bm25 route has several places per unit: its unit list's scores differ, so no reuse
    ulists = {r: by_unit(items, units) for r, items in places.items()}
    assert [s for _, s in ulists["bm25"]] != [s for _, s in places["bm25"]]


def test_unit_fusion_with_the_unit_fits_equals_refitting(monkeypatch):
    from lar.fusion import adaptive, units as units_mod

    pool = _pool()[0]
    own = {key: f"u{i}" for i, (key, _) in enumerate(pool)}  # one place per unit: the fit is reused
    for places, units in (_unit_lists(), ({"bm25": pool}, _pool()[1]), ({"bm25": pool}, own)):
        fast = adaptive_fusion(places, k=None, units=units)
        with monkeypatch.context() as m:
            m.setattr(adaptive, "unit_scores", lambda *a: units_mod.unit_scores(*a[:7]))
            slow = adaptive_fusion(places, k=None, units=units)
        assert fast[0] and fast == slow


def test_fused_hit_keeps_a_layers_own_evalue_and_checks_the_score():
    g = group_hits({"bm25": [_hit("bm25", H1, 0, 10, 1, 9.0)]})[0]
    ev = replace(g.members["bm25"].evidence["bm25"], evalue=0.5, p_value=0.25)
    g = replace(g, members={"bm25": replace(g.members["bm25"], evidence={"bm25": ev})})
    got = fused_hit(g, None, {}, 1.5, 1)
    assert got == replace(merged_hit(g), score=1.5, rank=1)
    assert got.evidence["bm25"].evalue == 0.5 and got.evidence["bm25"].rank == 1
    with pytest.raises(ConfigError):
        fused_hit(g, None, {}, float("nan"), 1)
    with pytest.raises(ConfigError):
        fused_hit(g, None, {}, 1.0, 0)


@pytest.mark.parametrize("norm", ["minmax", "zscore", "tailz", "rank", "pvalue", "none", "bgz"])
def test_route_values_read_without_the_table_equal_the_tables(norm, monkeypatch):
    """Each route's values read straight from its list (a repeated key keeping its first score)
    are the ones the candidate table gives; a list with other scores goes through the table."""
    from lar.fusion import scales
    from lar.fusion.probe import probe_runs

    pool = _pool()[0]
    runs = {"bm25": pool + [pool[3][:1] + (99.0,)],  # a repeated key: its first score stands
            "grep": [(k, int(s * 10)) for k, s in pool[:40:2]],  # ints: the table reads them
            "names": pool[5:30]}
    fits = probe_runs(runs)[1]
    fast = scales.route_values(runs, fits, norm)
    with monkeypatch.context() as m:
        m.setattr(scales, "distinct_raw", lambda items: None)
        slow = scales.route_values(runs, fits, norm)
    assert fast.keys() == slow.keys() and fast
    for r in fast:
        assert list(fast[r][0].items()) == list(slow[r][0].items()) and fast[r][1] == slow[r][1]
    assert scales.distinct_raw(runs["grep"]) is None and scales.distinct_raw([("a", float("nan"))]) is None
    assert scales.distinct_raw(runs["bm25"])[pool[3][0]] == pool[3][1]
