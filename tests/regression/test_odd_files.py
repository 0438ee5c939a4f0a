"""Issue 18, items 8-11 (bad files and odd paths): each test is named after the defect it pins
down, and drives lar through its command line (``lar.apps.cli.main``) or its public API."""
from __future__ import annotations

import json
import os

import pytest

import lar
from lar.apps.cli import main

PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096


def _cli(capsys, root, state, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([*argv, "--root", str(root), "--state", str(state)])
    out, err = capsys.readouterr()
    return rc, out, err


def _search_paths(capsys, root, state, query, layers) -> list[str]:
    rc, out, err = _cli(capsys, root, state, "search", query, "--layers", layers, "--json",
                        "--timebox", "10s")
    assert rc == 0, err
    return sorted(h["path"] for h in json.loads(out)["hits"])


def _one_line_error(rc: int, err: str) -> str:
    assert rc != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lar: error: "), err
    return lines[0]


# -- 8. a file name that is not valid UTF-8 --------------------------------------------------

def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason_not_a_crash(tmp_path, capsys):
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    (root / "good.txt").write_text("odd_needle in a well named file\n")
    bad = os.fsencode(root) + b"/bad\xff name.txt"  # Latin-1 y-umlaut: not UTF-8
    with open(bad, "wb") as fh:
        fh.write(b"odd_needle in a badly named file\n")

    rc, out, err = _cli(capsys, root, state, "index")
    assert rc == 0, err
    rc, out, err = _cli(capsys, root, state, "status", "--json")
    assert rc == 0, err
    skipped = {s["path"]: s["reason"] for s in json.loads(out)["skipped"]}
    assert skipped == {"bad\\xff name.txt": "file name is not valid UTF-8; rename the file to "
                                            "index it"}
    # every command that scans or searches still answers, and finds the well named file
    assert _search_paths(capsys, root, state, "odd_needle", "grep,names,trigram") == ["good.txt"]
    rc, out, err = _cli(capsys, root, state, "inventory", "--json")
    assert rc == 0 and [u["path"] for u in json.loads(out)["units"]] == ["good.txt"]
    rc, out, err = _cli(capsys, root, state, "build", "--timebox", "30s", "--layers",
                        "trigram,bm25", "--no-progress")
    assert rc == 0, err
    assert _search_paths(capsys, root, state, "odd_needle", "trigram,bm25") == ["good.txt"]
    rc, out, err = _cli(capsys, root, state, "index")  # a second scan: the skip is remembered
    assert rc == 0 and json.loads(out)["skipped"] == 1


# -- 9. a path longer than PATH_MAX ----------------------------------------------------------

def _deep_tree(root) -> None:
    """``root/d00.../dNN...`` nested until the path passes PATH_MAX, holding a file whose own
    path is too long and a folder that ripgrep cannot open; made with directory descriptors
    (a path that long cannot be named in one call)."""
    fd = os.open(root, os.O_RDONLY)
    length, i = len(str(root)), 0
    try:
        while length < PATH_MAX - 150:
            name = f"d{i:02d}" + "x" * 196
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, length, i = nfd, length + 1 + len(name), i + 1
        f = os.open("f" * 250 + ".txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
        os.write(f, b"deep_needle in a file with a path longer than PATH_MAX\n")
        os.close(f)
        os.mkdir("e" * 250, dir_fd=fd)
        nfd = os.open("e" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
        f = os.open("inner.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
        os.write(f, b"deep_needle in a folder with a path longer than PATH_MAX\n")
        os.close(f)
    finally:
        os.close(fd)


def _remove_deep_tree(root) -> None:
    """pytest's tmp_path cleanup cannot remove paths longer than PATH_MAX: remove them here."""
    import shutil

    for name in os.listdir(root):
        if name.startswith("d00"):
            os.chdir(root)
            try:
                shutil.rmtree(name)  # relative names and directory descriptors
            finally:
                os.chdir("/")


def test_a_path_longer_than_path_max_is_skipped_and_the_folder_stays_usable(tmp_path, capsys):
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    (root / "ok.txt").write_text("deep_needle near the top\n")
    _deep_tree(root)
    try:
        rc, out, err = _cli(capsys, root, state, "index")
        assert rc == 0, err
        rc, out, err = _cli(capsys, root, state, "status", "--json")
        assert rc == 0, err
        skipped = [(s["path"], s["reason"]) for s in json.loads(out)["skipped"]]
        reasons = sorted(s[1] for s in skipped)
        assert len(skipped) == 2, skipped
        assert all("File name too long" in r for r in reasons), reasons
        assert any(s[0].endswith("/" + "f" * 250 + ".txt") for s in skipped)
        assert any(s[0].endswith("/" + "e" * 250) and s[1].startswith("not listed: ")
                   for s in skipped)
        assert _search_paths(capsys, root, state, "deep_needle", "grep,names") == ["ok.txt"]
        assert _search_paths(capsys, root, state, "nothing_matches_this", "grep") == []
        rc, out, err = _cli(capsys, root, state, "index")
        assert rc == 0 and json.loads(out)["skipped"] == 2
    finally:
        _remove_deep_tree(root)


# -- 10. a symlink loop; a huge fetch context -----------------------------------------------

def test_reading_a_symlink_loop_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    (root / "self").symlink_to("self")
    for name in ("loop1", "self", "self/x.txt"):
        rc, out, err = _cli(capsys, root, state, "read", name)
        line = _one_line_error(rc, err)
        assert "symlink loop" in line and repr(name) in line, line
    rc, out, err = _cli(capsys, root, state, "read", "a.txt")
    assert rc == 0 and out == "alpha\n"


def test_fetch_with_a_huge_context_is_capped_and_says_so(tmp_path, capsys):
    from lar.store.reader import MAX_CONTEXT_LINES

    root, state = tmp_path / "root", tmp_path / "state"
    root.mkdir()
    lines = [f"line {i}\n" for i in range(3 * MAX_CONTEXT_LINES)]
    mid = 3 * MAX_CONTEXT_LINES // 2
    lines[mid] = "huge_context_needle\n"
    (root / "long.txt").write_text("".join(lines))
    rc, out, err = _cli(capsys, root, state, "search", "huge_context_needle", "--layers", "grep",
                        "--json")
    assert rc == 0, err
    hit_id = json.loads(out)["hits"][0]["id"]
    rc, out, err = _cli(capsys, root, state, "fetch", hit_id, "--context", "1000000000", "--json")
    assert rc == 0, err
    got = json.loads(out)
    assert got["text"] == "huge_context_needle"
    first, last = mid + 1 - MAX_CONTEXT_LINES, mid + 1 + MAX_CONTEXT_LINES
    assert got["context_lines"] == [first, last]
    assert got["context"] == "".join(lines[first - 1:last])
    assert got["note"] == (f"context capped at {MAX_CONTEXT_LINES} lines on each side "
                           f"(asked for 1000000000)")
    # a context that reaches past both ends is the whole file, and no cap is mentioned
    with lar.open(root, state) as eng:
        small = eng.fetch(hit_id, context=MAX_CONTEXT_LINES)
        assert small.note == "" and small.context_lines == (first, last)


# -- 11. the always-current grep sees the files the building layers index --------------------

def _layer_paths(eng, layer: str, query) -> list[str]:
    res = eng.search({layer: query}, timebox=10)
    assert not [r for r in res.runs if r.name == layer and r.state.value == "failed"], res.runs
    return sorted({p for h in res.hits for p in h.paths})


def test_grep_finds_text_before_a_nul_byte_after_8_kib_as_trigram_and_bm25_do(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "late_nul.txt").write_bytes(b"needle_before the NUL\n" + b"x" * 9000 + b"\n\0\n"
                                        + b"needle_after the NUL\n")
    (root / "early_nul.bin").write_bytes(b"\0needle_before in a binary file\n")
    with lar.open(root, state=tmp_path / "state") as eng:
        eng.build(timebox=60, layers=["trigram", "bm25"])
        for word in ("needle_before", "needle_after"):
            want = _layer_paths(eng, "trigram", word)
            assert want == ["late_nul.txt"]
            assert _layer_paths(eng, "bm25", word) == want
            assert _layer_paths(eng, "grep", word) == want, word
        res = eng.search({"grep": "needle_after"}, timebox=10)
        assert eng.read_bytes(res.hits[0].hash, (res.hits[0].span.start, res.hits[0].span.end)) == b"needle_after the NUL"


def test_grep_finds_a_file_whose_name_holds_a_newline(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "two\nlines.txt").write_text("newline_needle here\n")
    (root / "plain.txt").write_text("newline_needle there\n")
    with lar.open(root, state=tmp_path / "state") as eng:
        eng.build(timebox=60, layers=["trigram", "bm25"])
        want = ["plain.txt", "two\nlines.txt"]
        assert _layer_paths(eng, "trigram", "newline_needle") == want
        assert _layer_paths(eng, "bm25", "newline_needle") == want
        assert _layer_paths(eng, "grep", "newline_needle") == want
        assert _layer_paths(eng, "grep", {"regex": "needle (here|there)"}) == want


def test_grep_output_is_cut_at_row_ends_not_at_a_newline_inside_a_path():
    from lar.layers.grep import row_end

    out = b"./a\nb.txt\x001:0:x\n./c.txt\x002:5:y\x00z\n./d\n\ne\x003:9:w\n"
    first = out.index(b"\n")  # inside the first path
    assert row_end(out, first) == out.index(b"x\n") + 2
    assert row_end(out, out.index(b"./c")) == out.index(b"z\n") + 2  # a NUL inside a match
    assert row_end(out, out.index(b"./d")) == len(out)
    assert row_end(out + b"./f", len(out)) == len(out) + 3  # an unfinished row: the end


def test_grep_does_not_reread_an_unchanged_binary_file_it_matched(tmp_path):
    """With ``--text`` ripgrep matches inside binary files too; the stat check drops them
    without reading them again or writing the index (the skip is remembered with its stat):
    it answers while another process holds the writer lock."""
    from lar.core.errors import StateLockedError
    from lar.store import FileIndex
    from lar.store.scanner import Scanner

    root = tmp_path / "root"
    root.mkdir()
    (root / "blob.bin").write_bytes(b"\0binary_needle\0" * 1000)
    idx = FileIndex(tmp_path / "state", lock_timeout=0.2)
    scanner = Scanner(root, idx)
    first = scanner.refresh(["blob.bin"])
    assert first.current == {"blob.bin": None}
    assert first.skipped == [("blob.bin", "binary (NUL byte in the first 8 KiB)")]
    other = FileIndex(tmp_path / "state")
    with other.writing():  # the writer lock is held elsewhere
        again = scanner.refresh(["blob.bin"])
        assert again.current == {"blob.bin": None} and again.skipped == first.skipped
        (root / "blob.bin").write_bytes(b"\0changed\0")
        with pytest.raises(StateLockedError):  # a changed file is read and recorded again
            scanner.refresh(["blob.bin"])
    with lar.open(root, state=tmp_path / "s2") as eng:
        res = eng.search({"grep": "changed"}, timebox=10)
        assert res.hits == ()
        assert [r.state.value for r in res.runs if r.name == "grep"] == ["ran"]


def test_binary_ignore_lists_exactly_the_files_skipped_as_binary(tmp_path):
    """grep reads every file as text but not those the scanner skipped as binary: the ignore
    file names each of them exactly (glob characters escaped, never a negation)."""
    import subprocess

    from lar.store.binaryignore import ignore_line, ignore_path
    from lar.store.rg import rg_path

    root = tmp_path / "root"
    root.mkdir()
    names = ["we[ir]d *name?.bin", "!bang.bin", "#hash.bin", "trailing .bin ", "sub/x{a,b}.bin"]
    (root / "sub").mkdir()
    for n in names:
        (root / n).write_bytes(b"\0bin_needle\n")
    (root / "weird_name_.bin").write_bytes(b"bin_needle as text\n")  # a glob of one would match
    (root / "sub" / "xa.bin").write_bytes(b"bin_needle as text too\n")
    assert ignore_line("two\nlines") is None and ignore_line("!x") == "/\\!x"
    with lar.open(root, state=tmp_path / "state") as eng:
        lines = ignore_path(eng.state_dir).read_text().splitlines()
        assert sorted(lines) == sorted(ignore_line(n) for n in names)
        out = subprocess.run([rg_path(), "--no-config", "--text", "-l", "--ignore-file",
                              str(ignore_path(eng.state_dir)), "bin_needle", "./"], cwd=root,
                             capture_output=True).stdout.decode()
        assert sorted(out.split()) == ["./sub/xa.bin", "./weird_name_.bin"]
        res = eng.search({"grep": "bin_needle"}, timebox=10)
        assert sorted(h.path for h in res.hits) == ["sub/xa.bin", "weird_name_.bin"]
        (root / "sub" / "x{a,b}.bin").write_text("bin_needle now text\n")
        eng.index_now()
        assert len(ignore_path(eng.state_dir).read_text().splitlines()) == len(names) - 1
        res = eng.search({"grep": "bin_needle"}, timebox=10)
        assert sorted(h.path for h in res.hits) == ["sub/xa.bin", "sub/x{a,b}.bin",
                                                    "weird_name_.bin"]
