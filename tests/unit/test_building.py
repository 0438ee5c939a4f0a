"""Lazy building: manifest, versions, priority, the background builder, edit-to-search."""
import time

import pytest

import lar
from lar.core.building import BuildingLayer, Manifest, SkipUnit
from lar.layers.trigram import TrigramLayer, required_literals
from lar.core.registry import register_layer, unregister_layer
from lar.store import content_hash


def test_search_before_build_reports_partial_coverage_and_after_finds(engine):
    res = engine.search({"trigram": "parse_deadline"}, timebox=5)
    # only files changed since the engine opened are built inline; an unbuilt layer answers
    # from what is built (here: nothing) and says so in its coverage
    run = res.run("trigram")
    assert run.state.value == "ran" and run.coverage == 0.0 and res.hits == ()
    report = engine.build(timebox=30, layers=["trigram"])
    assert report["layers"]["trigram"]["ok"] == 5 and report["layers"]["trigram"]["pending"] == 0
    res = engine.search({"trigram": "parse_deadline"}, timebox=5)
    assert res.run("trigram").coverage == 1.0
    assert {h.path for h in res.hits} <= {"src/timebox.py", "copy_of_timebox.py"} and res.hits


def test_an_edit_is_searchable_in_the_next_call(engine, corpus):
    engine.build(timebox=30, layers=["trigram"])
    (corpus / "docs" / "fusion.md").write_text("a freshly_written_token appears\n")
    res = engine.search({"trigram": "freshly_written_token"}, timebox=5)
    assert [h.path for h in res.hits] == ["docs/fusion.md"]
    assert res.hits[0].hash == content_hash(b"a freshly_written_token appears\n")
    # the old text is gone from the layer's answers (tombstone by liveness)
    assert engine.search({"trigram": "Route-unique"}, timebox=5).hits == ()


def test_new_layer_version_rebuilds_lazily(engine):
    engine.build(timebox=30, layers=["trigram"])
    layer = engine.layers["trigram"]
    assert layer.coverage(engine.scope_view()) == 1.0
    layer.chunker_version = "2"  # what a changed chunker looks like to the manifest
    try:
        assert layer.coverage(engine.scope_view()) == 0.0
        assert engine.build(timebox=30, layers=["trigram"])["layers"]["trigram"]["ok"] == 5
        assert layer.coverage(engine.scope_view()) == 1.0
    finally:
        layer.chunker_version = "1"


def test_priority_puts_the_last_requests_candidates_first(engine):
    res = engine.search({"grep": "Straße"}, timebox=5)  # candidates: docs/unicode.txt
    plan = engine.builder.plan(engine.layers["trigram"])
    assert plan[0].path == "docs/unicode.txt"
    engine.fetch(engine.search({"grep": "broken_utf8_marker"}, timebox=5).hits[0].id)
    plan = engine.builder.plan(engine.layers["trigram"])
    assert plan[0].path == "docs/latin1.txt"  # fetched units outrank candidates


# a build that is killed (SIGKILL) in the middle of its third trigram unit: the unit's FTS5 row
# is written inside an open transaction when the kill lands
_KILLED_MID_UNIT = """
import sys, time
import lar
from lar.layers.trigram import TrigramLayer
real, seen = TrigramLayer.index_unit, []
def index_unit(self, unit, doc):
    seen.append(unit.hash)
    if len(seen) == 3:
        conn = self.fts.conn()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO docs(hash, body) VALUES (?, ?)", (unit.hash, "half a unit"))
        print("IN_UNIT", unit.hash, flush=True)
        time.sleep(120)
    return real(self, unit, doc)
TrigramLayer.index_unit = index_unit
with lar.open(sys.argv[1], state=sys.argv[2]) as eng:
    eng.build(timebox=120, layers=["trigram"])
"""


def test_abort_loses_at_most_the_unit_in_progress(corpus, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    state = tmp_path / "state"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", _KILLED_MID_UNIT, str(corpus), str(state)],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline().split()
        assert line and line[0] == "IN_UNIT", line
        in_progress = line[1]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with lar.open(corpus, state=state) as eng:
        layer = eng.layers["trigram"]
        built = layer.built()
        # the two units finished before the kill are kept; the one in progress is not half-there
        assert sorted(built.values()) == ["ok", "ok"] and in_progress not in built
        rows = layer.fts.conn().execute("SELECT hash FROM docs").fetchall()
        assert sorted(h for (h,) in rows) == sorted(built)
        st = layer.status(eng.scope_view())
        assert st.built_units == 2 and st.coverage == 2 / 5
        report = eng.build(timebox=30, layers=["trigram"])["layers"]["trigram"]  # resumes
        assert (report["ok"], report["pending"]) == (3, 0)
        assert layer.status(eng.scope_view()).coverage == 1.0
        assert [h.hash for h in eng.search({"trigram": "half a unit"}, timebox=5).hits] == []


def test_background_builder_fills_layers_and_stops_cleanly(engine):
    engine.start_background_build()
    deadline = time.monotonic() + 20
    layer = engine.layers["trigram"]
    while layer.coverage(engine.scope_view()) < 1.0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert layer.coverage(engine.scope_view()) == 1.0
    assert engine.builder.running
    engine.stop_background_build()
    assert not engine.builder.running


class _Picky(BuildingLayer):
    name = "picky"
    version = "1"

    def accepts(self, unit):
        return unit.path.endswith((".py", ".txt"))

    def index_unit(self, unit, doc):
        if b"Stra" in doc.text:
            raise SkipUnit("refuses unicode test files")
        if b"caf" in doc.text:
            raise RuntimeError("simulated crash")
        return {"n": len(doc.text)}

    async def search(self, query, scope, budget, candidates=None):
        return []


def test_skips_and_failures_are_per_unit_and_visible_in_status(corpus, tmp_path):
    register_layer(_Picky)
    try:
        with lar.open(corpus, state=tmp_path / "s") as eng:
            rep = eng.build(timebox=30, layers=["picky"])["layers"]["picky"]
            assert (rep["ok"], rep["skipped"], rep["failed"]) == (1, 1, 1)  # .py twins share a hash
            st = eng.status().layer("picky")
            assert st.units == 3 and st.coverage == 1.0
            assert "1 units failed: RuntimeError: simulated crash (1)" in st.notes
            assert "1 units skipped: refuses unicode test files (1)" in st.notes
            entry = eng.layers["picky"].manifest.entry(eng.index.get("docs/latin1.txt").hash)
            assert entry["state"] == "failed" and "simulated crash" in entry["reason"]
    finally:
        unregister_layer("picky")


def test_manifest_garbage_collects_dead_units(tmp_path):
    m = Manifest(tmp_path / "m.sqlite")
    m.mark("aa" * 16, "1+c1", "ok")
    m.mark("bb" * 16, "1+c1", "ok")
    assert m.states("1+c1") == {"aa" * 16: "ok", "bb" * 16: "ok"}
    m.forget(["aa" * 16])
    assert m.all_hashes() == {"bb" * 16}


def test_corrupt_manifest_is_set_aside_and_started_afresh(tmp_path):
    (tmp_path / "m.sqlite").write_bytes(b"garbage" * 200)
    from lar.core.errors import RepairedStateWarning

    with pytest.warns(RepairedStateWarning, match="rebuilt lazily"):
        m = Manifest(tmp_path / "m.sqlite")
    assert m.states("1+c1") == {}
    assert len(list(tmp_path.glob("m.sqlite.corrupt-*"))) == 1


def test_trigram_regex_prefilter_literals():
    assert required_literals(r"def (\w+)_duration") == ["def ", "_duration"]
    assert required_literals(r"a|b") == []
    eng_q = TrigramLayer.query_format
    assert "regex" in eng_q


@pytest.mark.parametrize("pattern, runs", [
    (r"foo+bar", ["foo", "bar"]),            # o is required once, then may repeat
    (r"abc*def", ["def"]),                   # c is optional: "ab" alone is too short
    (r"abcd?", ["abc"]),
    (r"hello\.world", ["hello.world"]),      # an escaped dot is a literal
    (r"(?i)error: \d+ files", ["error: ", " files"]),
    (r"[abc]xyz{2}uv", []),                  # z counted, "xy" and "uv" too short
    (r"x(a|b)yzw", ["yzw"]),                 # | inside a group does not void the rest
    (r"\bclass\s+Foo", ["class", "Foo"]),
    (r"a\|bcd", ["a|bcd"]),                  # an escaped bar is a literal
    (r"([unclosed", []),                     # not a regex: nothing required
])
def test_trigram_required_literals_without_the_private_regex_parser(pattern, runs):
    assert required_literals(pattern) == runs
