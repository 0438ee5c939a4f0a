"""A search's spare time builds what its query needs; runs over part of the scope say so."""
import threading
import time

import lar


def _folder(tmp_path, n=30):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(n):
        (root / f"note{i:02d}.txt").write_text(f"note {i}: the platypus count was {i * 7}\n")
    (root / "email.py").write_text("def parse_email_address(text):\n    return text.split('@')\n")
    return root


def test_a_second_search_finds_what_the_first_one_built(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        first = eng.search("parse an email address", layers=["bm25"], timebox=10)
        run = first.run("bm25")
        assert run.coverage == 0.0 and first.hits == ()
        assert run.reason == ("built 0 % of 31 units; searches build it in their spare time; "
                              "run `lar build` (eng.build()) to finish")
        assert eng.layers["bm25"].coverage(eng.scope_view()) == 1.0  # built in the spare time
        second = eng.search("parse an email address", layers=["bm25"], timebox=10)
        assert second.run("bm25").coverage == 1.0 and second.run("bm25").reason == ""
        assert second.hits[0].path == "email.py"


def test_without_spare_build_a_search_builds_nothing(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=False) as eng:
        eng.search("platypus", layers=["bm25"], timebox=5)
        res = eng.search("platypus", layers=["bm25"], timebox=5)
        assert res.run("bm25").coverage == 0.0
        assert eng.layers["bm25"].built() == {}


def test_the_environment_turns_the_default_off(tmp_path, monkeypatch):
    root = _folder(tmp_path, n=2)
    monkeypatch.setenv("LAR_SPARE_BUILD", "1")
    with lar.open(root, state=tmp_path / "a") as eng:
        assert eng.spare_build
    monkeypatch.setenv("LAR_SPARE_BUILD", "0")
    with lar.open(root, state=tmp_path / "b") as eng:
        assert not eng.spare_build


def test_spare_time_builds_the_candidates_units_first(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=False) as eng:
        res = eng.search({"grep": "parse_email"}, timebox=5)
        assert [h.path for h in res.hits] == ["email.py"]
        assert eng.builder.spare(["bm25"], deadline=0.0) == 0  # no time: nothing built
        layer = eng.layers["bm25"]
        stop = threading.Event()
        calls = []
        real = layer.build_one

        def one(unit):  # cancel after the first unit
            calls.append(unit.path)
            stop.set()
            return real(unit)

        layer.build_one = one
        assert eng.builder.spare(["bm25"], deadline=time.monotonic() + 30, cancel=stop) == 1
        assert calls == ["email.py"]  # the grep candidate's unit, not note00.txt


def test_a_model_layer_is_not_built_in_spare_time_before_its_model_is_loaded(tmp_path):
    root = _folder(tmp_path, n=2)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        assert not eng.builder.loaded("static", eng.layers["static"])
        assert eng.builder.loaded("bm25", eng.layers["bm25"])
        eng.builder.spare(["static"], deadline=time.monotonic() + 30)
        assert eng.layers["static"].built() == {}


def test_background_build_is_reported_in_the_reason(tmp_path):
    root = _folder(tmp_path, n=3)
    with lar.open(root, state=tmp_path / "state", spare_build=False) as eng:
        layer = eng.layers["bm25"]
        release = threading.Event()

        def stuck(unit):  # a unit that takes as long as the test needs
            release.wait(10)
            return "failed"

        layer.build_one = stuck
        eng.start_background_build()
        try:
            run = eng.search("platypus", layers=["bm25"], timebox=5).run("bm25")
            assert eng.builder.running
        finally:
            release.set()
            eng.stop_background_build()
        assert run.reason == "built 0 % of 4 units; building in the background"
