"""Fusion gives every hit its fused score and rank, and says what scale the scores are on."""
import pytest

from lar.core.types import Hit, Span
from lar.fusion.pipeline import FusionSettings, fuse_hits

A, B, C = "a" * 32, "b" * 32, "c" * 32


def _list(layer, *hashes):
    return [Hit.single(layer, Span(h, 0, 10), rank=i, score=10.0 - i, score_kind="x")
            for i, h in enumerate(hashes, 1)]


def test_rrf_scores_and_ranks_are_set_on_every_fused_hit():
    fused = fuse_hits({"grep": _list("grep", A, B), "bm25": _list("bm25", B, C)},
                      FusionSettings("rrf", c=60))
    assert [h.hash for h in fused.hits] == [B, A, C]
    assert [h.rank for h in fused.hits] == [1, 2, 3]
    assert fused.hits[0].score == pytest.approx(1 / 62 + 1 / 61)  # grep #2, bm25 #1
    assert fused.hits[1].score == pytest.approx(1 / 61)
    assert fused.scale == "rrf"


def test_each_policy_names_its_scale():
    lists = {"grep": _list("grep", A, B), "bm25": _list("bm25", B, C)}
    assert fuse_hits(lists, FusionSettings("combsum")).scale == "combsum-minmax"
    assert fuse_hits(lists, FusionSettings("route-unique")).scale == "rrf"
    adaptive = fuse_hits(lists, FusionSettings("adaptive"))
    assert adaptive.scale == "rrf" or adaptive.scale.startswith("adaptive-")
    scores = [h.score for h in adaptive.hits]
    assert scores == sorted(scores, reverse=True) and all(s is not None for s in scores)
