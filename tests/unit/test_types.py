import pytest

from lar.core.errors import ConfigError, HitNotFoundError
from lar.core.types import Evidence, Hit, LayerRun, LayerStatus, RunState, Span, parse_hit_id

H = "ab" * 16


def test_span_invariants():
    assert Span(H, 3, 7).length == 4
    with pytest.raises(ConfigError):
        Span(H, 5, 4)
    with pytest.raises(ConfigError):
        Span(H, -1, 4)
    with pytest.raises(ConfigError):
        Span("not-a-hash", 0, 1)


def test_span_overlap_and_containment():
    a, b, c = Span(H, 0, 10), Span(H, 5, 15), Span(H, 10, 20)
    assert a.overlaps(b) and b.overlaps(c)
    assert not a.overlaps(c)  # end is exclusive
    assert Span(H, 0, 100).contains(Span(H, 10, 20))
    assert not Span(H, 0, 100).overlaps(Span("cd" * 16, 0, 100))


def test_hit_id_round_trip():
    span = Span(H, 120, 480)
    assert span.id == "abababababab:120-480"
    assert parse_hit_id(span.id) == ("abababababab", 120, 480)
    with pytest.raises(HitNotFoundError):
        parse_hit_id("nonsense")


def test_hit_needs_evidence_for_each_signal():
    ev = Evidence("grep", 1, 2.0, "x")
    with pytest.raises(ConfigError):
        Hit(span=Span(H, 0, 1), signals=("grep", "bm25"), evidence={"grep": ev})
    hit = Hit.single("grep", Span(H, 0, 1), rank=1, score=2.0, score_kind="x", excerpt="e")
    assert hit.to_compact() == {"id": "abababababab:0-1", "path": None, "lines": None,
                                "excerpt": "e", "signals": ["grep"]}
    with pytest.raises(AttributeError):  # frozen
        hit.signals = ("other",)
    assert hit.score is None and hit.rank is None  # a layer's own hit: fusion sets them
    fused = Hit(span=hit.span, signals=hit.signals, evidence=hit.evidence, score=0.5, rank=2)
    assert fused.to_compact()["rank"] == 2 and fused.to_compact()["score"] == 0.5
    for bad in ({"rank": 0}, {"rank": True}, {"score": float("nan")}, {"score": "1"}):
        with pytest.raises(ConfigError):
            Hit(span=hit.span, signals=hit.signals, evidence=hit.evidence, **bad)


def test_evidence_and_runs_check_values():
    with pytest.raises(ConfigError):
        Evidence("grep", 0, 1.0, "x")  # ranks are 1-based
    with pytest.raises(ConfigError):
        Evidence("grep", 1, float("nan"), "x")
    with pytest.raises(ConfigError):
        LayerRun("grep", RunState.SKIPPED)  # a skip needs a reason
    with pytest.raises(ConfigError):
        LayerRun("grep", "ran", coverage=1.5)
    assert LayerRun("grep", "ran").state is RunState.RAN


def test_layer_status_checks_roles_and_coverage():
    kw = dict(name="x", version="1", origin="text", granularity="line", query_format="q", cost="c")
    LayerStatus(roles={"generate"}, coverage=0.5, **kw)
    with pytest.raises(ConfigError):
        LayerStatus(roles={"rerank"}, coverage=0.5, **kw)
    with pytest.raises(ConfigError):
        LayerStatus(roles={"generate"}, coverage=2.0, **kw)
