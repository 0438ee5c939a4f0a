"""The MCP attack table (issue 18): one lar MCP server over stdio, driven by the MCP SDK's own
client through a table of hostile calls. For every row: refused with a clear error (rows marked
``REFUSE``) or answered without forbidden text (rows marked ``CLEAN``); no file written outside
the temp dir and nothing outside the root changed; no secret or above-the-root text in any
reply; and the server still answers a normal call afterwards.

The server's own environment is hostile too (pager, GIT_* and config variables that would run
a program), so every git row also checks that tools run in a clean environment.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.slow  # one server, ~260 calls: 20-40 s
REPO = Path(__file__).resolve().parents[2]
LAYERS = ["names", "grep", "bm25", "trigram"]
SECRETS = ("OUTSIDE-SECRET", "STATE-SECRET", "ABOVE-SECRET")
NAMES_ABOVE = ("above.txt",)  # file names above the root: never in a reply unless asked about
REFUSE, CLEAN = "refuse", "clean"
NAN, INF = float("nan"), float("inf")


def _rows(tmp: str) -> list[tuple[str, str, dict, str]]:
    """(row id, tool, arguments, expectation). ``tmp`` is the temp dir (for PWNED markers)."""
    pw = f"{tmp}/pwned/PWNED"
    sh = f"sh -c 'touch {pw}'"
    rows: list[tuple[str, str, dict, str]] = []

    def run(rid: str, argv, expect: str = REFUSE, **extra) -> None:
        rows.append((rid, "run_tool", {"command": argv, **extra}, expect))

    # -- issue 18's named exploits ----------------------------------------------------------
    run("git-grep-open-files-abbrev", ["git", "grep", f"--open-files={sh}", "-e", "x"])
    run("grep-deref-abbrev", ["grep", "--deref", "zebracorn", "."])
    run("git-diff-no-rel", ["git", "diff", "--no-rel"])
    run("git-show-no-relat", ["git", "show", "--no-relat"])
    run("tail-fol", ["tail", "--fol", "src/a.py"], timeout=2)
    run("rg-uuu-state", ["rg", "-uuu", "--no-filename", "zebracorn"])
    run("git-show-head-tree", ["git", "show", "HEAD^{tree}"])
    rows.append(("search-scope-**", "search", {"query": "zebracorn", "scope": "**", "timebox": 3,
                                               "layers": ["grep"]}, CLEAN))
    rows.append(("search-scope-/**", "search", {"query": "zebracorn", "scope": "/**",
                                                "timebox": 3, "layers": ["grep"]}, CLEAN))
    rows.append(("search-scope-*", "search", {"query": "zebracorn", "scope": "*", "timebox": 3,
                                              "layers": ["grep"]}, CLEAN))
    # -- abbreviations, = and separate forms, clusters ---------------------------------------
    for i, argv in enumerate([
        ["git", "grep", "--open-files-in-pager", sh, "-e", "x"],
        ["git", "grep", f"--open-files-in-pager={sh}", "x"], ["git", "grep", "--open", sh, "x"],
        ["git", "grep", f"-O{sh}", "x"], ["git", "grep", "-O", sh, "x"], ["git", "grep", "-nO", "x"],
        ["grep", "--dereference-recursive", "zebracorn", "."], ["grep", "--dere", "z", "."],
        ["grep", "-R", "zebracorn", "."], ["grep", "-rR", "z", "."], ["grep", "-nR", "z", "."],
        ["grep", "-d", "recurse", "z", "."], ["grep", "--directories=recurse", "z", "."],
        ["grep", "-f", "../outside/secret.txt", "."], ["grep", "--file=escape/secret.txt", "."],
        ["git", "diff", "--no-relative"], ["git", "diff", "--no-relat"], ["git", "log", "-p", "--no-rela"],
        ["git", "show", "--no-relative=x"], ["git", "diff", "--output=x.txt"],
        ["git", "diff", "--out", f"{tmp}/pwned/x"], ["git", "diff", "--ext-diff"], ["git", "diff", "--ext"],
        ["git", "log", "--textconv"], ["git", "diff", "--no-index", "/etc/passwd", "src/a.py"],
        ["git", "diff", "--no-ind", "../above.txt", "src/a.py"],
        ["tail", "--follow", "src/a.py"], ["tail", "-f", "src/a.py"], ["tail", "-F", "src/a.py"],
        ["tail", "-fn1", "src/a.py"], ["tail", "--follow=name", "src/a.py"], ["tail", "--ret", "src/a.py"],
        ["tail", "--pid=1", "src/a.py"], ["tail", "-nf", "src/a.py"],
        ["rg", "-u", "zebracorn"], ["rg", "-uu", "zebracorn"], ["rg", "--unrestricted", "zebracorn"],
        ["rg", "--no-ignore", "zebracorn"], ["rg", "--no-ignore-vcs", "zebracorn"],
        ["rg", "--hidden", "zebracorn"], ["rg", "-.", "zebracorn"], ["rg", "--hid", "zebracorn"],
        ["rg", "--follow", "zebracorn"], ["rg", "-L", "zebracorn"], ["rg", "-nL", "zebracorn"],
        ["rg", "--pre", "sh", "zebracorn"], ["rg", f"--pre={sh}", "zebracorn"],
        ["rg", "--pre-glob=*", "zebracorn"], ["rg", "-z", "zebracorn"], ["rg", "--search-zip", "z"],
        ["rg", f"--hostname-bin={sh}", "z"], ["rg", "-g", ".lar/**", "zebracorn"],
        ["rg", "--glob=**", "zebracorn"], ["rg", "--iglob", "*.out", "zebracorn"],
        ["rg", "--ignore-file=../outside/secret.txt", "z"], ["rg", "zebracorn", ".lar"],
        ["rg", "zebracorn", ".lar/tools/outputs"], ["rg", "-f", "escape/secret.txt"],
        ["rg", "--type-add", "x:*", "-tx", "z"], ["rg", "--no-config=x", "z"],
    ]):
        run(f"option-{i:02d}", argv, timeout=2)
    # -- git: global options, config, revisions reaching outside the subtree ---------------
    for i, argv in enumerate([
        ["git", "-c", f"core.pager={sh}", "log"], ["git", "-c", "core.pager=sh", "-p", "log"],
        ["git", f"--config-env=core.pager=PATH", "log"], ["git", "-C", "..", "log"],
        ["git", "--git-dir=../.git", "log"], ["git", "--work-tree=..", "status"],
        ["git", "--exec-path=/tmp", "log"], ["git", "--no-pager", "log"], ["git", "-p", "log"],
        ["git", "push"], ["git", "config", "core.pager", "sh"], ["git", "difftool"],
        ["git", "show", "HEAD:"], ["git", "show", "HEAD:../above.txt"], ["git", "show", "HEAD:above.txt"],
        ["git", "show", "HEAD~0^{tree}"], ["git", "show", "HEAD^{/init}"], ["git", "log", ":/init"],
        ["git", "diff", "HEAD", "--", ":(top)above.txt"], ["git", "diff", "--", "../above.txt"],
        ["git", "diff", "HEAD", "../above.txt"], ["git", "log", "--all"], ["git", "show", "HEAD@{0}"],
        ["git", "grep", "--no-index", "zebracorn"], ["git", "grep", "--untracked", "zebracorn"],
        ["git", "grep", "--recurse-submodules", "z"], ["git", "grep", "-f", "/etc/passwd"],
        ["git", "ls-files", "--full-name"], ["git", "ls-files", "-o"], ["git", "ls-files", "--oth"],
        ["git", "ls-files", "--ignored", "-o"], ["git", "status", "--ignored"],
        ["git", "blame", "--contents=/etc/passwd", "src/a.py"], ["git", "log", "-L1,1:../above.txt"],
        ["git", "log", f"--output={tmp}/pwned/x"], ["git", "show", "--git-dir=.."],
    ]):
        run(f"git-{i:02d}", argv)
    # -- find, cat, ls, head, wc: programs, writes, symlinks, the state, paths out ----------
    for i, argv in enumerate([
        ["find", ".", "-exec", "sh", "-c", f"touch {pw}", ";"], ["find", ".", "-execdir", "id", ";"],
        ["find", ".", "-ok", "id", ";"], ["find", ".", "-delete"],
        ["find", ".", "-fprint", f"{tmp}/pwned/x"], ["find", ".", "-fls", f"{tmp}/pwned/x"],
        ["find", "-L", "."], ["find", "-H", "escape"], ["find", ".", "-follow"],
        ["find", ".", "-mindepth", "2"], ["find", ".lar"], ["find", ".."], ["find", "/"],
        ["find", "escape/"], ["find", ".", "-newer", "../outside/secret.txt"],
        ["cat", "../outside/secret.txt"], ["cat", "/etc/passwd"], ["cat", "escape/secret.txt"],
        ["cat", ".lar/tools/outputs/planted.out"], ["cat", "--", "../outside/secret.txt"],
        ["cat", "-n", "--", "escape/secret.txt"], ["cat", "src/../../outside/secret.txt"],
        ["cat", "../../above.txt"], ["head", "-c", "100", "escape/secret.txt"],
        ["head", "--lines=1", ".lar/tools/outputs/planted.out"], ["wc", "--files0-from=/etc/passwd"],
        ["ls", "-a"], ["ls", "-la"], ["ls", "--all"], ["ls", "-L", "escape"], ["ls", "--", "../"],
        ["ls", "/"], ["ls", "--deref"], ["tail", "-n", "1", "escape/secret.txt"],
        ["grep", "-r", "zebracorn", "escape"], ["rg", "zebracorn", "escape/"],
        ["git", "grep", "zebracorn", "--", "escape"],
    ]):
        run(f"path-{i:02d}", argv)
    # -- '--' tricks: what follows '--' is an operand, never an option ----------------------
    for i, argv in enumerate([
        ["rg", "--", "--pre=sh", "src"], ["grep", "-r", "--", "--deref", "."],
        ["git", "diff", "--", "--no-relative"], ["tail", "--", "--follow"],
        ["git", "grep", "-e", "x", "--", f"--open-files-in-pager={sh}"], ["cat", "--", "-"],
        ["rg", "-e", "--hidden", "src"], ["grep", "-e", "--dereference-recursive", "-r", "."],
    ]):
        run(f"dashdash-{i}", argv, CLEAN)
    # -- allowed calls the hostile environment must not turn into an attack -----------------
    for i, argv in enumerate([
        ["git", "log", "-p"], ["git", "diff"], ["git", "show"], ["git", "status"],
        ["git", "log", "--stat"], ["git", "grep", "-n", "zebracorn"], ["git", "blame", "src/a.py"],
        ["rg", "--no-filename", "zebracorn"], ["grep", "-rn", "zebracorn", "."], ["find", "."],
        ["ls", "-R"], ["rg", "--files"], ["git", "ls-files"],
    ]):
        run(f"allowed-{i:02d}", argv, CLEAN)
    # -- huge and malformed arguments -------------------------------------------------------
    run("huge-1mb-arg", ["rg", "x" * 1_000_000])
    run("huge-10k-args", ["rg", "x", *(["src"] * 10_000)])
    run("nul-byte", ["cat", "src/a.py\x00../outside/secret.txt"])
    for i, bad in enumerate(["cat src/a.py", [1, 2], [], None, [["rg"]], {"argv": ["ls"]}]):
        run(f"command-type-{i}", bad)
    for i, (cwd) in enumerate(["..", "/", "escape", ".lar", "../outside", 5]):
        run(f"cwd-{i}", ["ls"], cwd=cwd)
    # JSON has no NaN or infinity: the SDK client sends null for them, which means "default";
    # such rows must merely stay harmless. Their text forms reach the server and are refused.
    for i, t in enumerate([NAN, INF]):
        run(f"timeout-float-{i}", ["ls"], CLEAN, timeout=t)
    for i, t in enumerate(["nan", "inf", "-inf", -1, 0, 1e308, "x", True, "-5s"]):
        run(f"timeout-{i}", ["ls"], timeout=t)
    run("env-argument", ["git", "log"], env={"GIT_PAGER": sh})
    for i, x in enumerate([NAN, INF]):
        for tool, args in (("search", {"query": "zebracorn", "timebox": x}),
                           ("search", {"query": "zebracorn", "k": x}),
                           ("fetch", {"id": "src/a.py:1", "context": x}),
                           ("inventory", {"limit": x})):
            rows.append((f"{tool}-{next(iter(set(args) - {'query', 'id'}))}-float-{i}", tool,
                         args, CLEAN))
    for i, tb in enumerate(["nan", "inf", "-inf", -1, 0, "1e9s", "abc", [], 1e308]):
        rows.append((f"search-timebox-{i}", "search", {"query": "zebracorn", "timebox": tb}, REFUSE))
    for i, k in enumerate([-1, 0, 10**9, 1.5, "3", "nan"]):
        rows.append((f"search-k-{i}", "search", {"query": "zebracorn", "k": k}, REFUSE))
    for i, c in enumerate([-1, 10**12, "1", "nan"]):
        rows.append((f"fetch-context-{i}", "fetch", {"id": "src/a.py:1", "context": c}, REFUSE))
    for i, (lim, off) in enumerate([(-1, 0), (1, -5), ("nan", 0), (10**9, 0)]):
        rows.append((f"inventory-bad-{i}", "inventory", {"limit": lim, "offset": off}, REFUSE))
    rows.append(("search-huge-query", "search", {"query": "z" * 1_000_000, "timebox": 2}, CLEAN))
    rows.append(("search-wrong-type", "search", {"query": ["zebracorn"]}, REFUSE))
    rows.append(("fetch-huge-id", "fetch", {"id": "t" + "0" * 1_000_000}, REFUSE))
    # -- scopes and reads that must never reach the state, ignored/hidden files, outside ----
    for i, scope in enumerate(["**", "/**", "*", ".lar/**", "../**", "**/.lar/**", "**/*.out",
                               {"include": [".lar/**"]}, {"include": ["**"], "exclude": []},
                               [".*/**", "**"], "ignored.txt", ".hidden/**"]):
        for layers in (["grep"], None):
            rows.append((f"scope-{i:02d}-{'grep' if layers else 'all'}", "search",
                         {"query": "zebracorn", "scope": scope, "timebox": 3,
                          **({"layers": layers} if layers else {})}, CLEAN))
    rows.append(("search-tools-source", "search", {"query": "zebracorn", "source": "tools",
                                                   "timebox": 3}, CLEAN))
    for i, fid in enumerate([".lar/tools/outputs/planted.out:1", "../outside/secret.txt:1",
                             "escape/secret.txt:1", "ignored.txt:1", ".hidden/h.txt:1",
                             "/etc/passwd:1"]):
        rows.append((f"fetch-path-{i}", "fetch", {"id": fid}, REFUSE))
    for i, glob in enumerate([".lar/**", "**", "../**", ".hidden/**"]):
        rows.append((f"inventory-glob-{i}", "inventory", {"glob": glob, "limit": 100}, CLEAN))
    return rows


def make_world(tmp: Path) -> tuple[Path, Path]:
    """tmp/repo is a git repo; the served root is tmp/repo/root; secrets above it, outside it
    (reached by a symlink) and in its state folder; ignored and hidden files inside it."""
    repo, root = tmp / "repo", tmp / "repo" / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("zebracorn = 'public'\n")
    (root / "docs").mkdir()
    (root / "docs" / "n.md").write_text("# zebracorn notes\n")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text("zebracorn OUTSIDE-SECRET ignored\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.txt").write_text("zebracorn OUTSIDE-SECRET hidden\n")
    (repo / "above.txt").write_text("zebracorn ABOVE-SECRET\n")
    g = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run(g + args, cwd=repo, check=True, capture_output=True)
    (repo / "above.txt").write_text("zebracorn ABOVE-SECRET changed\n")
    (root / "src" / "a.py").write_text("zebracorn = 'public, changed'\n")
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text("zebracorn OUTSIDE-SECRET\n")
    (root / "escape").symlink_to(tmp / "outside")
    out = root / ".lar" / "tools" / "outputs"
    out.mkdir(parents=True)
    (out / "planted.out").write_text("zebracorn STATE-SECRET\n")
    (tmp / "pwned").mkdir()
    return repo, root


def snapshot(*dirs: Path) -> dict[str, bytes]:
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file() and not p.is_symlink() and ".lar" not in p.relative_to(d).parts:
                out[str(p)] = p.read_bytes()
    return out


async def _drive(root: Path, rows, watched: tuple[Path, ...]) -> list[tuple]:
    """(ok, reply text, files the index holds after it (None: no answer), PWNED written,
    watched files changed) per row, all through
    one server; a PWNED marker is removed after its row so each row is judged on its own."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    pw = root.parents[1] / "pwned" / "PWNED"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]),
               GIT_PAGER=f"touch {pw}", PAGER=f"touch {pw}", GIT_EXTERNAL_DIFF=f"touch {pw}",
               GIT_CONFIG_PARAMETERS=f"'core.pager'='touch {pw}'", GIT_DIR=str(root.parent / ".git"),
               GIT_WORK_TREE=str(root.parent), LESSOPEN=f"|touch {pw}")
    params = StdioServerParameters(
        command=sys.executable, cwd=str(root), env=env,
        args=["-m", "lar.apps.cli", "mcp", "--root", str(root), "--layers", ",".join(LAYERS)])
    results = []
    prev = snapshot(*watched)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool("build", {"timebox": 30})
            assert not first.is_error, first.content[0].text
            for _, tool, args, _ in rows:
                try:
                    res = await session.call_tool(tool, args)
                    ok, text = not res.is_error, "".join(getattr(c, "text", "") for c in res.content)
                except Exception as exc:  # a transport error counts as a refusal with a reason
                    ok, text = False, f"client error: {exc}"
                alive = await session.call_tool("inventory", {"limit": 1})
                pwned = pw.exists()
                pw.unlink(missing_ok=True)
                now = snapshot(*watched)
                total = None if alive.is_error else json.loads(alive.content[0].text)["total"]
                results.append((ok, text, total, pwned, now != prev))
                prev = now
    return results


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attack")
    repo, root = make_world(tmp)
    rows = _rows(str(tmp))
    results = anyio.run(_drive, root, rows, (tmp / "outside", tmp / "pwned", repo))
    return rows, results


ROWS = _rows("/TMP")


def test_the_table_is_large_enough():
    assert len(ROWS) >= 100 and len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("i", range(len(ROWS)), ids=[r[0] for r in ROWS])
def test_attack(table, i):
    rows, results = table
    rid, tool, args, expect = rows[i]
    ok, text, total, pwned, changed = results[i]
    asked = json.dumps(args)[:2_000_000]
    assert total is not None, f"{rid}: the server stopped answering"
    assert not pwned, f"{rid}: a program ran (PWNED written)"
    assert not changed, f"{rid}: files outside the root (or above it) changed"
    for s in SECRETS:
        assert s not in text, f"{rid}: the reply holds {s}: {text[:300]}"
    for name in NAMES_ABOVE:
        assert name in asked or name not in text, f"{rid}: the reply names {name}"
    if expect == REFUSE:
        assert not ok, f"{rid}: was not refused: {text[:300]}"
        body = json.loads(text) if text.startswith("{") else {"error": text}
        assert len(body["error"]) > 20, f"{rid}: the error does not say what was wrong: {body}"
        assert body.get("type") != "ToolTimeoutError", f"{rid}: it ran (until the timeout)"
    assert total == 2, f"{rid}: the index now holds {total} files, not the 2 material ones"
