"""Issue 20 item 8: a cell builds what it relies on before using it, and an empty answer names
the real cause (not built, part built, out of time, skipped, what the background build is busy
with) instead of guessing."""
from __future__ import annotations

import pytest

import lar
import lar_magics
from lar.core.types import LayerRun, RunState
from lar_magics.readiness import (Background, NoLayerHitsError, background, describe,
                                  empty_reason, ensure_built, require_hits)
from lar_magics.results import search

IDLE = Background(False, None)
BUSY = Background(True, "dense-e5")


def test_describe_names_the_real_cause():
    ran = LayerRun("late", RunState.RAN, elapsed=0.2)
    assert describe("late", ran, 0, 41, 0.0, BUSY) == (
        "late has built 0 of 41 units: the background build is busy with dense-e5; "
        "run %lar build --layers late (or engine.build(layers=['late']))")
    # the case of the tour: late fully built, but its search ran out of time
    aborted = LayerRun("late", RunState.ABORTED, elapsed=5.01)
    assert describe("late", aborted, 41, 41, 1.0, BUSY) == (
        "late ran out of time: aborted after 5.0 s: the background build is busy with dense-e5; "
        "search again with a longer timebox, or stop the background build (%lar build --stop)")
    assert describe("late", ran, 12, 41, 12 / 41, Background(True, "late")) == (
        "late has built 12 of 41 units (29%): the background build is building late now and "
        "found nothing in them; run %lar build --layers late (or engine.build(layers=['late']))")
    assert describe("late", ran, 41, 41, 1.0, IDLE) == (
        "late searched all 41 units and found nothing for this query; change the query")
    failed = LayerRun("late", RunState.FAILED, reason="model not found")
    assert describe("late", failed, 41, 41, 1.0, IDLE) == "late failed in this search (model not found)"
    skipped = LayerRun("dense", RunState.SKIPPED, reason="no model configured")
    assert describe("dense", skipped, 3, 41, 0.07, IDLE) == (
        "dense was skipped in this search (no model configured)")
    assert describe("late", None, 41, 41, 1.0, IDLE).startswith("late did not run in this search")
    assert describe("late", ran, 41, 41, 1.0, IDLE, found=4) == (
        "late found 4 hit(s) but fusion kept none of them in the top k; raise k")


def test_background_reads_the_builder():
    class Builder:
        running, busy_with = True, "dense-e5"

    class Eng:
        builder = Builder()

    assert background(Eng()) == BUSY and background(object()) == IDLE
    assert Background(True, None).clause("late") == ""  # running but idle: nothing to blame


@pytest.fixture
def quiet(corpus, tmp_path):
    """An engine that builds only when asked (no spare-time build, no background)."""
    eng = lar.open(corpus, state=tmp_path / "state", spare_build=False)
    lar_magics.use(eng)
    yield eng
    lar_magics.SESSION.close()


def test_an_unbuilt_layer_says_so_and_ensure_built_fixes_it(quiet):
    units = quiet.status().layer("bm25").units
    res = search(quiet, {"bm25": "reciprocal rank fusion"}, k=3, timebox=5.0)
    assert not res.hits
    with pytest.raises(NoLayerHitsError) as err:
        require_hits(quiet, res, "bm25")
    assert str(err.value) == (f"bm25 has built 0 of {units} units; run %lar build --layers bm25 "
                              "(or engine.build(layers=['bm25']))")
    assert empty_reason(quiet, res, "bm25") == str(err.value)
    assert ensure_built(quiet, "bm25") == (units, units)
    assert ensure_built(quiet, "bm25") == (units, units)  # built: a no-op
    again = search(quiet, {"bm25": "reciprocal rank fusion"}, k=3, timebox=5.0)
    assert require_hits(quiet, again, "bm25") is again and again.hits[0].path == "docs/fusion.md"


def test_ensure_built_says_what_it_could_not_build(quiet):
    with pytest.raises(lar_magics.MagicError, match="the engine has no layer 'nope'"):
        ensure_built(quiet, "nope")
    with pytest.raises(NoLayerHitsError, match=r"bm25 has built \d+ of \d+ units after 1e-06 s; "
                                               "build longer: %lar build --layers bm25"):
        ensure_built(quiet, "bm25", timebox=1e-6)


def test_explain_of_an_empty_search_names_the_cause(quiet):
    from lar_magics.explain_view import ExplainError, explain_data

    res = quiet.search({"bm25": "reciprocal rank fusion"}, k=3, timebox=5.0)
    with pytest.raises(ExplainError, match="found nothing to explain: bm25 has built 0 of"):
        explain_data(quiet, res, layer="bm25")


def test_build_magic_takes_layer_names(shell, quiet):
    shell.run_line_magic("lar", "build bm25 --timebox 60s")
    st = quiet.status()
    assert st.layer("bm25").coverage == 1.0 and st.layer("trigram").coverage == 0.0


def tour_explain_cell() -> str:
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "01_tour.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    (cell,) = [c for c in cells if "explain(0)" in c]
    return cell


@pytest.mark.slow  # loads the real all-MiniLM-L6-v2 (the late layer's model)
def test_the_tours_explain_cell_builds_what_it_explains(tmp_path):
    """The tour's case: late has built nothing yet (in the tour the background build was busy
    with another layer). The cell, as the full (non-small) tour runs it, builds late first, so
    it explains a hit instead of guessing why there is none."""
    import shutil
    from pathlib import Path

    from lar_magics.explain_view import ExplainView

    prose = Path(__file__).resolve().parents[2] / "datasets" / "demo" / "prose"
    shutil.copytree(prose, tmp_path / "corpus")
    eng = lar.open(tmp_path / "corpus", state=tmp_path / "state", spare_build=False)
    try:
        assert eng.status().layer("late").built_units == 0
        shown: list = []
        exec(tour_explain_cell(), {"SMALL": False, "eng": eng, "lar_magics": lar_magics,
                                   "display": shown.append})
        assert len(shown) == 1 and isinstance(shown[0], ExplainView)
        assert shown[0].data.layer == "late"
        assert eng.status().layer("late").coverage == 1.0
    finally:
        eng.close()
        lar_magics.SESSION.close()
