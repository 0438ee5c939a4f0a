"""Issue 18, security items 1-3: each test is named after the defect it pins down. Each of these
ran (or leaked) with the deny list that was there before."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lar.apps.toolcache import ToolCache, ToolNotAllowedError


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   cwd=repo, check=True, capture_output=True)


@pytest.fixture
def world(tmp_path):
    """A git repo whose served root is a subfolder; a file above the root; a symlink out."""
    repo = tmp_path / "repo"
    root = repo / "sub"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("alpha = 1\n")
    (repo / "above.txt").write_text("ABOVE-THE-ROOT\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    (repo / "above.txt").write_text("ABOVE-CHANGED\n")
    (root / "src" / "a.py").write_text("alpha = 2\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (root / "link").symlink_to(tmp_path / "outside")
    state = root / ".lar"
    (state / "tools" / "outputs").mkdir(parents=True)
    (state / "tools" / "outputs" / "old.out").write_text("STATE-SECRET\n")
    return tmp_path, root, ToolCache(state / "tools", root=root, hidden=[state])


def test_git_grep_open_files_abbreviation_is_refused(world):
    tmp, root, tc = world
    for argv in (["git", "grep", f"--open-files=touch {tmp}/PWNED", "-e", "x"],
                 ["git", "grep", "--open-files-in", "sh", "-e", "x"], ["git", "grep", "-Osh", "x"]):
        with pytest.raises(ToolNotAllowedError, match="open-files-in-pager|'-O'"):
            tc.run(argv)
    assert not (tmp / "PWNED").exists()
    # what the matcher resolves is what git does: it takes --open-files as the pager option
    real = subprocess.run(["git", "grep", "--open-files=true", "-e", "alpha"], cwd=root,
                          capture_output=True, text=True)
    assert real.returncode == 0 and real.stdout == ""  # the "pager" (true) ran, no listing


def test_grep_deref_abbreviation_is_refused(world):
    _, _, tc = world
    with pytest.raises(ToolNotAllowedError, match="read by grep as '--dereference-recursive'"):
        tc.run(["grep", "--deref", "OUTSIDE", "."])
    # and it is what GNU grep itself takes --deref for: it follows the link out of the root
    out = subprocess.run(["grep", "--deref", "OUTSIDE", "."], cwd=world[1], capture_output=True,
                         text=True).stdout
    assert "OUTSIDE-SECRET" in out


def test_git_diff_no_relative_abbreviation_is_refused(world):
    _, _, tc = world
    for argv in (["git", "diff", "--no-rel"], ["git", "show", "--no-relat"],
                 ["git", "log", "-p", "--no-relative"]):
        with pytest.raises(ToolNotAllowedError, match="--no-relative"):
            tc.run(argv)
    def real(*args):
        return subprocess.run(["git", "diff", *args], cwd=world[1], capture_output=True,
                              text=True).stdout
    # git itself reads --no-rel as --no-relative: it undoes --relative
    assert "ABOVE-CHANGED" not in real("--relative")
    assert "ABOVE-CHANGED" in real("--relative", "--no-rel")
    diff = tc.fetch(tc.run(["git", "diff"]).id).text
    assert "alpha = 2" in diff and "ABOVE" not in diff and "above.txt" not in diff


def test_tail_fol_is_refused(world):
    _, _, tc = world
    for argv in (["tail", "--fol", "src/a.py"], ["tail", "--follow=name", "src/a.py"],
                 ["tail", "-fn1", "src/a.py"], ["tail", "--re", "src/a.py"]):
        with pytest.raises(ToolNotAllowedError, match="never ends"):
            tc.run(argv)


def test_state_dir_never_material_to_rg_uuu(world):
    _, _, tc = world
    for argv in (["rg", "-uuu", "--no-filename", "SECRET"], ["rg", "--no-ignore", "SECRET"],
                 ["rg", "--hidden", "SECRET"], ["rg", "-g", ".lar/**", "SECRET"],
                 ["rg", "-L", "SECRET"], ["rg", "--follow", "SECRET"],
                 ["rg", "SECRET", ".lar"]):
        with pytest.raises(ToolNotAllowedError):
            tc.run(argv)
    text = tc.fetch(tc.run(["rg", "--no-filename", "-e", "SECRET"]).id).text
    assert "STATE-SECRET" not in text and "OUTSIDE-SECRET" not in text
    grep = tc.fetch(tc.run(["grep", "-r", "SECRET", "."]).id).text
    assert "STATE-SECRET" not in grep and "OUTSIDE" not in grep


def test_scope_double_star_never_reaches_state_dir(tmp_path):
    import lar

    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("needle = 1\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.txt").write_text("needle hidden\n")
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text("needle ignored\n")
    out = root / ".lar" / "tools" / "outputs"
    out.mkdir(parents=True)
    (out / "x.out").write_text("needle in the state\n")
    eng = lar.open(root, root / ".lar")
    try:
        for scope in ("**", "/**", "*", ".lar/**", "**/*", ".*/**", "ignored.txt", None):
            res = eng.search("needle", timebox=5, layers=["grep"], scope=scope)
            paths = {h.path for h in res.hits}
            assert paths <= {"src/a.py"}, (scope, paths)
    finally:
        eng.close()
    from lar.core.scope import material, state_glob

    assert state_glob(root, root / ".lar") == ".lar/**"
    assert not material(".lar/tools/outputs/x.out", ".lar/**") and material("src/a.py", ".lar/**")
    assert not material("cache/x", "cache/**") and not material("a/.env")


def test_git_show_tree_of_head_is_refused(world):
    _, _, tc = world
    for argv in (["git", "show", "HEAD^{tree}"], ["git", "show", "HEAD:"],
                 ["git", "show", "HEAD:../above.txt"], ["git", "log", ":/init"],
                 ["git", "diff", "HEAD", "--", ":(top)above.txt"],
                 ["git", "show", "HEAD@{0}"]):
        with pytest.raises(ToolNotAllowedError, match="rev:path|pathspec magic"):
            tc.run(argv)
    blob = subprocess.run(["git", "rev-parse", "HEAD:above.txt"], cwd=world[1],
                          capture_output=True, text=True).stdout.strip()
    v = tc.run(["git", "show", blob])  # a blob id is peeled to a commit: git refuses it
    assert v.returncode != 0 and "ABOVE" not in tc.fetch(v.id).text


def test_git_global_options_and_config_are_refused(world):
    _, _, tc = world
    for argv in (["git", "-c", "core.pager=sh", "log"], ["git", "--config-env=a=b", "log"],
                 ["git", "-C", "..", "log"], ["git", "--git-dir=../.git", "log"],
                 ["git", "--exec-path=/tmp", "log"], ["git", "diff", "--output=x"],
                 ["git", "diff", "--ext-diff"], ["git", "log", "--textconv"]):
        with pytest.raises(ToolNotAllowedError):
            tc.run(argv)


def test_matcher_canonicalises_what_it_allows():
    from lar.apps.toolcache.options import parse
    from lar.apps.toolcache.policy import GIT_TABLES, GREP, TAIL

    p = parse(GREP, ["-rnA3", "--inc=*.py", "--max", "2", "-e", "-x", "--", "-v"])
    assert p.canonical() == ["-r", "-n", "-A", "3", "--include=*.py", "--max-count=2", "-e", "-x"]
    assert p.operands == ("-v",)
    with pytest.raises(ToolNotAllowedError, match="ambiguous"):
        parse(GREP, ["--files-with", "x"])  # --files-with-matches / --files-without-match
    with pytest.raises(ToolNotAllowedError, match="takes no value"):
        parse(GREP, ["--count=3", "x"])
    with pytest.raises(ToolNotAllowedError, match="'-f' of tail is refused"):
        parse(TAIL, ["-n5", "-f"])
    assert parse(GIT_TABLES["diff"], ["--shortst"]).canonical() == ["--shortstat"]


def test_tools_run_in_a_clean_environment(world, monkeypatch):
    _, _, tc = world
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_PAGER", "sh -c 'touch PWNED'")
    monkeypatch.setenv("PAGER", "sh")
    env = tc.guard.environment()
    assert not {k for k in env if k.startswith("GIT_")} - {
        "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS",
        "GIT_PAGER"}
    assert env["GIT_PAGER"] == env["PAGER"] == "cat" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert "alpha" in tc.fetch(tc.run(["git", "diff"]).id).text  # GIT_DIR was not passed on
