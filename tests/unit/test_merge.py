"""Unit tests for lar.fusion.grouping: grouping the hits of different layers that point at one place."""
from __future__ import annotations

import pytest

from lar.core.errors import ConfigError
from lar.fusion.route_unique import route_unique
from lar.fusion.grouping import Group, group_hits, merged_hit, runs_for_fusion
from lar.core.types import Evidence, Hit, Span

HA = "a" * 32
HB = "b" * 32


def hit(layer: str, h: str, start: int, end: int, rank: int = 1, score: float = 1.0, **kw) -> Hit:
    return Hit.single(layer, Span(h, start, end), rank=rank, score=score, score_kind=f"{layer}-score", **kw)


def test_grep_line_inside_chunk_forms_one_group_with_line_as_representative():
    chunk = hit("bm25", HA, 0, 1000, score=7.5, sub_spans=[(120, 130)], excerpt="the chunk")
    line = hit("grep", HA, 100, 150, score=1.0, sub_spans=[(120, 130)], excerpt="the line")
    groups = group_hits({"bm25": [chunk], "grep": [line]})
    assert len(groups) == 1
    g = groups[0]
    assert g.span == Span(HA, 100, 150)
    assert g.key == Span(HA, 100, 150).id == "aaaaaaaaaaaa:100-150"
    assert dict(g.members) == {"bm25": chunk, "grep": line}
    assert dict(g.ranks) == {"bm25": 1, "grep": 1}

    m = merged_hit(g)
    assert m.span == g.span
    assert m.signals == ("bm25", "grep")
    assert m.excerpt == "the line"
    assert m.evidence["bm25"].score == 7.5
    assert m.evidence["bm25"].sub_spans == ((120, 130),)  # kept as given, absolute
    assert m.evidence["grep"].score_kind == "grep-score"


def test_representative_tie_goes_to_earliest_layer():
    a = hit("dense", HA, 0, 50, excerpt="dense")
    b = hit("bm25", HA, 25, 75, excerpt="bm25")
    g = group_hits({"dense": [a], "bm25": [b]})[0]
    assert g.span == Span(HA, 0, 50)
    assert merged_hit(g).excerpt == "dense"


def test_whole_file_span_joins_only_the_best_group():
    chunks = [hit("bm25", HA, 0, 100, 1), hit("bm25", HA, 200, 300, 2), hit("bm25", HA, 400, 500, 3)]
    # the file-level layer ranks it first; it overlaps all three chunks
    whole = hit("path", HA, 0, 1000, 1)
    groups = group_hits({"bm25": chunks, "path": [whole]})
    assert [g.key for g in groups] == [c.span.id for c in chunks]
    assert dict(groups[0].members) == {"bm25": chunks[0], "path": whole}
    assert all("path" not in g.members for g in groups[1:])
    assert groups[0].span == Span(HA, 0, 100)


def test_best_group_is_by_best_rank_in_any_layer():
    # bm25 ranks the chunk at 200 first; dense finds the chunk at 0 first and the one at 200 never
    bm25 = [hit("bm25", HA, 200, 300, 1), hit("bm25", HA, 0, 100, 2)]
    dense = [hit("dense", HB, 0, 10, 1), hit("dense", HA, 0, 100, 2)]
    whole = hit("path", HA, 0, 1000, 1)
    groups = group_hits({"bm25": bm25, "dense": dense, "path": [whole]})
    by = {g.key: g for g in groups}
    # group A:0-100 has ranks bm25 2, dense 2 (best 2); group A:200-300 has bm25 1 (best 1)
    assert dict(by[Span(HA, 0, 100).id].ranks) == {"bm25": 2, "dense": 2}
    assert "path" in by[Span(HA, 200, 300).id].members
    assert "path" not in by[Span(HA, 0, 100).id].members


def test_same_layer_hits_never_merge():
    lines = [hit("grep", HA, 10, 20, 1), hit("grep", HA, 15, 30, 2), hit("grep", HA, 10, 40, 3)]
    groups = group_hits({"grep": lines})
    assert len(groups) == 3
    assert [dict(g.ranks) for g in groups] == [{"grep": 1}, {"grep": 2}, {"grep": 3}]


def test_identical_span_in_one_layer_keeps_first():
    first = hit("grep", HA, 10, 20, 1, score=3.0)
    dup = hit("grep", HA, 10, 20, 2, score=1.0)
    other = hit("grep", HA, 50, 60, 3)
    groups = group_hits({"grep": [first, dup, other]})
    assert len(groups) == 2
    assert groups[0].members["grep"] is first
    assert dict(groups[1].ranks) == {"grep": 2}  # rank among the layer's distinct places


def test_different_hashes_never_merge():
    groups = group_hits({"bm25": [hit("bm25", HA, 0, 100)], "grep": [hit("grep", HB, 0, 100)]})
    assert len(groups) == 2
    assert {g.span.hash for g in groups} == {HA, HB}


def test_non_overlapping_spans_do_not_merge():
    groups = group_hits({"bm25": [hit("bm25", HA, 0, 100)], "grep": [hit("grep", HA, 100, 120)]})
    assert len(groups) == 2


def test_second_hit_of_a_layer_goes_to_a_new_group_when_the_group_has_that_layer():
    chunk = hit("bm25", HA, 0, 1000)
    l1, l2 = hit("grep", HA, 10, 20, 1), hit("grep", HA, 500, 520, 2)
    groups = group_hits({"bm25": [chunk], "grep": [l1, l2]})
    assert [g.key for g in groups] == [Span(HA, 10, 20).id, Span(HA, 500, 520).id]
    assert dict(groups[0].ranks) == {"bm25": 1, "grep": 1}
    assert dict(groups[1].ranks) == {"grep": 2}


def test_exact_span_match_keeps_group_keys_unique():
    # bm25: S, with grep's T overlapping it, then grep's copy of S: it cannot join S's group
    # (grep is already there) and must not start a second group keyed S
    s, t = Span(HA, 0, 10), Span(HA, 5, 40)
    groups = group_hits(
        {
            "bm25": [hit("bm25", HA, 0, 10)],
            "grep": [hit("grep", HA, 5, 40, 1), hit("grep", HA, 0, 10, 2), hit("grep", HA, 90, 95, 3)],
            "dense": [hit("dense", HA, 0, 10)],
        }
    )
    assert [g.key for g in groups] == [s.id, Span(HA, 90, 95).id]
    assert dict(groups[0].ranks) == {"bm25": 1, "grep": 1, "dense": 1}
    assert groups[0].members["grep"].span == t
    assert dict(groups[1].ranks) == {"grep": 2}


def test_runs_for_fusion_and_route_unique():
    bm25 = [hit("bm25", HA, 0, 1000, 1, 9.0), hit("bm25", HB, 0, 500, 2, 4.0)]
    grep = [hit("grep", HA, 100, 150, 1, 1.0), hit("grep", HA, 700, 720, 2, 1.0)]
    dense = [hit("dense", HB, 400, 900, 1, 0.8)]
    per_layer = {"bm25": bm25, "grep": grep, "dense": dense, "empty": []}
    groups = group_hits(per_layer)
    k1, k2, k3 = Span(HA, 100, 150).id, Span(HB, 0, 500).id, Span(HA, 700, 720).id
    assert [g.key for g in groups] == [k1, k2, k3]
    runs = runs_for_fusion(groups, per_layer)
    assert runs == {
        "bm25": [(k1, 9.0), (k2, 4.0)],
        "grep": [(k1, 1.0), (k3, 1.0)],
        "dense": [(k2, 0.8)],
        "empty": [],
    }
    # n=3, k=2: no core; bm25 -> k1, grep -> k3 (k1 taken), dense not reached
    assert [f.key for f in route_unique(runs, k=2)] == [k1, k3]
    # k=3: dense -> k2 too; RRF order k1 (2/61), k2 (1/61 + 1/62), k3 (1/62)
    assert [f.key for f in route_unique(runs, k=3)] == [k1, k2, k3]


def test_merged_hit_ranks_and_override():
    chunk = hit("bm25", HA, 0, 1000, rank=7, score=2.0, details={"bm25": 2.0}, query="q")
    line = hit("grep", HA, 10, 20, rank=9, excerpt="line", query="re")
    g = group_hits({"bm25": [hit("bm25", HB, 0, 5), chunk], "grep": [line]})[1]
    assert dict(g.ranks) == {"bm25": 2, "grep": 1}
    m = merged_hit(g)
    assert m.evidence["bm25"].rank == 2  # the group's rank, not the hit's own 7
    assert m.evidence["grep"].rank == 1
    assert m.evidence["bm25"].details == {"bm25": 2.0}
    assert m.evidence["bm25"].query == "q"
    m2 = merged_hit(g, ranks_override={"grep": 4})
    assert m2.evidence["grep"].rank == 4 and m2.evidence["bm25"].rank == 2
    with pytest.raises(ConfigError, match="not members"):
        merged_hit(g, ranks_override={"dense": 1})
    with pytest.raises(ConfigError, match=">= 1"):
        merged_hit(g, ranks_override={"grep": 0})


def test_bad_input():
    with pytest.raises(ConfigError, match="exactly the one"):
        group_hits({"grep": [hit("bm25", HA, 0, 1)]})
    with pytest.raises(ConfigError, match="expected a Hit"):
        group_hits({"grep": ["not a hit"]})
    with pytest.raises(ConfigError):
        group_hits([hit("grep", HA, 0, 1)])  # type: ignore[arg-type]
    ev = Evidence("a", 1, 1.0, "s")
    two = Hit(Span(HA, 0, 1), ("a", "b"), {"a": ev, "b": Evidence("b", 1, 1.0, "s")})
    with pytest.raises(ConfigError):
        group_hits({"a": [two]})


def test_group_is_frozen_and_checked():
    g = group_hits({"grep": [hit("grep", HA, 0, 5)]})[0]
    with pytest.raises(AttributeError):
        g.key = "x"  # type: ignore[misc]
    with pytest.raises(ConfigError):
        Group(key="wrong", span=g.span, members=g.members, ranks=g.ranks)
    assert group_hits({}) == []


def _reference_groups(per_layer):
    """The grouping rules read literally (every group checked for overlap): the slow oracle the
    indexed group_hits must match."""
    groups = []  # [order, members, ranks, rep]
    for layer, hits in per_layer.items():
        seen, count = set(), 0
        for hit in hits:
            if hit.span in seen:
                continue
            seen.add(hit.span)
            target = next((g for g in groups if g[3] == hit.span), None)
            if target is not None and layer in target[1]:
                continue
            if target is None:
                cands = [g for g in groups if layer not in g[1] and g[3].hash == hit.span.hash
                         and any(m.span.overlaps(hit.span) for m in g[1].values())]
                if cands:
                    target = min(cands, key=lambda g: (min(g[2].values()), g[0]))
                else:
                    target = [len(groups), {}, {}, None]
                    groups.append(target)
            count += 1
            target[1][layer] = hit
            target[2][layer] = count
            if target[3] is None or hit.span.length < target[3].length:
                target[3] = hit.span
    return [(g[3].id, dict(g[2]), {n: h.span for n, h in g[1].items()}) for g in groups]


def test_group_hits_matches_the_literal_rules_on_random_lists():
    import random

    from lar.core.types import Hit, Span
    from lar.fusion.grouping import group_hits

    rnd = random.Random(7)
    hashes = [c * 16 for c in ("ab", "cd", "ef")]
    for _ in range(60):
        per_layer = {}
        for layer in ("a", "b", "c")[: rnd.randint(1, 3)]:
            hits = []
            for rank in range(rnd.randint(0, 25)):
                s = rnd.randrange(0, 200)
                span = Span(rnd.choice(hashes), s, s + rnd.choice((0, 5, 20, 80)))
                hits.append(Hit.single(layer, span, rank=rank + 1, score=1.0 / (rank + 1), score_kind="x"))
            per_layer[layer] = hits
        got = [(g.key, dict(g.ranks), {n: h.span for n, h in g.members.items()}) for g in group_hits(per_layer)]
        assert got == _reference_groups(per_layer)
