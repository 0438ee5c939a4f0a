"""Regression tests for stale and wrong results (issue 18, items 4-7), each named after the
defect, each driven through the public API (``lar.open(root)`` ... ``search`` / ``fetch``)."""
from __future__ import annotations

import os
import shutil
from dataclasses import replace

import pytest

import lar

LEXICAL = ["trigram", "bm25"]


def _folder(tmp_path, files):
    root = tmp_path / "root"
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# -- item 4: removed text returned as current --------------------------------------------------

def test_hits_of_an_edited_files_previous_text_are_not_returned_as_current(tmp_path):
    # names (always current) resolved the scope before the shared stat pass, so the building
    # layers searched the old hashes and the old text came back with no path
    root = _folder(tmp_path, {"a.txt": "alpha bravo charlie oldword here\nmore text\n",
                              "b.txt": "delta echo foxtrot\n"})
    with lar.open(root, state=tmp_path / "s") as eng:
        eng.build(timebox=60, layers=LEXICAL)
        layers = ["names", *LEXICAL]
        first = eng.search("oldword", timebox=10, layers=layers)
        assert [h.paths for h in first.hits] == [("a.txt",)]
        (root / "a.txt").write_text("alpha bravo charlie newword here\nmore text\n")
        after = eng.search("oldword", timebox=10, layers=layers)
        assert after.hits == (), [(h.paths, h.excerpt) for h in after.hits]
        # and the first search after an edit finds the new text in the building layers
        (root / "a.txt").write_text("alpha bravo charlie newerword here\nmore text\n")
        new = eng.search("newerword", timebox=10, layers=layers)
        assert [h.paths for h in new.hits] == [("a.txt",)]
        assert set(new.hits[0].signals) >= set(LEXICAL)


def test_a_hit_whose_text_is_in_no_current_file_is_left_out_and_said_so(tmp_path):
    from lar.core.types import Hit, LayerRun, Span
    from lar.engine.currency import current_hits, note_runs, run_notes, stale_note

    root = _folder(tmp_path, {"a.txt": "one two three\n"})
    with lar.open(root, state=tmp_path / "s") as eng:
        live = eng.index.get("a.txt").hash
        gone = Hit.single("bm25", Span("f" * 32, 0, 3), rank=1, score=1.0, score_kind="x")
        here = Hit.single("bm25", Span(live, 0, 3), rank=2, score=0.5, score_kind="x")
        given = Hit.single("grep", Span("e" * 32, 0, 3), rank=1, score=1.0, score_kind="x")
        given = replace(given, paths=("new.txt",))
        kept, dropped = current_hits([gone, here, given], eng.index)
        assert kept == [here, given]  # a hit with its own current path (grep) is kept
        assert dropped == {"bm25": 1}
        runs = note_runs([LayerRun("bm25", "ran"), LayerRun("grep", "ran")], run_notes(dropped))
        assert runs[0].notes == (stale_note(1),) and runs[1].notes == ()
        assert "left out 1 hit of text that no current file holds" in stale_note(1)


# -- item 5: a pure rename broke fetch ---------------------------------------------------------

def test_fetch_of_an_id_survives_a_pure_rename(tmp_path):
    root = _folder(tmp_path, {"a.txt": "alpha bravo\n", "b.txt": "delta echo foxtrot\n"})
    with lar.open(root, state=tmp_path / "s") as eng:
        eng.build(timebox=60, layers=LEXICAL)
        hit = eng.search("foxtrot", timebox=10, layers=LEXICAL).hits[0]
        assert hit.paths == ("b.txt",)
        os.rename(root / "b.txt", root / "c.txt")
        got = eng.fetch(hit.id)
        assert (got.path, got.text, got.changed) == ("c.txt", "delta echo foxtrot", False)
        assert got.id == hit.id


def test_renames_and_identical_files_cost_no_rebuild(tmp_path):
    root = _folder(tmp_path, {"a.txt": "alpha bravo\n", "b.txt": "delta echo foxtrot\n"})
    with lar.open(root, state=tmp_path / "s") as eng:
        eng.build(timebox=60, layers=LEXICAL)
        os.rename(root / "b.txt", root / "moved.txt")
        shutil.copy(root / "a.txt", root / "copy.txt")
        eng.index_now()
        st = eng.status()
        assert [st.layer(n).coverage for n in LEXICAL] == [1.0, 1.0]  # nothing to build
        hits = eng.search("foxtrot", timebox=10, layers=LEXICAL).hits
        assert [h.paths for h in hits] == [("moved.txt",)]
        hits = eng.search("bravo", timebox=10, layers=LEXICAL).hits
        assert [h.paths for h in hits] == [("a.txt", "copy.txt")]


# -- item 6: the state folder deleted under an open engine -------------------------------------

def test_a_state_folder_deleted_under_an_open_engine_is_noticed_and_rebuilt(tmp_path):
    root = _folder(tmp_path, {"a.txt": "alpha bravo\n", "b.txt": "delta echo foxtrot\n"})
    state = tmp_path / "s"
    with lar.open(root, state=state) as eng:
        eng.build(timebox=60, layers=LEXICAL)
        assert eng.status().layer("bm25").coverage == 1.0
        shutil.rmtree(state)
        st = eng.status()
        assert "deleted" in st.last_scan.get("state_rebuilt", "")
        assert [st.layer(n).coverage for n in LEXICAL] == [0.0, 0.0]  # nothing built any more
        assert st.units == 2  # the folder was re-scanned
        assert (state / "index.sqlite").exists()
        eng.build(timebox=60, layers=LEXICAL)  # rebuilds into the new state folder
        res = eng.search("foxtrot", timebox=10, layers=LEXICAL)
        assert [h.paths for h in res.hits] == [("b.txt",)]
        assert all(r.state.value == "ran" for r in res.runs if r.name in LEXICAL)


def test_a_search_notices_a_deleted_state_folder_and_says_so(tmp_path):
    root = _folder(tmp_path, {"a.txt": "alpha bravo\n", "b.txt": "delta echo foxtrot\n"})
    state = tmp_path / "s"
    with lar.open(root, state=state) as eng:
        eng.build(timebox=60, layers=LEXICAL)
        shutil.rmtree(state)
        res = eng.search("foxtrot", timebox=10, layers=["grep", *LEXICAL])
        assert [h.paths for h in res.hits] == [("b.txt",)]  # grep still answers
        for name in LEXICAL:
            run = res.run(name)
            assert run.state.value != "failed", run.reason
            assert any("state folder" in n for n in run.notes), run.notes
        again = eng.search("foxtrot", timebox=10, layers=LEXICAL)
        assert not any("state folder" in n for r in again.runs for n in r.notes)  # said once


# -- item 7: bm25 results depended on the index's edit history ---------------------------------

WORDS = ("river platypus wombat quokka burrow lantern harbour meadow copper violet sparrow "
         "thunder glacier orchard pepper marble falcon canyon willow ember").split()
QUERIES = ["platypus river", "wombat burrow lantern", "copper violet", "glacier", "ember falcon"]
STILL = {"bm25_max_deltas": 1000, "bm25_delta_fraction": 1e9, "bm25_dead_fraction": 1e9}


def _doc(i: int, n: int) -> str:
    return "\n\n".join(" ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(5 + (i + j) % 9))
                       for j in range(n)) + "\n"


def _bm25_lists(eng):
    out = {}
    for q in QUERIES:
        hits = eng.search(q, timebox=30, layers=["bm25"], k=50).hits
        out[q] = [(h.path, h.span.start, h.span.end, h.evidence["bm25"].score) for h in hits]
    return out


def _same(a, b):
    assert a.keys() == b.keys()
    for q in a:
        assert [x[:3] for x in a[q]] == [x[:3] for x in b[q]], q
        assert [x[3] for x in a[q]] == pytest.approx([x[3] for x in b[q]], rel=1e-5), q


def test_bm25_scores_after_edits_equal_a_clean_build(tmp_path):
    root = _folder(tmp_path, {f"d{i:02d}.txt": _doc(i, 2 + i % 3) for i in range(24)})
    cfg = {"bm25_chunk_bytes": 80, **STILL}
    with lar.open(root, state=tmp_path / "hist", config=cfg) as eng:
        eng.build(timebox=60, layers=["bm25"])
        for step in range(3):  # three rounds of edits, each searched: deltas and tombstones
            (root / f"d{step:02d}.txt").write_text(_doc(100 + step, 4))
            (root / f"d{10 + step:02d}.txt").unlink()
            (root / f"new{step}.txt").write_text(_doc(200 + step, 1 + step))
            _bm25_lists(eng)
        assert eng.layers["bm25"].index.layout.deltas  # no merge happened: history is there
        edited = _bm25_lists(eng)
    with lar.open(root, state=tmp_path / "clean", config=cfg) as eng:
        eng.build(timebox=60, layers=["bm25"])
        assert not eng.layers["bm25"].index.layout.deltas
        clean = _bm25_lists(eng)
    assert any(clean.values())
    _same(edited, clean)
