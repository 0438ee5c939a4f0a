"""Issue 18 item 17: damaged SQLite state files (the file index, a layer's manifest or artefact
database) are detected, set aside as ``<name>.corrupt-<time>`` and rebuilt lazily; lar says what
happened and what to do (a typed warning, the layer's run and status), never a raw traceback,
and the engine still opens."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

import lar
from lar.core.errors import RepairedStateWarning
from lar.core.types import RunState
from lar.store import content_hash
from tests.conftest import CODE

QUERY = {"trigram": "parse_deadline"}
EXPECTED = {content_hash(CODE.encode())}  # src/timebox.py and its copy: one unit


def _checkpoint(path: Path) -> None:
    """Fold the WAL into the main file, so that damage to the main file is what SQLite reads."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _flip_page_types(path: Path) -> None:
    """One bit flipped in the b-tree page header of every page but the first (the schema)."""
    _checkpoint(path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    assert len(data) >= 3 * page, "too small a database to damage"
    for off in range(page, len(data), page):
        data[off] ^= 0x40
    path.write_bytes(bytes(data))


def _set_aside(folder: Path, name: str) -> list[Path]:
    return [p for p in folder.glob(f"{name}.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]


def _hashes(res) -> set[str]:
    return {h.hash for h in res.hits}


def _built(corpus: Path, state: Path) -> None:
    with lar.open(corpus, state=state) as eng:
        assert eng.build(timebox=60, layers=["trigram"])["layers"]["trigram"]["pending"] == 0
        assert _hashes(eng.search(QUERY, timebox=5)) == EXPECTED


def _grow(corpus: Path) -> None:
    """Enough files that every database spans several pages."""
    for i in range(60):
        (corpus / "docs" / f"note{i}.txt").write_text(f"note {i} about the lazily built layers\n" * 30)


def test_a_bit_flip_in_index_sqlite_is_repaired_not_a_traceback(corpus, tmp_path):
    _grow(corpus)
    state = tmp_path / "state"
    _built(corpus, state)
    _flip_page_types(state / "index.sqlite")
    with pytest.warns(RepairedStateWarning, match=r"index\.sqlite"):
        with lar.open(corpus, state=state) as eng:  # no sqlite3 error escapes
            res = eng.search(QUERY, timebox=5)
            assert res.run("trigram").state == RunState.RAN
            assert _hashes(res) == EXPECTED
            assert eng.status().units == 66
    moved = _set_aside(state, "index.sqlite")
    assert len(moved) == 1 and moved[0].stat().st_size > 0


@pytest.mark.parametrize("layer,name", [("trigram", "fts.sqlite"), ("trigram", "manifest.sqlite"),
                                        ("symbols", "symbols.sqlite")])
def test_a_damaged_layer_sqlite_is_set_aside_and_rebuilt_by_the_next_build(corpus, tmp_path, layer,
                                                                           name):
    _grow(corpus)
    state = tmp_path / "state"
    query = {layer: "parse_deadline"}
    with lar.open(corpus, state=state) as eng:
        assert eng.build(timebox=60, layers=[layer])["layers"][layer]["pending"] == 0
        assert _hashes(eng.search(query, timebox=5)) == EXPECTED
    _flip_page_types(state / "layers" / layer / name)
    with pytest.warns(RepairedStateWarning, match=name.replace(".", r"\.")):
        with lar.open(corpus, state=state) as eng:
            run = eng.search(query, timebox=5).run(layer)
            # this search says what happened and what to do; it is no crash report
            assert "crashed" not in run.reason and "DatabaseError" not in run.reason
            status = eng.status().layer(layer)
            assert name in status.notes and "set aside" in status.notes
            report = eng.build(timebox=60, layers=[layer])["layers"][layer]
            assert report["ok"] >= 1 and (report["failed"], report["pending"]) == (0, 0)
            res = eng.search(query, timebox=5)
            assert res.run(layer).state == RunState.RAN and res.run(layer).coverage == 1.0
            assert _hashes(res) == EXPECTED
    assert len(_set_aside(state / "layers" / layer, name)) == 1


def test_a_truncated_fts_sqlite_does_not_stop_the_engine_opening(corpus, tmp_path):
    state = tmp_path / "state"
    _built(corpus, state)
    fts = state / "layers" / "trigram" / "fts.sqlite"
    _checkpoint(fts)
    os.truncate(fts, 50)  # shorter than SQLite's own header
    with pytest.warns(RepairedStateWarning, match=r"fts\.sqlite"):
        with lar.open(corpus, state=state) as eng:
            assert eng.layers["trigram"].coverage(eng.scope_view()) == 0.0  # nothing built now
            assert eng.build(timebox=60, layers=["trigram"])["layers"]["trigram"]["ok"] == 5
            assert _hashes(eng.search(QUERY, timebox=5)) == EXPECTED


def test_a_damaged_bm25_unit_store_is_set_aside_and_its_units_rebuilt(corpus, tmp_path):
    _grow(corpus)
    state = tmp_path / "state"
    with lar.open(corpus, state=state) as eng:
        assert eng.build(timebox=60, layers=["bm25"])["layers"]["bm25"]["pending"] == 0
    _flip_page_types(state / "layers" / "bm25" / "units.sqlite")
    (corpus / "fresh.txt").write_text("a platypus swims in the river delta\n")
    with pytest.warns(RepairedStateWarning, match=r"units\.sqlite"):
        with lar.open(corpus, state=state) as eng:
            eng.search({"bm25": "platypus"}, timebox=10)  # adds the new unit: reads the store
            report = eng.build(timebox=60, layers=["bm25"])["layers"]["bm25"]
            assert report["failed"] == 0 and report["pending"] == 0
            res = eng.search({"bm25": "platypus"}, timebox=10)
            assert res.run("bm25").coverage == 1.0
            assert [h.path for h in res.hits] == ["fresh.txt"]
            assert EXPECTED <= _hashes(eng.search({"bm25": "parse_deadline"}, timebox=10))
    assert len(_set_aside(state / "layers" / "bm25", "units.sqlite")) == 1


def test_a_damaged_vector_catalogue_is_set_aside_and_reencoded(corpus, tmp_path):
    pytest.importorskip("model2vec")
    from tests.regression.test_crash_resume import _tiny_model

    (corpus / "docs" / "rivers.md").write_text("the river delta meets the harbour\n")
    cfg = {"static_model": str(_tiny_model(tmp_path / "m2v"))}
    state = tmp_path / "state"
    with lar.open(corpus, state=state, config=cfg) as eng:
        assert eng.build(timebox=60, layers=["static"])["layers"]["static"]["pending"] == 0
        before = [h.hash for h in eng.search({"static": "river delta"}, timebox=10).hits]
    rows, = (state / "layers" / "static").glob("vectors-*/rows.sqlite")
    _checkpoint(rows)
    os.truncate(rows, 50)
    with pytest.warns(RepairedStateWarning, match=r"rows\.sqlite"):
        with lar.open(corpus, state=state, config=cfg) as eng:
            run = eng.search({"static": "river delta"}, timebox=10).run("static")
            assert run.state == RunState.RAN and run.coverage == 0.0  # nothing encoded now
            assert "set aside" in eng.status().layer("static").notes
            report = eng.build(timebox=60, layers=["static"])["layers"]["static"]
            assert report["failed"] == 0 and report["pending"] == 0
            res = eng.search({"static": "river delta"}, timebox=10)
            assert res.run("static").coverage == 1.0 and [h.hash for h in res.hits] == before
    assert len(list(rows.parent.parent.glob(f"{rows.parent.name}.corrupt-*"))) == 1
