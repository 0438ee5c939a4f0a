"""Builds at the encoder's speed (issue 26, direction 5): a build pass encodes several small
units in one encoder pass (``lar.engine.batching``), with the same encodings and hits as one
pass per unit."""
from __future__ import annotations

import numpy as np
import pytest

import lar
from lar.core.layer import Unit
from lar.encoders.encoder import get_encoder
from lar.engine.batching import ENV_BUILD_BATCH, batches

pytestmark = pytest.mark.slow  # loads the packaged MiniLM

TEXTS = [
    b"def parse_deadline(value):\n    \"\"\"Turn a timebox into seconds.\"\"\"\n    return float(value)\n",
    b"Reciprocal rank fusion adds one over the constant plus the rank of each list.",
    b"   \n\n",  # blank: no chunk
    ("A longer unit. " * 400).encode(),  # several windows
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9: UTF-8 byte spans".encode(),
]


def _spans(text: bytes):
    return [(0, len(text) // 2), (len(text) // 2, len(text))] if len(text) > 100 else [(0, len(text))]


def test_many_units_in_one_pass_encode_as_each_alone():
    enc = get_encoder()
    alone = [enc.encode_spans(t, _spans(t)) for t in TEXTS]
    together = enc.encode_spans_many([(t, _spans(t)) for t in TEXTS])
    assert len(together) == len(TEXTS)
    for a, b in zip(alone, together):
        assert a.n_tokens == b.n_tokens and a.n_chunks == b.n_chunks
        assert np.array_equal(a.token_spans, b.token_spans)
        assert np.array_equal(a.chunk_spans, b.chunk_spans)
        assert np.array_equal(a.chunk_starts, b.chunk_starts)
        if a.n_tokens:  # padding to another batch's width moves the floats by rounding only
            assert np.abs(a.tokens_f32() - b.tokens_f32()).max() < 1e-4
            assert np.abs(a.pooled - b.pooled).max() < 1e-4
    assert together[2].n_tokens == 0


def test_batches_cut_by_bytes_and_units():
    us = [Unit(f"f{i}", f"h{i}", s) for i, s in enumerate([10, 10, 30, 5, 100, 1, 1])]
    got = [[u.path for u in run] for run in batches(us, max_bytes=40, max_units=3)]
    assert got == [["f0", "f1"], ["f2", "f3"], ["f4"], ["f5", "f6"]]
    assert [[u.path for u in r] for r in batches(us[:1], max_bytes=1)] == [["f0"]]


def _corpus(root, n=12):
    root.mkdir()
    for i in range(n):
        (root / f"note_{i:02d}.md").write_text(
            f"# Note {i}\n\nThe anytime search number {i} returns what it has when time is up; "
            f"layer {i % 3} answers first.\n")
    return root


def _forwards(eng, monkeypatch):
    enc = eng.layers["dense"].shared.encoder
    calls = []
    real = type(enc)._forward

    def counted(self, windows, *, is_query):
        if not is_query:
            calls.append(len(windows))
        return real(self, windows, is_query=is_query)

    monkeypatch.setattr(type(enc), "_forward", counted)
    return calls


@pytest.mark.parametrize("batched", [True, False])
def test_a_build_of_small_units_fills_encoder_batches(tmp_path, monkeypatch, batched):
    monkeypatch.setenv(ENV_BUILD_BATCH, "1" if batched else "0")
    with lar.open(_corpus(tmp_path / "c"), state=tmp_path / "s") as eng:
        calls = _forwards(eng, monkeypatch)
        rep = eng.build(timebox=600, layers=["dense", "late"])
        assert rep["layers"]["dense"]["ok"] == 12 and rep["layers"]["late"]["ok"] == 12
        # one window a note: twelve forward passes of one window each, or one of twelve
        assert calls == ([12] if batched else [1] * 12)
        assert eng.layers["dense"].shared.encoded == 12


def test_batched_and_unit_by_unit_builds_give_the_same_hits(tmp_path, monkeypatch):
    got = {}
    for batched in ("1", "0"):
        monkeypatch.setenv(ENV_BUILD_BATCH, batched)
        with lar.open(_corpus(tmp_path / f"c{batched}"), state=tmp_path / f"s{batched}") as eng:
            eng.build(timebox=600, layers=["dense", "late"])
            got[batched] = {
                layer: [(h.path, h.span.start, round(h.score, 4)) for h in
                        eng.search("what does the anytime search return", layers=[layer], k=5,
                                   timebox=60).hits]
                for layer in ("dense", "late")}
    assert got["1"] == got["0"] and len(got["1"]["dense"]) == 5


def test_the_background_builder_builds_in_batches_too(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_BUILD_BATCH, "1")
    with lar.open(_corpus(tmp_path / "c"), state=tmp_path / "s") as eng:
        calls = _forwards(eng, monkeypatch)
        eng.build(timebox=600, layers=["dense"], scope="note_00.md")  # loads the model
        calls.clear()
        eng.start_background_build()
        import time
        t_end = time.monotonic() + 300
        while eng.layers["dense"].coverage(eng.scope_view()) < 1.0 and time.monotonic() < t_end:
            time.sleep(0.2)
        eng.stop_background_build()
        assert eng.layers["dense"].coverage(eng.scope_view()) == 1.0
        # 11 notes left, in background steps of at most 8 units: two passes
        assert len([c for c in calls if c > 1]) >= 1 and max(calls) <= 8
