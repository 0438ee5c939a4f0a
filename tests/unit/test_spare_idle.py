"""With nothing to build, a search's spare time is an O(1) check (issue 26): no pass over the
units and no thread hop while every chosen layer's stamp stays where it was seen idle; any change
that can make a unit pending moves the stamp, and the next search builds it as before."""
import lar


def _folder(tmp_path, n=12):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(n):
        (root / f"note{i:02d}.txt").write_text(f"note {i}: the platypus count was {i * 7}\n")
    return root


def _counting(eng):
    calls = []
    real = eng.builder.spare

    def spare(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    eng.builder.spare = spare
    return calls


def test_nothing_to_build_skips_the_spare_build_after_one_look(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        eng.build(timebox=30, layers=["bm25"])
        calls = _counting(eng)
        results = [eng.search("platypus count", layers=["bm25"], timebox=10) for _ in range(4)]
        assert calls == [["bm25"]]  # the first search looked; the others knew
        assert all(r.hits == results[0].hits and len(r.hits) == 12 for r in results)


def test_a_forgotten_unit_moves_the_stamp_and_the_next_search_builds_it(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        eng.build(timebox=30, layers=["bm25"])
        layer = eng.layers["bm25"]
        calls = _counting(eng)
        eng.search("platypus", layers=["bm25"], timebox=10)
        eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 1
        h = eng.scope_view().units()[3].hash
        layer.manifest.forget([h])  # its rows are gone: the unit is pending again
        assert h not in layer.built()
        eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 2 and layer.built().get(h) == "ok"  # spare time rebuilt it
        eng.search("platypus", layers=["bm25"], timebox=10)  # built: the stamp moved once more
        eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 3


def test_a_new_file_moves_the_stamp(tmp_path):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        eng.build(timebox=30, layers=["bm25"])
        calls = _counting(eng)
        eng.search("platypus", layers=["bm25"], timebox=10)
        eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 1
        seq = eng.index.max_seq()
        (root / "zebra.txt").write_text("a zebra note\n")
        eng.index_now()
        assert eng.index.max_seq() != seq
        res = eng.search("zebra", layers=["bm25"], timebox=10)
        assert len(calls) == 2
        assert [h.path for h in res.hits] == ["zebra.txt"]


def test_a_layer_without_a_stamp_is_looked_at_every_time(tmp_path, monkeypatch):
    root = _folder(tmp_path)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        eng.build(timebox=30, layers=["bm25"])
        monkeypatch.setattr(eng.layers["bm25"], "build_stamp", lambda: None)
        calls = _counting(eng)
        for _ in range(3):
            eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 3


def test_a_layer_with_work_left_is_built_on_every_search(tmp_path):
    root = _folder(tmp_path, n=30)
    with lar.open(root, state=tmp_path / "state", spare_build=True) as eng:
        calls = _counting(eng)
        eng.search("platypus", layers=["bm25"], timebox=10)
        eng.search("platypus", layers=["bm25"], timebox=10)
        assert len(calls) == 2
        assert eng.layers["bm25"].coverage(eng.scope_view()) == 1.0
