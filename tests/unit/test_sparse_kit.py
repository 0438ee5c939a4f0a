"""lar.layers.sparse (the kit): vectors, stored records, inverted-index segments, term explanations (no model)."""
from __future__ import annotations

import numpy as np
import pytest

from lar.core.background import ScoreMoments
from lar.layers.kits.lexical.index import SegmentedIndex
from lar.layers.kits.lexical.segments import CorruptSegment
from lar.layers.sparse import SparseVec, dot, top_terms
from lar.layers.sparse.explain import term_matches, token_spans
from lar.layers.sparse.segments import SparseParams, SparseSegmentStore
from lar.layers.sparse.store import CorruptRecord, SparseUnitStore, decode_record, encode_record
from lar.layers.sparse.vectors import pack, unpack

pytest.importorskip("scipy")

VOCAB = 50


def vec(d: dict[int, float]) -> SparseVec:
    return SparseVec(np.array(list(d), dtype=np.int32), np.array(list(d.values()), dtype=np.float32))


def test_top_terms_keeps_the_largest_positive_weights_deterministically():
    row = np.zeros(10, dtype=np.float32)
    row[[1, 3, 4, 7, 9]] = [0.5, 2.0, 0.5, 1.0, -1.0]
    v = top_terms(row, 3)
    assert v.ids.tolist() == [1, 3, 7]  # 0.5 tie between ids 1 and 4: the lower id stays
    assert v.weights.tolist() == [0.5, 2.0, 1.0]
    assert top_terms(row, None).ids.tolist() == [1, 3, 4, 7]
    assert top_terms(np.zeros(5), 4).nnz == 0


def test_sparse_vec_sorts_and_rejects_repeats():
    v = SparseVec(np.array([5, 2]), np.array([1.0, 3.0]))
    assert v.ids.tolist() == [2, 5] and v.weights.tolist() == [3.0, 1.0]
    assert v.get(5) == 1.0 and v.get(4) == 0.0
    with pytest.raises(ValueError):
        SparseVec(np.array([2, 2]), np.array([1.0, 1.0]))


def test_dot_and_pack_round_trip():
    a, b = vec({1: 2.0, 4: 1.0, 9: 0.5}), vec({4: 3.0, 9: 2.0, 11: 7.0})
    assert dot(a, b) == pytest.approx(1.0 * 3.0 + 0.5 * 2.0)
    back = unpack(*pack([a, b, vec({})]))
    assert [x.as_dict() for x in back] == [a.as_dict(), b.as_dict(), {}]


def test_record_round_trip_and_corruption_is_detected():
    spans = [(0, 10), (10, 25)]
    vecs = [vec({3: 1.5, 7: 0.25}), vec({1: 2.0})]
    s2, v2 = decode_record(encode_record(spans, vecs))
    assert s2 == spans and [v.as_dict() for v in v2] == [v.as_dict() for v in vecs]
    import zlib

    raw = bytearray(zlib.decompress(encode_record(spans, vecs)))
    with pytest.raises(CorruptRecord):
        decode_record(zlib.compress(bytes(raw[:-4])))  # truncated
    with pytest.raises(CorruptRecord):
        decode_record(b"not zlib")


def _units():
    rng = np.random.default_rng(0)
    out = []
    for u in range(6):
        spans, vecs = [], []
        for c in range(3):
            ids = rng.choice(VOCAB, size=8, replace=False)
            spans.append((c * 100, c * 100 + 90))
            vecs.append(vec({int(i): float(w) for i, w in zip(ids, rng.uniform(0.1, 2.0, 8))}))
        out.append((f"h{u}", spans, vecs))
    return out


def test_segment_scores_are_exact_dot_products_and_tombstones_hide_units(tmp_path):
    units = _units()
    store = SparseSegmentStore(tmp_path, SparseParams("k1", VOCAB))
    seg = store.build(units)
    q = vec({1: 1.0, 5: 0.5, 17: 2.0, 30: 1.5, 49: 0.25})
    want = sorted(((dot(q, v), h, s) for h, spans, vecs in units for (s, _), v in zip(spans, vecs)
                   if dot(q, v) > 0), key=lambda t: -t[0])
    moments = ScoreMoments()
    got = seg.search(q, 100, {h for h, _, _ in units}, None, moments)
    assert [round(s, 5) for s, _ in got] == [round(w[0], 5) for w in want]
    assert moments.n == 18  # every chunk's score, zeros included
    allowed = {"h0", "h1"}
    got = seg.search(q, 100, allowed, None, None)
    assert {seg.doc(i)[0] for _, i in got} <= allowed


def test_corrupt_segment_file_is_refused(tmp_path):
    store = SparseSegmentStore(tmp_path, SparseParams("k1", VOCAB))
    seg = store.build(_units())
    path = seg.path / "data.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSegment):
        store.load(seg.id)
    with pytest.raises(CorruptSegment):  # other parameters: stale
        SparseSegmentStore(tmp_path, SparseParams("k2", VOCAB)).load(seg.id)


def test_segmented_index_adds_deltas_and_merges_sparse_segments(tmp_path):
    units = _units()
    ustore = SparseUnitStore(tmp_path / "units.sqlite")
    for h, spans, vecs in units:
        ustore.put_vectors(h, "v1", spans, vecs)
    params = SparseParams("v1", VOCAB)
    index = SegmentedIndex(tmp_path, params, ustore, "v1", idf="segment", delta_fraction=10.0,
                           store=SparseSegmentStore(tmp_path, params))
    index.add({"h0", "h1", "h2"})
    index.add({"h3", "h4", "h5"})
    assert len(index.layout.deltas) == 1
    q = vec({i: 1.0 for i in range(VOCAB)})
    both, _ = index.search(q, 100, {h for h, _, _ in units})
    assert len(both) == 18
    index.merge({h for h, _, _ in units if h != "h5"})
    assert not index.layout.deltas
    after, _ = index.search(q, 100, {h for h, _, _ in units})
    assert len(after) == 15 and "h5" not in {r[1] for r in after}
    assert ustore.chunk_vector("h2", "v1", 100, 190).as_dict() == units[2][2][1].as_dict()


def test_term_matches_sum_to_the_score_and_mark_expansions():
    q = vec({1: 2.0, 2: 1.0, 3: 0.5})  # the query's own tokens: 1 and 2; 3 is its expansion
    d = vec({2: 1.5, 3: 4.0, 8: 1.0})  # the chunk's own tokens: 2 and 8; 3 is its expansion
    m = term_matches(q, d, [1, 2], [2, 8], lambda ids: [f"t{i}" for i in ids])
    assert [x.term for x in m] == ["t3", "t2"]  # by contribution: 2.0, then 1.5
    assert sum(x.contribution for x in m) == pytest.approx(dot(q, d))
    assert (m[0].query_expansion, m[0].doc_expansion) == (True, True)
    assert (m[1].query_expansion, m[1].doc_expansion) == (False, False)
    assert m[0].to_dict()["contribution"] == 2.0


def test_token_spans_join_word_pieces():
    ids = np.array([5, 6, 7, 5])
    spans = np.array([[0, 3], [3, 6], [7, 9], [10, 12]])
    assert token_spans(ids, spans, [5, 6]) == [(0, 6), (10, 12)]
    assert token_spans(ids, spans, []) == []
