import multiprocessing
import os
import time

import pytest

from lar.core.errors import HitNotFoundError, StateLockedError
from lar.store import ContentStore, FileIndex, UnitReader, content_hash
from lar.store.reader import expand_to_lines, line_range
from lar.store.scanner import Scanner


def test_content_store_is_sharded_and_verified(tmp_path):
    cas = ContentStore(tmp_path / "objects")
    h = cas.put(b"hello")
    assert h == content_hash(b"hello")
    assert cas.path(h).parent.name == h[:2]
    assert cas.get(h) == b"hello"
    cas.path(h).write_bytes(b"tampered")  # a corrupt blob is dropped, never served
    assert cas.get(h) is None and not cas.has(h)


def test_index_sequence_tombstones_and_cursors(tmp_path):
    idx = FileIndex(tmp_path)
    s1 = idx.upsert("a.txt", "aa" * 16, 3, 1)
    assert idx.upsert("a.txt", "aa" * 16, 3, 2) is None  # same content: no new seq
    s2 = idx.upsert("b.txt", "bb" * 16, 3, 1)
    s3 = idx.upsert("a.txt", "cc" * 16, 4, 3)
    assert s1 < s2 < s3 == idx.max_seq()
    assert [r.path for r in idx.changes_since(s1)] == ["b.txt", "a.txt"]
    s4 = idx.tombstone("a.txt")
    assert idx.tombstone("a.txt") is None  # repeated deletes collapse into one tombstone
    changes = idx.changes_since(s3)
    assert [(r.path, r.deleted, r.seq) for r in changes] == [("a.txt", True, s4)]
    assert [r.path for r in idx.live()] == ["b.txt"]
    assert idx.get_cursor("bm25") is None
    idx.set_cursor("bm25", "2", s2)
    assert idx.get_cursor("bm25") == ("2", s2)
    assert idx.past_paths("aa" * 16) == ["a.txt"]
    assert idx.resolve_prefix("bbbbbb") == "bb" * 16
    with pytest.raises(HitNotFoundError):
        idx.resolve_prefix("ffffff")


def test_all_paths_is_read_once_per_change_and_never_stale(tmp_path):
    """The scanner's full listing of records is kept between changes; every kind of write (a
    new hash, a stat-only refresh, a tombstone, another process's change) is seen."""
    idx = FileIndex(tmp_path)
    idx.upsert("a.txt", "aa" * 16, 3, 1)
    first = idx.all_paths()
    assert first["a.txt"].mtime_ns == 1
    first["junk"] = None  # a caller's dict is its own
    assert set(idx.all_paths()) == {"a.txt"}
    idx.upsert("a.txt", "aa" * 16, 3, 2)  # stat-only: no new seq
    assert idx.all_paths()["a.txt"].mtime_ns == 2
    idx.upsert("b.txt", "bb" * 16, 3, 1)
    assert set(idx.all_paths()) == {"a.txt", "b.txt"}
    idx.tombstone("a.txt")
    assert idx.all_paths()["a.txt"].deleted
    other = FileIndex(tmp_path)  # another writer on the same state
    other.upsert("c.txt", "cc" * 16, 3, 1)
    assert set(idx.all_paths()) == {"a.txt", "b.txt", "c.txt"}


def _hold_lock(state_dir, seconds, ready):
    idx = FileIndex(state_dir)
    with idx.writing():
        ready.set()
        time.sleep(seconds)


def test_second_writer_waits_then_gets_a_clear_error_while_readers_read(tmp_path):
    first = FileIndex(tmp_path)
    first.upsert("a.txt", "aa" * 16, 1, 1)
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_lock, args=(str(tmp_path), 3.0, ready))
    proc.start()
    try:
        assert ready.wait(30)
        other = FileIndex(tmp_path, lock_timeout=0.3)  # opening an existing index only reads
        assert [r.path for r in other.live()] == ["a.txt"]  # readers are not blocked
        t0 = time.monotonic()
        with pytest.raises(StateLockedError, match=r"pid \d+"):
            other.upsert("b.txt", "bb" * 16, 1, 1)
        assert time.monotonic() - t0 >= 0.3  # it waited before giving up
        assert [r.path for r in other.live()] == ["a.txt"]  # nothing half-written
    finally:
        proc.join()
    assert other.upsert("b.txt", "bb" * 16, 1, 1) is not None  # released: writing works again


def test_corrupt_index_is_set_aside_and_started_afresh(tmp_path):
    (tmp_path / "index.sqlite").write_bytes(b"this is not a database" * 100)
    from lar.core.errors import RepairedStateWarning

    with pytest.warns(RepairedStateWarning, match="file is not a database"):
        idx = FileIndex(tmp_path)
    assert idx.live() == [] and idx.max_seq() == 0
    kept, = tmp_path.glob("index.sqlite.corrupt-*")
    assert kept.read_bytes() == b"this is not a database" * 100


def test_scanner_respects_ignores_and_skips_binary_and_large(corpus, tmp_path):
    idx = FileIndex(tmp_path / "state")
    (corpus / "huge.txt").write_bytes(b"x" * 5000)
    rep = Scanner(corpus, idx, max_bytes=4096).scan()
    paths = {r.path for r in idx.live()}
    assert "src/timebox.py" in paths and "docs/latin1.txt" in paths
    assert "build/generated.py" not in paths  # .gitignore honoured without a git repo
    skipped = dict((p, r) for p, r, _ in idx.skipped())
    assert skipped["blob.bin"].startswith("binary")
    assert skipped["huge.txt"].startswith("too large")
    # identical files share one hash
    assert idx.get("copy_of_timebox.py").hash == idx.get("src/timebox.py").hash
    assert rep.unchanged == 0
    rep2 = Scanner(corpus, idx, max_bytes=4096).scan()
    assert rep2.added == rep2.changed == rep2.deleted == [] and rep2.hashed_bytes == 0
    # edit, delete, rename
    (corpus / "docs" / "fusion.md").write_text("changed text\n")
    (corpus / "docs" / "unicode.txt").unlink()
    os.rename(corpus / "src" / "timebox.py", corpus / "src" / "renamed.py")
    rep3 = Scanner(corpus, idx, max_bytes=4096).scan()
    assert rep3.changed == ["docs/fusion.md"]
    assert sorted(rep3.deleted) == ["docs/unicode.txt", "src/timebox.py"]
    assert rep3.added == ["src/renamed.py"]
    assert idx.get("src/renamed.py").hash == idx.get("copy_of_timebox.py").hash


def test_scanner_does_not_follow_symlinks_out_of_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("secret outside text\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    (root / "in.txt").write_text("inside\n")
    idx = FileIndex(tmp_path / "state")
    Scanner(root, idx).scan()
    assert [r.path for r in idx.live()] == ["in.txt"]


def test_reader_prefers_current_file_then_snapshot(corpus, tmp_path):
    idx = FileIndex(tmp_path / "state")
    Scanner(corpus, idx).scan()
    cas = ContentStore(tmp_path / "state" / "objects")
    reader = UnitReader(corpus, idx, cas)
    h = idx.get("docs/fusion.md").hash
    assert reader.read(h).startswith(b"# Reciprocal")
    reader.snapshot(h)
    (corpus / "docs" / "fusion.md").write_text("new\n")
    fresh = UnitReader(corpus, idx, cas)  # no in-memory cache
    assert fresh.read(h).startswith(b"# Reciprocal")  # from the snapshot


def test_line_helpers():
    data = b"one\ntwo\nthree\nfour\n"
    assert line_range(data, 4, 7) == (2, 2)
    assert line_range(data, 0, len(data)) == (1, 4)
    assert expand_to_lines(data, 5, 6) == (4, 8)
    assert expand_to_lines(data, 5, 6, context=1) == (0, 14)
