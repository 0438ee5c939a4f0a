"""Corpus-wide BM25 statistics over segments (lar.layers.kits.lexical.corpus_stats): the scores
of a main segment plus deltas with tombstones equal those of one clean segment, and those equal
bm25s's own."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("bm25s")

from lar.layers.kits.lexical.corpus_stats import corpus_stats, live_scores, query_idfs  # noqa: E402
from lar.layers.kits.lexical.segments import SegmentParams, SegmentStore  # noqa: E402

DOCS = {
    "a" * 32: [["river", "platypus", "river"], ["wombat", "burrow"]],
    "b" * 32: [["copper", "river", "violet", "violet", "ember"]],
    "c" * 32: [["platypus"], ["ember", "falcon", "river", "glacier"]],
    "d" * 32: [["wombat", "wombat", "copper", "lantern", "river", "falcon"]],
}
QUERY = ["river", "platypus", "wombat", "ember", "nowhere"]
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


def _rows(hashes):
    return [(h, [(i * 10, i * 10 + 9) for i in range(len(DOCS[h]))], DOCS[h]) for h in hashes]


def _scores(store, segs, live, method, k1=1.5, b=0.75):
    """{(unit, start, end): score} of every live doc with a positive score."""
    stats = corpus_stats(segs, frozenset(live))
    idfs = query_idfs(segs, QUERY, stats, method)
    out = {}
    for seg, alive in zip(segs, stats.alive):
        sc = live_scores(seg, QUERY, idfs, stats.avgdl, k1, b, method)
        for i in np.flatnonzero(alive):
            if sc[i] > 0:
                out[seg.doc(int(i))] = float(sc[i])
    return out


@pytest.mark.parametrize("method", METHODS)
def test_live_scores_of_one_clean_segment_equal_bm25s_scores(tmp_path, method):
    store = SegmentStore(tmp_path, SegmentParams("k", method=method))
    seg = store.build(_rows(sorted(DOCS)))
    mine = _scores(store, [seg], DOCS, method)
    present = [t for t in QUERY if t in seg.model.vocab_dict]
    theirs = np.asarray(seg.model.get_scores(present), dtype=np.float64)
    if seg.model.nonoccurrence_array is not None:  # bm25l, bm25+: stored less this constant
        theirs -= sum(float(seg.model.nonoccurrence_array[seg.model.vocab_dict[t]]) for t in present)
    expected = {seg.doc(i): float(s) for i, s in enumerate(theirs) if s > 1e-9}
    assert mine.keys() == expected.keys()
    assert [mine[d] for d in sorted(mine)] == pytest.approx([expected[d] for d in sorted(mine)], rel=1e-5)


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_a_main_segment_with_tombstones_and_deltas_scores_like_a_clean_build(tmp_path, method):
    params = SegmentParams("k", method=method)
    hist = SegmentStore(tmp_path / "hist", params)
    main = hist.build(_rows(["a" * 32, "b" * 32, "c" * 32]))
    delta = hist.build(_rows(["d" * 32, "c" * 32]))  # c also in the delta: counted once
    live = {"a" * 32, "c" * 32, "d" * 32}  # b is a tombstone
    clean = SegmentStore(tmp_path / "clean", params).build(_rows(sorted(live)))
    got = _scores(hist, [main, delta], live, method)
    want = _scores(None, [clean], live, method)
    assert got.keys() == want.keys() and got
    assert [got[d] for d in sorted(got)] == pytest.approx([want[d] for d in sorted(got)], rel=1e-6)
    stats = corpus_stats([main, delta], frozenset(live))
    assert stats.n_docs == 5 and stats.avgdl == pytest.approx((3 + 2 + 1 + 4 + 6) / 5)
    assert stats.df([main, delta], "river") == 3  # a's first doc, c's second, d (b left out)


def test_term_frequencies_follow_the_score_matrix(tmp_path):
    seg = SegmentStore(tmp_path, SegmentParams("k")).build(_rows(["a" * 32, "d" * 32]))
    tid = seg.model.vocab_dict["river"]
    a, e = int(seg.model.scores["indptr"][tid]), int(seg.model.scores["indptr"][tid + 1])
    docs = list(seg.model.scores["indices"][a:e])
    assert {int(d): int(t) for d, t in zip(docs, seg.tf[a:e])} == {0: 2, 2: 1}
    assert list(seg.doclen) == [3, 2, 6]
