"""ChunkVectorStore: exact cosine search, replace/drop, compaction, corruption and stops."""
from __future__ import annotations

import numpy as np
import pytest

from lar.core.errors import ConfigError, CorruptStateError
from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

D = 8


def unit(seed, n=3):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, D)).astype(np.float32)
    spans = np.array([[10 * i, 10 * i + 7] for i in range(n)], dtype=np.int64)
    return spans, v


def cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def fill(store, n_units=20, n=3):
    data = {f"h{i:03d}": unit(i, n) for i in range(n_units)}
    for h, (s, v) in data.items():
        store.put(h, s, v)
    return data


def test_search_finds_the_nearest_chunk_with_its_cosine(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    data = fill(st)
    spans, v = data["h007"]
    q = v[1] + 0.01
    res = st.search(q, k=3)
    h, a, b, score = res.hits[0]
    assert (h, a, b) == ("h007", 10, 17)
    assert score == pytest.approx(cos(q, v[1]), abs=2e-3)  # float16 storage
    assert res.fraction == 1.0 and res.n_total == 60 and len(res) == 3
    assert [x[3] for x in res] == sorted((x[3] for x in res), reverse=True)
    # exact: the scores equal the brute-force cosines of the same chunks
    every = {(h, int(s[0])): cos(q, vec) for h, (sp, vs) in data.items() for s, vec in zip(sp, vs)}
    best = sorted(every.items(), key=lambda kv: -kv[1])[:3]
    assert [(h, a) for h, a, _, _ in res] == [k for k, _ in best]
    # restricting to some units
    sub = st.search(q, ["h001", "h002", "nope"], k=100)
    assert {h for h, *_ in sub} == {"h001", "h002"} and len(sub) == 6 and sub.n_total == 6
    assert st.n_rows() == 60 and len(st) == 20 and st.bytes_used() > 60 * D * 2


def test_matrix_maps_rows_to_units_and_spans(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    data = fill(st, 4, n=2)
    m = st.matrix(["h002", "h000"])
    assert m.owners == ["h000", "h002"] and len(m) == 4 and m.vectors.dtype == np.float32
    assert m.row(3) == ("h002", 10, 17)
    np.testing.assert_array_equal(m.unit_index, [0, 0, 1, 1])
    want = data["h002"][1][1] / np.linalg.norm(data["h002"][1][1])
    np.testing.assert_allclose(m.vectors[3], want, atol=1e-3)
    m16 = st.matrix(float32=False)
    assert m16.vectors.dtype == np.float16 and isinstance(m16.vectors, np.memmap)
    spans, vecs = st.get("h001")
    np.testing.assert_array_equal(spans, data["h001"][0])
    assert st.get("missing") is None


def test_replace_drop_and_reopen(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    fill(st, 5)
    s, v = unit(99, n=1)
    st.put("h001", s, v)  # replaces h001's three chunks with one
    assert st.n_rows() == 13
    res = st.search(v[0], ["h001"], k=5)
    assert len(res) == 1 and res.hits[0][3] == pytest.approx(1.0, abs=1e-3)
    st.drop(["h002", "h003"])
    assert st.hashes() == ["h000", "h001", "h004"] and "h002" not in st
    other = ChunkVectorStore(tmp_path, D)  # another instance (or process) sees the same data
    assert other.hashes() == ["h000", "h001", "h004"]
    other.put("h777", *unit(7))
    assert "h777" in st and st.search(unit(7)[1][2], k=1).hits[0][0] == "h777"
    st.close()
    other.close()


def test_dim_errors(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    with pytest.raises(ConfigError):
        st.put("h", np.zeros((1, 2)), np.ones((1, D + 1)))
    with pytest.raises(ConfigError):
        st.put("h", np.zeros((2, 2)), np.ones((1, D)))
    with pytest.raises(ConfigError):
        st.search(np.ones(D + 1))
    st.put("h", np.zeros((1, 2)), np.ones((1, D)))
    with pytest.raises(CorruptStateError, match="delete"):
        ChunkVectorStore(tmp_path, D * 2)


def test_compaction_keeps_results(tmp_path):
    st = ChunkVectorStore(tmp_path, D, compact_min_bytes=10 ** 9)
    fill(st, 30)
    q = unit(1234, 1)[1][0]
    keep = [f"h{i:03d}" for i in range(0, 30, 3)]
    st.drop([h for h in st.hashes() if h not in keep])
    before = st.search(q, k=10)
    assert list(tmp_path.glob("vectors.*")) == [tmp_path / "vectors.0.f16"]
    reader = ChunkVectorStore(tmp_path, D)
    reader.search(q, k=10)  # holds generation 0 open
    assert st.compact() is True
    assert list(tmp_path.glob("vectors.*")) == [tmp_path / "vectors.1.f16"]
    assert (tmp_path / "vectors.1.f16").stat().st_size == 30 * D * 2
    after = st.search(q, k=10)
    assert after.hits == before.hits
    assert reader.search(q, k=10).hits == before.hits  # the other instance follows
    assert st.compact() is False
    assert st.problems() == []


def test_automatic_compaction(tmp_path):
    st = ChunkVectorStore(tmp_path, D, compact_min_bytes=0)
    fill(st, 10)
    st.drop([f"h{i:03d}" for i in range(6)])
    assert (tmp_path / "vectors.1.f16").exists() and st.n_rows() == 12


def test_truncated_pack_drops_rows_into_problems(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    data = fill(st, 5)
    pack = tmp_path / "vectors.0.f16"
    with open(pack, "r+b") as fh:
        fh.truncate(pack.stat().st_size - 5)  # the last unit's last row is cut
    fresh = ChunkVectorStore(tmp_path, D)
    res = fresh.search(data["h004"][1][2], k=20)
    assert "h004" not in {h for h, *_ in res} and len(res) == 12
    [(h, why)] = fresh.problems()
    assert h == "h004" and "truncated" in why
    assert "h004" not in fresh and fresh.n_rows() == 12
    fresh.put("h004", *data["h004"])  # the layer rebuilds it
    assert fresh.problems() == [] and fresh.search(data["h004"][1][2], k=1).hits[0][0] == "h004"


def test_flipped_bytes_fail_the_checksum(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    data = fill(st, 5)
    pack = tmp_path / "vectors.0.f16"
    raw = bytearray(pack.read_bytes())
    raw[2 * 3 * D * 2 + 1] ^= 0x40  # a byte of unit h002
    pack.write_bytes(bytes(raw))
    fresh = ChunkVectorStore(tmp_path, D)
    m = fresh.matrix()
    assert "h002" not in m.owners and len(m) == 12
    assert [h for h, _ in fresh.problems()] == ["h002"]
    assert "checksum" in fresh.problems()[0][1]
    assert "h002" not in {h for h, *_ in fresh.search(data["h002"][1][0], k=20)}


def test_torn_tail_is_skipped(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    fill(st, 2)
    with open(tmp_path / "vectors.0.f16", "ab") as fh:
        fh.write(b"\x01" * 7)  # a killed append: bytes no row refers to
    s, v = unit(50)
    st.put("h050", s, v)
    fresh = ChunkVectorStore(tmp_path, D)
    assert fresh.search(v[0], k=1).hits[0][:3] == ("h050", 0, 7) and fresh.problems() == []


def test_should_stop_returns_partial(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    fill(st, 10, n=4)
    calls = []
    res = st.search(np.ones(D), k=5, block_rows=8, should_stop=lambda: calls.append(1) or True)
    assert res.n_scored == 8 and res.fraction == pytest.approx(0.2) and len(res) == 5
    assert len(calls) == 1
    full = st.search(np.ones(D), k=5, block_rows=8, should_stop=lambda: False)
    assert full.fraction == 1.0 and full.n_scored == 40


def test_half_conversion_is_exact():
    from lar.layers.kits.vectors.chunkrows import iter_f32
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1300, 5)).astype(np.float16)
    x[0] = [0.0, -0.0, 6e-8, -3e-5, 65504]  # zeros, subnormals, the largest half
    rows = np.array([5, 6, 7, 0, 1299] + list(range(100, 1290)), dtype=np.int64)
    got = np.concatenate([blk.copy() for _, blk in iter_f32(x, rows)])
    want = x[rows].astype(np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # bit for bit, signs too


def test_float32_store(tmp_path):
    st = ChunkVectorStore(tmp_path, D, "float32")
    data = fill(st, 6)
    q = data["h004"][1][0]
    h, a, _, score = st.search(q, k=1).hits[0]
    assert (h, a) == ("h004", 0) and score == pytest.approx(1.0, abs=1e-6)
    assert (tmp_path / "vectors.0.f32").exists()
    with pytest.raises(CorruptStateError):
        ChunkVectorStore(tmp_path, D, "float16")
    with pytest.raises(ConfigError):
        ChunkVectorStore(tmp_path / "other", D, "int8")


def test_search_reports_the_background_of_every_score_it_computed(tmp_path):
    st = ChunkVectorStore(tmp_path, D)
    data = fill(st)
    q = data["h003"][1][0] + 0.05
    every = np.array([cos(q, vec) for _, (_, vs) in data.items() for vec in vs])
    bg = st.search(q, k=3, block_rows=7).background  # several blocks
    assert bg.n == 60
    assert bg.mean == pytest.approx(every.mean(), abs=2e-3)  # float16 storage
    assert bg.std == pytest.approx(every.std(), rel=1e-2)
    sub = st.search(q, ["h001", "h002"], k=100).background  # only the searched units
    assert sub.n == 6
    assert sub.mean == pytest.approx(np.mean([cos(q, v) for h in ("h001", "h002") for v in data[h][1]]), abs=2e-3)
