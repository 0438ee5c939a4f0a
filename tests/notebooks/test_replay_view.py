"""The trace replay view: a trace recorded on a tiny corpus replays; the view's data for a step
shows the hits it returned and, re-run with other layers, the ids added and removed."""
from __future__ import annotations

import json

import pytest

import lar
from lar.record.replay import replay
from lar.record.trace import load_trace
from lar_magics.replay_view import ReplayView, ReplayViewError, replay_view, step_data

FILES = {
    "notes/timebox.md": "A timebox bounds each search.\nThe deadline is soft.\n",
    "notes/fusion.md": "Fusion merges ranked lists.\nA timebox applies to fusion too.\n",
    "src/code.py": "def timebox_seconds(value):\n    return float(value)\n",
}


@pytest.fixture
def traced(tmp_path):
    """An engine on the tiny corpus and a trace of four calls: a grep-only search, a fetch of its
    top hit, a names glob, and a build (not replayable)."""
    root = tmp_path / "corpus"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    eng = lar.open(root, state=tmp_path / "state")
    trace = tmp_path / "agent.jsonl"
    eng.record_trace(trace)
    res = eng.search("timebox", layers=["grep"], timebox=5.0)
    eng.fetch(res.hits[0].id)
    eng.search({"names": {"glob": "notes/*.md"}}, timebox=5.0)
    eng.build(timebox=5.0, layers=["bm25"])
    eng.stop_trace()
    yield eng, trace, res
    eng.close()


def test_the_trace_replays_unchanged(traced):
    eng, trace, res = traced
    t = load_trace(trace)
    assert [s.call for s in t.steps] == ["search", "fetch", "search", "build"]
    rep = replay(t, eng)
    assert [s.jaccard for s in rep.steps] == [1.0, 1.0, 1.0, None]
    assert rep.steps[3].skipped and rep.summary()["changed"] == 0


def test_a_step_shows_what_it_returned(traced):
    eng, trace, res = traced
    view = replay_view(eng, trace)
    assert isinstance(view, ReplayView) and "lar-replay" in view._dom_classes
    data = view.data
    assert data.seq == 0 and data.call == "search" and data.params["query"] == "timebox"
    assert [h.id for h in data.hits] == [h.id for h in res.hits]
    assert sorted(h.path for h in data.hits) == sorted(FILES)
    assert all("timebox" in h.excerpt.lower() for h in data.hits)
    assert {r["name"]: r["state"] for r in data.runs}["grep"] == "ran"
    assert {r["name"]: r["state"] for r in data.runs}["names"] == "skipped"
    fetched = view.show(1)
    assert fetched.call == "fetch" and [h.id for h in fetched.hits] == [res.hits[0].id]
    assert "fetch" in view.step_box.value and res.hits[0].id in view.step_box.value
    globbed = view.show(2)
    assert sorted(h.path for h in globbed.hits) == ["notes/fusion.md", "notes/timebox.md"]
    with pytest.raises(ReplayViewError, match="outside the trace"):
        view.show(9)


def test_rerun_with_other_layers_shows_added_and_removed(traced):
    eng, trace, res = traced
    view = replay_view(eng, trace)
    diff = view.rerun(layers=["names"])  # "timebox" as a names query: the file notes/timebox.md
    assert set(diff.removed) == {h.id for h in res.hits} and len(diff.removed) == 3
    assert len(diff.added) == 1 and diff.jaccard == 0.0 and diff.kept == ()
    assert eng.fetch(diff.added[0]).path == "notes/timebox.md"
    assert diff.old_states["grep"] == "ran" and diff.new_states["grep"] == "skipped"
    assert diff.new_states["names"] == "ran"
    assert diff.params_used["layers"] == ["names"]
    html = view.diff_box.value
    assert "+ added" in html and "removed" in html and "notes/timebox.md" in html
    assert all(i in html for i in diff.removed)
    # the same step with both layers and another timebox keeps the grep hits
    both = view.rerun(layers=["grep", "names"], timebox="2s")
    assert set(both.kept) == {h.id for h in res.hits} and both.params_used["timebox"] == 2.0
    # a build is not replayed, and the view says so
    view.show(3)
    assert view.rerun().skipped and "not replayed" in view.diff_box.value


def test_changes_underneath_are_shown(traced):
    eng, trace, res = traced
    view = replay_view(eng, trace)
    assert view.check() is None
    eng.record_trace(trace)  # the agent goes on: the trace grows under the view
    eng.search("deadline", layers=["grep"], timebox=5.0)
    eng.stop_trace()
    assert view.check() == "the trace file changed"
    view.show(0)  # any action notices it and reloads
    assert len(view.trace) == 5 and view.check() is None
    assert "data changed underneath this view" in view.notice.value
    assert view.picker.options[-1][0].startswith("#4 search deadline")
    # a file edited since the trace: the returned text is found again, with a note
    path = eng.root / "notes" / "fusion.md"
    path.write_text("An inserted first line.\n" + path.read_text())
    data = view.show(0)
    moved = [h for h in data.hits if h.path == "notes/fusion.md"]
    assert moved and "changed since this hit" in moved[0].note
    assert "timebox" in moved[0].excerpt.lower()


def test_bad_input(traced, tmp_path):
    eng, trace, _ = traced
    with pytest.raises(ReplayViewError, match="record one with"):
        replay_view(eng, tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"not": "a trace"}) + "\n")
    with pytest.raises(lar.LarError, match="not a lar trace record"):
        replay_view(eng, bad)
    view = replay_view(eng, trace)
    view.timebox.value = "soon"  # the re-run panel's fields, as a user would fill them
    view._rerun_from_widgets()
    assert "color:#b00" in view.diff_box.value and "soon" in view.diff_box.value
