"""lar.layers.grep_run: one ripgrep run on a worker thread, stopped by kill() or an output cap;
and the grep layer that runs it (refusals, the deadline, same hits as before the move)."""
from __future__ import annotations

import sys
import threading
import time

import lar
from lar.layers.grep_run import RgRun

PY = sys.executable


def test_a_whole_run_returns_its_output_and_return_code(tmp_path):
    res = RgRun([PY, "-c", "print('a'); print('b')"], str(tmp_path), 1 << 20).run()
    assert (res.out, res.killed, res.capped, res.returncode) == (b"a\nb\n", False, False, 0)


def test_kill_before_the_start_runs_nothing(tmp_path):
    run = RgRun([PY, "-c", "open('ran', 'w').write('x')"], str(tmp_path), 1 << 20)
    run.kill()
    res = run.run()
    assert res.killed and res.out == b"" and res.returncode is None
    assert not (tmp_path / "ran").exists()


def test_kill_from_another_thread_ends_a_long_run_with_what_it_wrote(tmp_path):
    run = RgRun([PY, "-u", "-c", "import time\nprint('first')\ntime.sleep(60)"], str(tmp_path), 1 << 20)
    threading.Timer(1.0, run.kill).start()
    t = time.monotonic()
    res = run.run()
    assert time.monotonic() - t < 30
    assert res.killed and not res.capped and res.out == b"first\n"


def test_the_output_cap_kills_the_run_and_says_so(tmp_path):
    res = RgRun([PY, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"], str(tmp_path),
                200_000).run()
    assert res.killed and res.capped and len(res.out) > 200_000


def test_stderr_is_kept_for_a_refusal_only(tmp_path):
    res = RgRun([PY, "-c", "import sys; sys.stderr.write('bad pattern'); sys.exit(2)"], str(tmp_path),
                1 << 20).run()
    assert res.returncode == 2 and res.stderr == b"bad pattern" and not res.killed
    res = RgRun([PY, "-c", "import sys; print('m'); sys.stderr.write('noise'); sys.exit(2)"],
                str(tmp_path), 1 << 20).run()
    assert res.out == b"m\n" and res.stderr == b""


def test_the_grep_layer_finds_ranks_and_refuses_as_before(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("x = 1\ndef alpha_beta():\n    return 'alpha beta'\n")
    (root / "b.py").write_text("alpha = 2\n")
    with lar.open(root, state=tmp_path / "state") as eng:
        res = eng.search("alpha beta", layers=["grep"], timebox=10)
        got = [(h.path, h.lines, h.score) for h in res.hits]
        assert got[0][:2] == ("a.py", (3, 3))  # the phrase line first
        assert {p for p, _, _ in got} == {"a.py", "b.py"}
        assert res.run("grep").state.value == "ran" and res.run("grep").coverage == 1.0
        bad = eng.search({"grep": {"regex": "def ("}}, timebox=5)
        run = bad.run("grep")
        assert bad.hits == () and run.state.value == "failed" and "refused" in run.reason


def test_the_grep_layer_kills_a_run_at_its_deadline_and_marks_it_partial(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("alpha\n")
    with lar.open(root, state=tmp_path / "state") as eng:
        layer = eng.layers["grep"]
        # a stand-in for a slow ripgrep: one row in lar's compact form, then nothing for a minute
        slow = [PY, "-u", "-c", "import sys, time\nsys.stdout.write('./a.py\\x001:0:alpha\\n')\n"
                "sys.stdout.flush()\ntime.sleep(60)"]
        monkeypatch.setattr(type(layer), "command", lambda self, q, scope: slow)
        t = time.monotonic()
        res = eng.search("alpha", layers=["grep"], timebox=1.0)
        assert time.monotonic() - t < 20  # not the minute the child sleeps
        run = res.run("grep")
        assert run.coverage is None and run.state.value in ("ran", "aborted")
        assert [h.path for h in res.hits] in ([], ["a.py"])


def test_material_by_split_agrees_with_the_path_components():
    from pathlib import PurePosixPath

    from lar.core.scope import material

    def by_parts(path, state=None):
        if any(p.startswith(".") and p not in (".", "..") for p in PurePosixPath(path).parts):
            return False
        return not (state is not None and (path == state[:-3] or path.startswith(state[:-2])))

    paths = ["a.py", "src/a.py", ".env", "a/.env", "a//b.py", "./a.py", "a/./.git/x", "../a", "a/../b",
             "a/..b/c", "/abs/a", "a/b/", ".", "..", "a/.", ".lar/x", "cache/x", "cache", "cachex/y",
             "a\nb/.c", "é/.ü", "a/.../b", ""]
    for p in paths:
        for st in (None, ".lar/**", "cache/**"):
            assert material(p, st) == by_parts(p, st), (p, st)
    assert not material("a/./.git/x") and material("a/..b/c") is False and material("a//b.py")


def test_rows_group_into_lines_with_signatures_and_lazy_matches():
    from lar.layers.grep_lines import file_runs, group_lines

    out = (b"./a.py\x001:0:foo\n./a.py\x001:4:foo\n./a.py\x002:10:bar\n./a.py\x002:14:foo\n"
           b"./b\npy\x003:7:foo\n")  # a path with a newline in it
    ids = {b"foo": 0, b"bar": 1}
    asked = []
    lines = group_lines(out, lambda m: asked.append(m) or ids[m], lambda rows: False)
    assert sorted(asked) == [b"bar", b"foo"]  # once per distinct match text
    assert lines.files == [b"./a.py", b"./a.py", b"./b\npy"]
    assert lines.sigs == [0, frozenset({0, 1}), 0]  # the same key twice stays one id
    assert [lines.matches(i) for i in range(3)] == [[(0, b"foo"), (4, b"foo")],
                                                     [(10, b"bar"), (14, b"foo")], [(7, b"foo")]]
    assert not lines.cut_short
    one = group_lines(b"x\x001:0:foo\ny\x002:3:foo\n", ids.__getitem__, lambda rows: False)
    assert one.files == [b"x", b"y"] and one.sigs == [0, 0] and one.matches(1) == [(3, b"foo")]
    assert file_runs([b"a", b"a", b"b"], {b"a": 2, b"b": 1}) == {b"a": range(0, 2), b"b": range(2, 3)}
    assert file_runs([b"a", b"b", b"a"], {b"a": 2, b"b": 1}) is None


def test_a_stop_between_slices_cuts_the_grouping_short():
    from lar.layers import grep_lines

    row = b"./a.py\x001:0:foo\n"
    out = row * (2 * grep_lines.STEP // len(row) + 10)
    lines = grep_lines.group_lines(out, lambda m: 0, lambda rows: rows > 0)
    assert lines.cut_short and 0 < len(lines) < out.count(b"\n")


def test_grep_ranks_one_word_ties_round_robin_over_files_most_lines_first(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("zeta 1\nzeta 2\nzeta 3\n")
    (root / "b.txt").write_text("zeta 4\n")
    (root / "c.txt").write_text("zeta 5\nzeta 6\n")
    with lar.open(root, state=tmp_path / "state") as eng:
        res = eng.search({"grep": "zeta"}, timebox=10)
        assert [h.excerpt for h in res.hits] == ["zeta 1", "zeta 5", "zeta 4", "zeta 2", "zeta 6", "zeta 3"]
