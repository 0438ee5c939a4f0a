"""A third-party layer that implements only the protocol (no lar base class) is built and
searched like lar's own: the scheduler builds it through ``build(units, cancel)``, and the file
index's change cursor decides what its next pass builds."""
from __future__ import annotations

import threading

import pytest

import lar
from lar.core.layer import ProtocolLayer
from lar.core.registry import register_layer, unregister_layer
from lar.core.types import Evidence, Hit, LayerStatus, Span


class WordCountLayer:
    """Built lazily: remembers, per content hash, the number of words; answers 'count:N'."""

    name = "wordcount"
    version = "1"
    roles = frozenset({"generate"})
    always_current = False
    built: list[str] = []  # every hash built, in order, across engines (class-level log)

    def __init__(self, ctx):
        self.ctx = ctx
        self.counts: dict[str, int] = {}

    def applies(self, scope) -> bool:
        return True

    def status(self, scope) -> LayerStatus:
        n = len(scope)
        done = sum(1 for u in scope.units() if u.hash in self.counts)
        return LayerStatus(name=self.name, version=self.version, roles=self.roles, origin="text",
                           granularity="unit", coverage=done / n if n else 1.0,
                           query_format="count:N", cost="lazy", units=n, built_units=done)

    async def search(self, query, scope, budget, candidates=None):
        want = int(str(query).split(":")[1])
        out = []
        for u in scope.units():
            if self.counts.get(u.hash) == want:
                ev = Evidence(self.name, len(out) + 1, 1.0, "match")
                out.append(Hit(Span(u.hash, 0, 0), (self.name,), {self.name: ev}))
        return out

    async def build(self, units, cancel: threading.Event) -> None:
        for u in units:
            if cancel.is_set():
                return
            text = self.ctx.reader.document(u.hash, u.path).text
            self.counts[u.hash] = len(text.split())
            WordCountLayer.built.append(u.hash)


@pytest.fixture
def engine(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.txt").write_text("one two three\n")
    (root / "b.txt").write_text("one two\n")
    (root / "c.txt").write_text("alpha beta gamma\n")
    register_layer(WordCountLayer, source="test")
    WordCountLayer.built = []
    eng = lar.open(root, state=tmp_path / "state")
    yield eng
    eng.close()
    unregister_layer("wordcount")


def paths_found(eng, query):
    res = eng.search(query, layers=["wordcount"], timebox=5)
    return sorted(p for h in res.hits for p in h.paths)


def test_protocol_only_layer_is_wrapped_and_built_through_build(engine):
    layer = engine.layers["wordcount"]
    assert isinstance(layer, ProtocolLayer)
    assert layer.coverage(engine.scope_view()) == 0.0
    report = engine.build(timebox=30, layers=["wordcount"])
    assert report["layers"]["wordcount"] == {"state": "ran", "ok": 3, "skipped": 0, "failed": 0,
                                             "pending": 0, "coverage": 1.0}
    assert len(WordCountLayer.built) == 3
    assert paths_found(engine, "count:3") == ["a.txt", "c.txt"]
    assert paths_found(engine, "count:2") == ["b.txt"]


def test_the_change_cursor_feeds_the_next_pass(engine, tmp_path):
    engine.build(timebox=30, layers=["wordcount"])
    WordCountLayer.built = []
    assert engine.build(timebox=30, layers=["wordcount"])["layers"]["wordcount"]["ok"] == 0
    (tmp_path / "corpus" / "b.txt").write_text("one two three four\n")
    engine.index_now()
    again = engine.build(timebox=30, layers=["wordcount"])["layers"]["wordcount"]
    assert again["ok"] == 1 and again["pending"] == 0
    b = {r.path: r.hash for r in engine.index.live()}["b.txt"]
    assert WordCountLayer.built == [b]
    assert paths_found(engine, "count:4") == ["b.txt"]


def test_a_new_engine_resumes_from_the_cursor(engine, tmp_path):
    engine.build(timebox=30, layers=["wordcount"])
    engine.close()
    WordCountLayer.built = []
    (tmp_path / "corpus" / "d.txt").write_text("x\n")
    eng2 = lar.open(tmp_path / "corpus", state=tmp_path / "state")
    try:
        layer = eng2.layers["wordcount"]
        d = {r.path: r.hash for r in eng2.index.live()}["d.txt"]
        assert [u.hash for u in layer.pending(eng2.scope_view().units())] == [d]
        eng2.build(timebox=30, layers=["wordcount"])
        assert WordCountLayer.built == [d]
    finally:
        eng2.close()


def test_a_unit_whose_build_raises_is_failed_and_the_pass_goes_on(engine, monkeypatch):
    calls = []

    async def flaky(self, units, cancel):
        calls.append(units[0].path)
        if units[0].path == "b.txt":
            raise RuntimeError("boom")
        self.counts[units[0].hash] = 1

    monkeypatch.setattr(WordCountLayer, "build", flaky)
    report = engine.build(timebox=30, layers=["wordcount"])["layers"]["wordcount"]
    assert (report["ok"], report["failed"]) == (2, 1)
    assert sorted(calls) == ["a.txt", "b.txt", "c.txt"]


def test_a_layer_that_does_not_apply_is_reported_skipped_with_its_reason(engine):
    # sparse with no model configured: before, the report said "ran", coverage 1.0, 0 units
    report = engine.build(timebox=30, layers=["sparse"])["layers"]["sparse"]
    assert report["state"] == "skipped" and report["ok"] == 0
    assert "sparse_model" in report["reason"]
