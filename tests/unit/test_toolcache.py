"""The two-stage tool-output cache: keys, views, fetches, the guard of a rooted cache."""
from __future__ import annotations

import functools
import json
import os
import sys

import pytest

from lar.core.errors import ConfigError
from lar.apps.toolcache import (OutOfScopeError, ToolCache, ToolIdError, ToolNotAllowedError,
                           ToolRunError, ToolTimeoutError, count_tokens, parse_tool_id)
from lar.apps.toolcache.view import group, split_lines

SAMPLE = ("src/a.py:1:import os\n"
          "src/a.py:2:import sys\n"
          "src/b.py:10:def f():\n"
          "src/b.py:11:    return 1\n"
          "\n"
          "warning: x\n"
          "warning: x\n"
          "warning: x\n"
          + "y" * 50 + "\n"
          "\n"
          "tail line\n")


def sample_output() -> str:
    return SAMPLE


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def tc(tmp_path):
    return ToolCache(tmp_path / "tc", max_line=20, view_lines=6, item_lines=2)


def test_view_of_a_known_output_is_exact(tc):
    v = tc.run(sample_output)
    assert v.id.startswith("t") and len(v.id) == 13 and not v.cached
    assert v.text == "\n".join([
        f"{v.id} $ {v.command}  (exit 0, 11 lines, 4 items)",
        f"[{v.id}:1 L1-2 src/a.py]", "1:import os", "2:import sys",
        f"[{v.id}:2 L3-5 src/b.py]", "10:def f():", "11:    return 1",
        f"[{v.id}:3 L6-10]", "warning: x  [×3]", "yyyyyyyyyyyyyyyyyyyy…[+30 chars]",
        f"… 1 more item ({v.id}:4) not shown"])
    d = v.to_dict()
    assert d["items"][0] == {"id": f"{v.id}:1", "L": [1, 2], "label": "src/a.py",
                             "text": "1:import os\n2:import sys"}
    assert d["omitted"] == {"items": 1, "lines": 1, "cut": 1} and d["rest"] == f"{v.id}:4"
    assert d["exit"] == 0 and d["lines"] == 11 and d["n_items"] == 4 and "cached" not in d
    assert v.raw_tokens == count_tokens(SAMPLE)
    compact = v.to_compact()
    assert "cmd" not in compact and compact["items"][0] == {"id": f"{v.id}:1", "label": "src/a.py",
                                                            "text": "1:import os\n2:import sys"}
    assert v.view_tokens == count_tokens(json.dumps(compact, ensure_ascii=False, separators=(",", ":")))
    # determinism: the same output gives the same view, in this process and from the store
    again = ToolCache(tc.directory, max_line=20, view_lines=6, item_lines=2).view(v.id)
    assert again.items == v.items and again.omitted == v.omitted and again.cached


def test_fetch_returns_filtered_and_shown_items_in_full(tc):
    v = tc.run(sample_output)
    parts = [tc.fetch(f"{v.id}:{n}").text for n in range(1, 5)]
    assert "".join(parts) == SAMPLE == tc.fetch(v.id).text == tc.text(v.id)
    assert parts[3] == "tail line\n"  # item 4 was left out of the view
    assert parts[2] == "warning: x\nwarning: x\nwarning: x\n" + "y" * 50 + "\n\n"
    f = tc.fetch(f"{v.id}:1-2")
    assert f.items == (1, 2) and f.lines == (1, 5) and f.text == SAMPLE.split("warning")[0]
    assert tc.fetch(f"{v.id}:L9").text == "y" * 50 + "\n"
    assert tc.fetch(f"{v.id}:L10-99").lines == (10, 11)
    with pytest.raises(ToolIdError, match="has 4 items"):
        tc.fetch(f"{v.id}:5")
    with pytest.raises(ToolIdError, match="not a tool id"):
        tc.fetch("3fa9c1d2e4b5:1-2")
    with pytest.raises(ToolIdError, match="no cached tool output"):
        tc.fetch("t000000000000:1")


def test_grouping_collapse_and_whole_small_outputs(tmp_path):
    lines, final = split_lines("a\n\nfind/x/1.py\nfind/x/2.py\nfind/y.py\n" + "row\n" * 45)
    assert final and group(lines) == [(0, 2, None), (2, 5, "find"), (5, 25, None),
                                      (25, 45, None), (45, 50, None)]
    tc = ToolCache(tmp_path / "tc")  # defaults: everything fits in 40 lines, so all is shown
    v = tc.run(lambda: "same\n" * 30 + "other\n")
    assert [it.shown for it in v.items] == [("same  [×20]",), ("same  [×10]", "other")]
    assert v.omitted.lines == 0 and v.rest is None
    small = tc.run(lambda: "one\ntwo\n")  # nothing left out, and the text is cheaper than items
    assert small.to_compact() == {"id": small.id, "exit": 0, "lines": 2, "n_items": 1,
                                  "text": "one\ntwo\n"}
    assert small.view_tokens == count_tokens(json.dumps(small.to_compact(), separators=(",", ":")))
    assert "items" in small.to_dict() and tc.fetch(f"{small.id}:1").text == "one\ntwo\n"
    dup = tc.run(lambda: "x\ny\n\nx\ny\n")
    assert dup.items[1].same_as == f"{dup.id}:1" and dup.to_dict()["items"][1]["text"] == f"(same as {dup.id}:1)"


def test_cache_hit_refresh_and_max_age(tc):
    calls = []

    def tool(n):
        calls.append(n)
        return f"call {len(calls)}\n"

    first = tc.run(tool, args=(1,))
    hit = tc.run(tool, args=(1,))
    assert calls == [1] and hit.cached and hit.time == first.time and hit.id == first.id
    assert tc.fetch(hit.id).text == "call 1\n"
    fresh = tc.run(tool, args=(1,), refresh=True)
    assert not fresh.cached and calls == [1, 1] and tc.fetch(fresh.id).text == "call 2\n"
    other = tc.run(functools.partial(tool, 2))
    assert other.id != first.id and other.command.endswith("tool(2)")
    cmd = py("import time; print(time.time_ns())")
    a, b = tc.run(cmd), tc.run(cmd)
    before = tc.fetch(a.id).text
    assert b.cached and b.id == a.id and tc.fetch(b.id).text == before
    c = tc.run(cmd, max_age=1e-9)  # older than max_age: run again (same key, new output)
    assert not c.cached and c.id == a.id and tc.fetch(c.id).text != before
    rec = tc.record(a.id)
    assert rec.kind == "command" and rec.command == tuple(cmd) and rec.returncode == 0


def test_key_depends_on_cwd_env_and_input(tc, tmp_path):
    cat = py("import sys; sys.stdout.write(sys.stdin.read())")
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a = tc.run(cat, input="alpha", cwd=tmp_path / "d1")
    assert tc.fetch(a.id).text == "alpha"
    assert tc.run(cat, input=b"alpha", cwd=tmp_path / "d1").id == a.id
    assert tc.run(cat, input="beta", cwd=tmp_path / "d1").id != a.id
    assert tc.run(cat, input="alpha", cwd=tmp_path / "d2").id != a.id
    env = dict(os.environ, LANG="C.UTF-8")
    e1 = tc.run(cat, input="alpha", cwd=tmp_path / "d1", env=env)
    assert tc.run(cat, input="alpha", cwd=tmp_path / "d1", env=dict(env, LANG="de_DE.UTF-8")).id != e1.id
    assert tc.run(cat, input="alpha", cwd=tmp_path / "d1", env=dict(env, UNRELATED="1")).id == e1.id


def test_stderr_exit_code_timeouts_and_bad_callables(tc):
    v = tc.run(py("import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"))
    assert v.returncode == 3 and tc.fetch(v.id).text == "out\n[stderr]\nerr\n"
    with pytest.raises(ToolTimeoutError, match="did not finish within 0.5 s"):
        tc.run(py("import time; time.sleep(30)"), timeout=0.5)
    with pytest.raises(ToolTimeoutError, match="did not return within 0.1 s"):
        tc.run(lambda: __import__("time").sleep(1) or "late", timeout=0.1)
    assert len(tc.records()) == 1  # nothing cached for either timeout
    with pytest.raises(ToolRunError, match="returned int"):
        tc.run(lambda: 42)
    with pytest.raises(ToolRunError, match="was not found on PATH"):
        tc.run(["no-such-command-lar"])
    with pytest.raises(ConfigError, match="list of strings"):
        tc.run("ls -la")
    with pytest.raises(ConfigError, match="timeout"):
        tc.run(["ls"], timeout=0)


def test_outputs_are_a_corpus(tc):
    v = tc.run(lambda: "alpha\nzebracorn_token here\n")
    assert (tc.corpus_dir / f"{v.id}.txt").read_text() == "alpha\nzebracorn_token here\n"
    with tc.engine() as eng:
        res = eng.search("zebracorn_token", layers=["grep"], timebox=5)
        hit = res.hits[0]
        assert tc.id_for_path(hit.path) == v.id and hit.lines == (2, 2)
        assert tc.fetch(f"{tc.id_for_path(hit.path)}:L2").text == "zebracorn_token here\n"


def test_parse_tool_id():
    assert parse_tool_id("tabcdef123456").kind == "all"
    t = parse_tool_id("tabcdef123456:3-7")
    assert (t.prefix, t.kind, t.a, t.b) == ("abcdef123456", "items", 3, 7)
    t = parse_tool_id("tabcdef:L5")
    assert (t.kind, t.a, t.b) == ("lines", 5, 5)
    for bad in ("abc:1", "tabc:1", "tabcdef123456:0", "tabcdef123456:5-2", "tabcdef:Lx"):
        with pytest.raises(ToolIdError):
            parse_tool_id(bad)


# -- the guard of a rooted cache (what the MCP server uses) ----------------------------------
@pytest.fixture
def rooted(tmp_path):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def alpha():\n    return 1\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (root / "escape").symlink_to(tmp_path / "outside")
    return root, ToolCache(tmp_path / "state" / "tools", root=root)


@pytest.mark.parametrize("argv, message", [
    (["bash", "-c", "ls"], "not on the allow-list"),
    (["/bin/ls"], "not on the allow-list"),
    (["cat", "../outside/secret.txt"], "outside the root"),
    (["cat", "src/../../outside/secret.txt"], "outside the root"),
    (["cat", "/etc/passwd"], "outside the root"),
    (["cat", "escape/secret.txt"], "symlink that leaves the root"),
    (["grep", "-r", "--include=../x", "TOP", "."], "outside the root"),
    (["find", ".", "-exec", "cat", "{}", ";"], "'-exec' of find is refused"),
    (["find", "-L", "."], "'-L' of find is refused"),
    (["rg", "--pre", "cat", "x"], "'--pre' of rg is refused"),
    (["rg", "--pre=cat", "x"], "'--pre' of rg is refused"),
    (["grep", "-rR", "x", "."], "'-R'"),
    (["git", "-c", "core.pager=sh", "log"], "git runs only these subcommands"),
    (["git", "push"], "git runs only these subcommands"),
    (["git", "show", "HEAD:secret.txt"], "rev:path"),
    (["git", "diff", "--output=x.txt"], "'--output' of git diff is refused"),
])
def test_guard_refuses(rooted, argv, message):
    _, tc = rooted
    with pytest.raises(ToolNotAllowedError, match=message):
        tc.run(argv)


def test_guard_runs_inside_and_refuses_cwd_and_callables_outside(rooted):
    root, tc = rooted
    v = tc.run(["grep", "-rn", "alpha", "."])
    assert tc.fetch(v.id).text == "./src/a.py:1:def alpha():\n"
    assert tc.run(["ls"], cwd="src").cwd == "src"
    assert tc.fetch(tc.run(["cat", "a.py"], cwd="src").id).text == "def alpha():\n    return 1\n"
    for cwd in ("..", "/", "escape"):
        with pytest.raises(ToolNotAllowedError, match="outside the root"):
            tc.run(["ls"], cwd=cwd)
    with pytest.raises(ToolNotAllowedError, match="only allow-listed commands"):
        tc.run(lambda: "x")


def test_outputs_from_elsewhere_or_escaping_later_are_not_served(rooted, tmp_path):
    root, tc = rooted
    free = ToolCache(tc.directory)  # same store, no guard: the Python API or `lar run`
    v = free.run(["cat", str(tmp_path / "outside" / "secret.txt")])
    assert free.fetch(v.id).text == "TOP SECRET\n"
    with pytest.raises(OutOfScopeError, match="not produced by this server's allow-list"):
        tc.fetch(v.id)
    assert v.id not in {r.id for r in tc.records()}
    (root / "link.txt").symlink_to(root / "src" / "a.py")
    served = tc.run(["cat", "link.txt"])
    (root / "link.txt").unlink()
    (root / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    with pytest.raises(OutOfScopeError, match="symlink that leaves the root"):
        tc.view(served.id)


def test_lines_naming_outside_paths_are_withheld(rooted):
    root, tc = rooted
    (root / "notes.txt").write_text(
        "kept line\n../outside/secret.txt:1:TOP SECRET\nsee ../outside/secret.txt too\n"
        "diff --git a/../outside/secret.txt b/../outside/secret.txt\n+TOP SECRET\n"
        "diff --git a/src/a.py b/src/a.py\n+def alpha():\n")
    v = tc.run(["cat", "notes.txt"])
    notice = "[lar: line withheld: it names ../outside/secret.txt, outside the root]"
    assert v.withheld == 4
    shown = [x for it in v.items for x in it.shown]
    assert shown == ["kept line", notice, notice + "  [×3]",  # identical notices collapse
                     "diff --git a/src/a.py b/src/a.py", "+def alpha():"]
    f = tc.fetch(v.id)
    assert "TOP SECRET" not in f.text and f.withheld == 4 and f.text.startswith("kept line\n")


def test_git_runs_read_only_and_relative_to_a_subfolder_root(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "a.py").write_text("x = 1\n")
    (repo / "top.txt").write_text("outside the served folder\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run(git + args, cwd=repo, check=True, capture_output=True)
    (repo / "sub" / "a.py").write_text("x = 2\n")
    (repo / "top.txt").write_text("changed outside\n")
    tc = ToolCache(tmp_path / "tc", root=repo / "sub")
    diff = tc.fetch(tc.run(["git", "diff"]).id).text
    assert "a/a.py" in diff and "+x = 2" in diff and "top.txt" not in diff
    show = tc.fetch(tc.run(["git", "show", "--stat", "--format=%s"]).id).text
    assert show.splitlines()[0] == "init" and "top.txt" not in show
    status = tc.fetch(tc.run(["git", "status", "--short"]).id).text
    assert status == " M a.py\n"  # limited to the root's subtree (`-- .`): top.txt never named
    assert tc.fetch(tc.run(["git", "grep", "-n", "x"]).id).text == "a.py:1:x = 2\n"


def test_lar_state_folder_inside_the_root_is_out_of_scope(tmp_path):
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("alpha = 1\n")
    state = root / ".lar"
    (state / "objects").mkdir(parents=True)
    (state / "objects" / "copy").write_text("alpha = 1\n")
    tc = ToolCache(state / "tools", root=root, hidden=[state])
    v = tc.run(["grep", "-rn", "alpha", "."])
    assert tc.fetch(v.id).text == "./src/a.py:1:alpha = 1\n" and tc.view(v.id).cached
    with pytest.raises(ToolNotAllowedError, match="lar's state folder"):
        tc.run(["cat", ".lar/objects/copy"])
    with pytest.raises(ToolNotAllowedError, match="outside the root"):
        tc.run(["ls"], cwd=".lar")
    listing = tc.fetch(tc.run(["find", ".", "-type", "f"]).id).text.splitlines()
    assert "./src/a.py" in listing and not any(".lar/" in x for x in listing)
    assert listing == ["./src/a.py"]  # find prunes hidden entries and the state: never listed


def test_lar_run_command_line(tmp_path, capsys):
    from lar.apps.cli import main

    state = str(tmp_path / "state")
    assert main(["run", "--state", state, "--json", "--", sys.executable, "-c", "print('hi')"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["items"] == [{"id": f"{view['id']}:1", "L": [1, 1], "text": "hi"}]
    assert main(["run", "--state", state, "--fetch", f"{view['id']}:L1"]) == 0
    assert capsys.readouterr().out == "hi\n"
    assert main(["run", "--state", state, "--fetch", "t000000000000"]) == 2
    assert "no cached tool output" in capsys.readouterr().err
