"""Size levers: token pooling, PCA, int8 and their byte costs."""
from __future__ import annotations

import numpy as np
import pytest

from lar.core.errors import ConfigError, CorruptStateError
from lar.encoders.encoding import UnitEncoding
from lar.layers.kits.vectors.levers import (apply_pca, bytes_per_token, fit_pca, load_pca, pool_tokens,
                                quantize_int8)


def norm(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def enc_from(tokens, chunks, dtype=np.float32, pooled=True):
    n = tokens.shape[0]
    spans = np.stack([np.arange(n) * 3, np.arange(n) * 3 + 2], axis=1).astype(np.int64)
    cs = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64)
    ends = np.cumsum(chunks) - 1
    cp = np.stack([spans[cs, 0], spans[ends, 1]], axis=1)
    pool = norm(np.ones((len(chunks), 4), np.float32)) if pooled else None
    return UnitEncoding("m", "c", tokens.astype(dtype), spans, cs, cp, pool)


def test_adjacent_pooling_gives_group_means():
    x = np.array([[1, 0], [0, 1], [1, 1], [3, 4], [1, 0], [3, 3], [0, 2]], np.float32)
    enc = enc_from(x, [7])
    out = pool_tokens(enc, 3, "adjacent")
    want = norm(np.array([[2 / 3, 2 / 3], [7 / 3, 7 / 3], [0, 2]], np.float32))
    np.testing.assert_allclose(out.tokens, want, atol=1e-6)
    np.testing.assert_array_equal(out.chunk_starts, [0])
    # each pooled token carries the span of its member closest to the group mean
    assert out.token_spans.tolist() == enc.token_spans[[2, 5, 6]].tolist()
    np.testing.assert_array_equal(out.pooled, enc.pooled)
    assert out.chunk_spans.tolist() == enc.chunk_spans.tolist()


def test_ward_pools_two_groups_to_their_means():
    rng = np.random.default_rng(0)
    a, b = np.eye(16, dtype=np.float32)[0], np.eye(16, dtype=np.float32)[1]
    g1 = norm(a + 0.02 * rng.normal(size=(4, 16)).astype(np.float32))
    g2 = norm(b + 0.02 * rng.normal(size=(4, 16)).astype(np.float32))
    x = np.concatenate([g1[:2], g2[:2], g1[2:], g2[2:]])  # interleaved in the text
    x = np.concatenate([x, norm(rng.normal(size=(3, 16)).astype(np.float32))])
    enc = enc_from(x, [8, 3], pooled=False)
    out = pool_tokens(enc, 4, "ward")
    assert out.n_chunks == 2 and out.chunk_starts.tolist() == [0, 2]
    assert out.n_tokens == 2 + 1  # ceil(8/4) and ceil(3/4)
    first = out.tokens[:2]
    means = norm(np.stack([g1.mean(0), g2.mean(0)]))
    got = sorted(first.tolist(), key=lambda r: -r[0])
    np.testing.assert_allclose(got, means, atol=1e-6)
    member = {tuple(s) for s in enc.token_spans.tolist()}
    assert all(tuple(s) in member for s in out.token_spans.tolist())
    assert out.token_spans[0, 0] <= out.token_spans[1, 0]  # ordered by span start
    # the first chunk's pooled spans come from that chunk; the second from the second
    assert out.token_spans[:2, 0].max() < enc.chunk_spans[0, 1]
    assert out.token_spans[2, 0] >= enc.chunk_spans[1, 0]


def test_pooling_keeps_representation_and_factor_one_copies():
    x = norm(np.random.default_rng(1).normal(size=(7, 6)).astype(np.float32))
    enc = enc_from(x, [4, 3], dtype=np.float16)
    same = pool_tokens(enc, 1)
    assert same.tokens.dtype == np.float16 and same is not enc
    np.testing.assert_array_equal(same.tokens, enc.tokens)
    q = pool_tokens(quantize_int8(enc), 3)
    assert q.tokens.dtype == np.int8 and q.n_tokens == 2 + 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError):
            pool_tokens(enc, bad)
    with pytest.raises(ConfigError):
        pool_tokens(enc, 2, "kmeans")


def test_pca_on_a_plane_preserves_cosines(tmp_path):
    rng = np.random.default_rng(2)
    basis = np.linalg.qr(rng.normal(size=(12, 2)))[0].T  # (2, 12) orthonormal
    x = (rng.normal(size=(40, 2)) @ basis).astype(np.float32)  # a 2-D subspace through 0
    model = fit_pca(x, 2)
    assert model.components.shape == (2, 12) and model.dims == 2 and model.source_dim == 12
    y = model.project(x)
    xc = x - model.mean  # PCA centres: cosines are preserved around the mean
    c_in = norm(xc) @ norm(xc).T
    np.testing.assert_allclose(y @ y.T, c_in, atol=1e-5)
    assert not model.project(np.zeros((1, 12), np.float32)).any()
    enc = enc_from(norm(x[:6]), [3, 3], dtype=np.float16)
    out = apply_pca(enc, model)
    assert out.dim == 2 and out.tokens.dtype == np.float16
    np.testing.assert_array_equal(out.pooled, enc.pooled)
    model.save(tmp_path / "pca.npz")
    back = load_pca(tmp_path / "pca.npz")
    assert back.id == model.id and np.array_equal(back.components, model.components)
    assert fit_pca(x, 2).id == model.id  # deterministic


def test_pca_errors(tmp_path):
    x = np.random.default_rng(3).normal(size=(10, 4)).astype(np.float32)
    for dims in (0, 4, 5):
        with pytest.raises(ConfigError):
            fit_pca(x, dims)
    model = fit_pca(x, 2)
    with pytest.raises(ConfigError):
        apply_pca(enc_from(norm(np.ones((2, 5), np.float32)), [2]), model)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(CorruptStateError, match="delete"):
        load_pca(tmp_path / "bad.npz")
    np.savez(tmp_path / "tamper.npz", mean=model.mean, components=model.components * 2,
             id=np.array(model.id), format=np.array(1))
    with pytest.raises(CorruptStateError, match="id check"):
        load_pca(tmp_path / "tamper.npz")


def test_int8_dequantises_within_a_step():
    x = np.random.default_rng(4).normal(size=(50, 384)).astype(np.float32)
    x[3] = 0
    enc = enc_from(norm(np.where(x.any(1, keepdims=True), x, 1)) * (x.any(1, keepdims=True)),
                   [20, 30])
    q = quantize_int8(enc)
    assert q.tokens.dtype == np.int8 and q.token_scales.dtype == np.float32
    assert q.token_scales[3] == 1 and not q.tokens[3].any()
    err = np.abs(q.tokens_f32() - enc.tokens).max(axis=1)
    amax = np.abs(enc.tokens).max(axis=1)
    assert (err <= amax / 127 + 1e-7).all()
    assert bytes_per_token(enc) == 768 + 8  # float32 is stored as float16
    assert bytes_per_token(q) == 388 + 8
    assert bytes_per_token(enc_from(np.ones((1, 128), np.float32), [1])) == 256 + 8
