"""Issue 18 item 16: two processes building bm25 segments over the same state dir.

Uncommitted work (a segment folder built but not yet named by ``segments.json``, or still under
its temporary name) is private to its writer: another writer opening the store or committing
its own segment never deletes it. A segment that another writer superseded (and removed) is
not corruption: the reader follows the new layout."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lar.layers.kits.lexical.chunks import UnitStore
from lar.layers.kits.lexical.index import SegmentedIndex
from lar.layers.kits.lexical.segments import SegmentParams, SegmentStore

VERSION = "v1"
ROOT = Path(__file__).resolve().parents[2]


def _units(path: Path, names: list[str]) -> UnitStore:
    store = UnitStore(path / "units.sqlite")
    for n in names:
        store.put(n, VERSION, [(0, 10), (10, 20)], [[n, "shared", "alpha"], [n, "beta"]])
    return store


def _index(path: Path) -> SegmentedIndex:
    return SegmentedIndex(path, SegmentParams(VERSION), UnitStore(path / "units.sqlite"), VERSION,
                          delta_fraction=100.0, dead_fraction=1.0, max_deltas=100)


# the other process: open the store (its start-up clean-up runs), add its units as a segment
OTHER_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from lar.layers.kits.lexical.chunks import UnitStore
    from lar.layers.kits.lexical.index import SegmentedIndex
    from lar.layers.kits.lexical.segments import SegmentParams
    d = Path(sys.argv[1])
    idx = SegmentedIndex(d, SegmentParams("v1"), UnitStore(d / "units.sqlite"), "v1",
                         delta_fraction=100.0, dead_fraction=1.0, max_deltas=100)
    idx.add(set(sys.argv[2].split(",")))
    assert not [n for n in idx.notes if "failed" in n], idx.notes
""")


def _run_other_writer(path: Path, names: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(path), ",".join(names)], check=True,
                   env=env, timeout=120)


def test_two_writers_never_delete_each_others_uncommitted_segments(tmp_path, monkeypatch):
    mine, theirs = [f"a{i}" for i in range(5)], [f"b{i}" for i in range(5)]
    _units(tmp_path, mine + theirs)
    idx = _index(tmp_path)
    real_build = idx.store.build

    def build_then_let_the_other_writer_run(rows, seg_id=None):
        seg = real_build(rows, seg_id)  # built, not yet committed to the layout
        _run_other_writer(tmp_path, theirs)  # opens the store and commits its own segment
        return seg

    monkeypatch.setattr(idx.store, "build", build_then_let_the_other_writer_run)
    idx.add(set(mine))
    # a third process (here: a fresh index) sees both writers' segments, intact
    reader = _index(tmp_path)
    assert reader.covered() == set(mine + theirs)
    assert not reader.notes
    hits, _ = reader.search(["shared"], 100, set(mine + theirs))
    assert {h for _, h, _, _ in hits} == set(mine + theirs)
    for sid in reader.layout.ids:
        assert (tmp_path / "segments" / sid).is_dir()


def test_a_temp_folder_of_a_live_writer_survives_another_writers_start(tmp_path):
    _units(tmp_path, ["a0"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / "segments" / f".tmp-1-p{other.pid}-abc"
        live.mkdir(parents=True)
        (live / "docs.json").write_text("{}")
        dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                  capture_output=True, text=True, check=True).stdout.strip()
        dead = tmp_path / "segments" / f".tmp-2-p{dead_pid}-def"
        dead.mkdir()
        SegmentStore(tmp_path, SegmentParams(VERSION))
        idx = _index(tmp_path)
        idx.add({"a0"})
        assert live.is_dir(), "another live writer's uncommitted work was deleted"
        assert not dead.exists(), "a dead writer's temp folder is garbage"
    finally:
        other.kill()
        other.wait()


def test_a_segment_superseded_by_another_writer_is_not_reported_as_corrupt(tmp_path):
    names = [f"a{i}" for i in range(6)]
    _units(tmp_path, names)
    writer = _index(tmp_path)
    writer.add(set(names[:3]))
    writer.add(set(names[3:]))
    reader = _index(tmp_path)  # knows the layout, has loaded no segment yet
    _run_other_writer_merge(tmp_path, names)  # replaces both segments by one and removes them
    hits, _ = reader.search(["shared"], 100, set(names))
    assert {h for _, h, _, _ in hits} == set(names)
    assert not any("failed its checks" in n for n in reader.notes), reader.notes
    assert len(reader.layout.ids) == 1


def _run_other_writer_merge(path: Path, names: list[str]) -> None:
    code = OTHER_WRITER.replace("idx.add(set(sys.argv[2].split(\",\")))",
                                "idx.merge(set(sys.argv[2].split(\",\")))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", code, str(path), ",".join(names)], check=True, env=env,
                   timeout=120)


# one of two processes editing its own files, building bm25 (each build adds a delta; merges
# and compactions follow) and searching, over one state dir
SEARCHER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import lar
    corpus, state, me, rounds = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    cfg = {"bm25_max_deltas": 2, "bm25_delta_fraction": 0.05}
    out = {"corrupt": [], "failed": [], "missed": []}
    with lar.open(corpus, state=state, config=cfg) as eng:
        for i in range(rounds):
            (corpus / f"{me}{i % 4}.txt").write_text(f"token{me}x{i} in round {i} of {me}\\n")
            eng.index_now()  # (the other process may have seen the edit first: build, then search)
            eng.build(timebox=20, layers=["bm25"])
            res = eng.search({"bm25": f"token{me}x{i}"}, timebox=20)
            run = res.run("bm25")
            if run.state.value != "ran":
                out["failed"].append(run.reason)
            if [h.path for h in res.hits] != [f"{me}{i % 4}.txt"]:
                out["missed"].append([i, [h.path for h in res.hits], run.reason, run.coverage,
                                      [str(n) for n in run.notes]])
            out["corrupt"] += [n for n in eng.layers["bm25"].index.notes if "failed its checks" in n]
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_two_processes_building_bm25_see_no_corrupt_segment(corpus, tmp_path):
    import json

    import lar

    state = tmp_path / "state"
    with lar.open(corpus, state=state) as eng:
        eng.build(timebox=60, layers=["bm25"])
    env = dict(os.environ, LAR_SPARE_BUILD="0",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", SEARCHER, str(corpus), str(state), me, "25"],
                              stdout=subprocess.PIPE, text=True, env=env) for me in ("a", "b")]
    outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    for out in outs:
        assert out == {"corrupt": [], "failed": [], "missed": []}, out
    with lar.open(corpus, state=state) as eng:  # a third process: the committed state is whole
        for me in ("a", "b"):
            for i in range(21, 25):
                res = eng.search({"bm25": f"token{me}x{i}"}, timebox=20)
                assert [h.path for h in res.hits] == [f"{me}{i % 4}.txt"]
        assert not [n for n in eng.layers["bm25"].index.notes if "failed its checks" in n]
        for sid in eng.layers["bm25"].index.layout.ids:
            assert (state / "layers" / "bm25" / "segments" / sid).is_dir()
