"""The folder watch (lar.store.watch): the change token that spares a search the stat pass."""
from __future__ import annotations

import os

import pytest

import lar
from lar.store.watch import FolderWatch, folders_of

inotify_simple = pytest.importorskip("inotify_simple")


def _armed(root, paths) -> FolderWatch:
    w = FolderWatch(root, enabled=True)
    w.begin()
    w.arm(paths)
    return w


def test_folders_of_lists_each_folder_and_its_parents():
    assert folders_of("/r", ["a.txt", "x/y/b.txt", "x/c.txt"]) == {"/r", "/r/x", "/r/x/y"}


def test_unwatched_token_is_always_stale(tmp_path):
    w = FolderWatch(tmp_path, enabled=False)
    w.begin()
    w.arm(["a.txt"])
    assert w.stale() and not w.active


@pytest.mark.parametrize("change", ["edit", "create", "delete", "rename", "touch", "nested"])
def test_every_kind_of_change_makes_it_stale(tmp_path, change):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "sub" / "b.txt").write_text("beta\n")
    w = _armed(str(tmp_path), ["a.txt", "sub/b.txt"])
    assert w.active and not w.stale()
    assert not w.stale()  # reading the token does not change it
    if change == "edit":
        with open(tmp_path / "a.txt", "a") as fh:
            fh.write("more\n")
    elif change == "create":
        (tmp_path / "new.txt").write_text("new\n")
    elif change == "delete":
        (tmp_path / "a.txt").unlink()
    elif change == "rename":
        (tmp_path / "a.txt").rename(tmp_path / "c.txt")
    elif change == "touch":
        os.utime(tmp_path / "a.txt", ns=(1, 1))
    else:
        (tmp_path / "sub" / "b.txt").write_text("changed\n")
    assert w.stale()  # at once: the kernel queued the event with the write
    w.close()


def test_reading_files_is_not_a_change(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    w = _armed(str(tmp_path), ["a.txt"])
    assert (tmp_path / "a.txt").read_text() == "alpha\n"
    assert not w.stale()
    w.close()


def test_a_new_folder_keeps_it_stale_for_one_more_scan(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    w = _armed(str(tmp_path), ["a.txt"])
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "e.txt").write_text("e\n")
    assert w.stale()
    w.begin()
    w.arm(["a.txt", "d/e.txt"])  # d is watched only now: a file made before its watch is possible
    assert w.stale()
    w.begin()
    w.arm(["a.txt", "d/e.txt"])
    assert not w.stale()
    (tmp_path / "d" / "e.txt").write_text("changed\n")
    assert w.stale()
    w.close()


def test_events_during_a_scan_are_kept_for_the_next_check(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    w = _armed(str(tmp_path), ["a.txt"])
    w.begin()
    (tmp_path / "a.txt").write_text("written while the scan ran\n")
    w.arm(["a.txt"])
    assert w.stale()
    w.close()


def test_a_removed_watched_folder_resets_the_watches(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "e.txt").write_text("e\n")
    w = _armed(str(tmp_path), ["d/e.txt"])
    (tmp_path / "d" / "e.txt").unlink()
    (tmp_path / "d").rmdir()
    assert w.stale()
    w.begin()
    w.arm([])
    assert w.stale()  # rebuilt watches: one more scan
    w.begin()
    w.arm([])
    assert not w.stale()
    w.close()


def test_search_skips_the_stat_pass_until_something_changes(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("the quick brown fox\n")
    eng = lar.open(root, state=tmp_path / "state")
    try:
        eng.build(timebox=60, layers=["bm25"])
        eng.search("fox", layers=["bm25"], timebox=10)
        scans = []
        real = eng.scanner.scan
        monkeypatch.setattr(eng.scanner, "scan", lambda: scans.append(1) or real())
        first = eng.search("fox", layers=["bm25"], timebox=10)
        assert [h.path for h in first.hits] == ["a.txt"] and scans == []
        (root / "b.txt").write_text("a lazy fox sleeps\n")
        second = eng.search("lazy", layers=["bm25"], timebox=10)
        assert scans == [1]
        assert [h.path for h in second.hits] == ["b.txt"]
    finally:
        eng.close()
