"""The scanner: the single writer that brings the file index in line with the folder.

Listing uses ``rg --files`` so .gitignore/.ignore/.rgignore/.larignore and hidden files are
treated exactly as ripgrep treats them; symlinks are not followed. A stat pass compares size and
mtime with the index; only files whose stat changed are read and hashed (the hash is over the
bytes actually read). Binary files, files over ``max_bytes``, names that are not valid UTF-8 and
paths that cannot be listed, stat'ed or read (longer than PATH_MAX, no permission) are skipped
with a reason; the rest of the folder is indexed.
"""
from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from lar.store.binaryignore import BINARY_REASON, write_ignore
from lar.store.extract import BINARY_EXTRACTABLE
from lar.store.cas import content_hash
from lar.store.fileindex import FileIndex
from lar.store.listing import list_root
from lar.store.pathkeys import is_utf8_name

DEFAULT_MAX_BYTES = 16 * 1024 * 1024
BINARY_SNIFF = 8192


@dataclass
class ScanReport:
    listed: int = 0
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unchanged: int = 0
    hashed_bytes: int = 0
    current: dict = field(default_factory=dict)
    elapsed: float = 0.0
    paths: list[str] = field(default_factory=list)  # what a full scan listed (not in to_dict)

    @property
    def changed_paths(self) -> list[str]:
        return self.added + self.changed + self.deleted

    def to_dict(self) -> dict:
        return {
            "listed": self.listed,
            "added": len(self.added),
            "changed": len(self.changed),
            "deleted": len(self.deleted),
            "skipped": len(self.skipped),
            "unchanged": self.unchanged,
            "hashed_bytes": self.hashed_bytes,
            "elapsed": round(self.elapsed, 4),
        }


def list_files(root: Path, exclude: Iterable[str] = ()) -> list[str]:
    """Relative POSIX paths of the files ripgrep would search under ``root``."""
    return list(list_root(root, exclude).paths)


_GONE = (errno.ENOENT, errno.ENOTDIR)


def _stat(path: str) -> tuple[os.stat_result | None, str | None]:
    """(stat, None), (None, None) if the file is gone, or (None, why it cannot be stat'ed)."""
    try:
        return os.stat(path, follow_symlinks=False), None
    except OSError as exc:
        if exc.errno in _GONE:
            return None, None
        return None, f"unreadable: {exc.strerror or exc}"


def is_binary(head: bytes) -> bool:
    return b"\0" in head[:BINARY_SNIFF]


class Scanner:
    BATCH = 256  # changed files written per writer-lock hold
    def __init__(self, root: Path, index: FileIndex, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 exclude: Iterable[str] = ()):
        self.root = Path(root).resolve()
        self._root_s = str(self.root)  # string joins: pathlib costs ~7 us a file in the stat pass
        self.index = index
        self.max_bytes = max_bytes
        self.exclude = tuple(exclude)

    def _classify(self, rel: str, st: os.stat_result | None) -> tuple[str, object]:
        """('skip', reason) | ('file', (hash, size, mtime_ns)) | ('gone', None)."""
        if not is_utf8_name(rel):
            return "skip", "file name is not valid UTF-8; rename the file to index it"
        if st is None:
            return "gone", None
        if st.st_size > self.max_bytes:
            return "skip", f"too large ({st.st_size} bytes > limit {self.max_bytes}); raise max_bytes to include it"
        try:
            with open(self.root / rel, "rb") as fh:
                data = fh.read(self.max_bytes + 1)
        except OSError as exc:
            if exc.errno in _GONE:
                return "gone", None
            return "skip", f"unreadable: {exc.strerror or exc}"
        if len(data) > self.max_bytes:
            return "skip", f"too large (> limit {self.max_bytes} bytes)"
        if is_binary(data) and os.path.splitext(rel)[1].lower() not in BINARY_EXTRACTABLE:
            return "skip", BINARY_REASON
        return "file", (content_hash(data), len(data), st)

    def _apply(self, rel: str, st: os.stat_result | None, report: ScanReport, known) -> str | None:
        """Record the file's current state; returns its hash, or None if gone or skipped."""
        kind, val = self._classify(rel, st)
        if kind == "gone":
            if known is not None and not known.deleted and self.index.tombstone(rel) is not None:
                report.deleted.append(rel)
            return None
        if kind == "skip":
            report.skipped.append((rel, str(val)))
            self.index.record_skip(rel, str(val), st.st_size if st else None,
                                   st.st_mtime_ns if st else None, st.st_ctime_ns if st else None,
                                   st.st_ino if st else None)
            return None
        h, size, st = val
        report.hashed_bytes += size
        seq = self.index.upsert(rel, h, size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if seq is not None:
            (report.added if known is None or known.deleted else report.changed).append(rel)
        return h

    def scan(self) -> ScanReport:
        """Full pass: list, stat, hash what changed, tombstone what vanished. The writer lock is
        taken only for short batches of changes, so searches are never blocked for long."""
        t0 = time.perf_counter()
        report = ScanReport()
        # the index is read before the folder is listed: a path another process records after
        # the listing (a file created meanwhile) is then not taken for one that vanished
        known = self.index.all_paths()
        skipped = self.index.skipped_stats()
        listing = list_root(self.root, self.exclude)
        report.listed = len(listing.paths)
        report.paths = list(listing.paths)
        seen = set()
        todo = []
        # paths ripgrep could not list, and listed ones that cannot be stat'ed: skipped
        problems = [(rel, f"not listed: ripgrep could not read it: {why}")
                    for rel, why in listing.problems]
        for rel in listing.paths:
            seen.add(rel)
            st, why = _stat(f"{self._root_s}/{rel}")
            if why is not None:
                problems.append((rel, why))
                continue
            rec = known.get(rel)
            if rec is not None and st is not None and rec.same_stat(st):
                report.unchanged += 1
                continue
            sk = skipped.get(rel)
            if sk is not None and st is not None and sk[1:] == (
                    st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
                report.skipped.append((rel, sk[0]))  # skipped before and unchanged since
                continue
            todo.append((rel, st, rec))
        for i in range(0, len(todo), self.BATCH):
            with self.index.writing():
                for rel, st, rec in todo[i:i + self.BATCH]:
                    self._apply(rel, st, report, rec)
        self._record_problems(problems, skipped, seen, report)
        gone = [rel for rel, rec in known.items() if rel not in seen and not rec.deleted]
        stale_skips = [rel for rel in skipped if rel not in seen]
        if gone or stale_skips:
            with self.index.writing():
                for rel in gone:
                    if self.index.tombstone(rel) is not None:
                        report.deleted.append(rel)
                for rel in stale_skips:
                    self.index.forget_skip(rel)
        self._write_binary_ignore()
        report.elapsed = time.perf_counter() - t0
        return report

    def _write_binary_ignore(self) -> None:
        """Keep ``<state>/binary.ignore`` (the files skipped as binary) in line for grep."""
        try:
            write_ignore(self.index.state_dir, [p for p, row in self.index.skipped_stats().items()
                                                if row[0] == BINARY_REASON])
        except OSError:
            pass  # grep then reads those files too and drops their matches: slower, not wrong

    def _record_problems(self, problems, skipped, seen, report: ScanReport) -> None:
        """Record paths that cannot be listed or stat'ed as skipped (written only when new)."""
        new = []
        for rel, why in problems:
            seen.add(rel)
            report.skipped.append((rel, why))
            if skipped.get(rel, (None,))[0] != why:
                new.append((rel, why))
        if new:
            with self.index.writing():
                for rel, why in new:
                    self.index.record_skip(rel, why, None)

    def refresh(self, paths: Iterable[str]) -> ScanReport:
        """Stat-check only ``paths`` (e.g. files a grep matched); re-hash those that changed.
        ``report.current`` maps each path to its current hash, or None (gone or skipped)."""
        t0 = time.perf_counter()
        report = ScanReport()
        paths = list(paths)
        known = self.index.get_many(paths)
        skipped = self.index.skipped_stats([p for p in paths if p not in known])
        todo, problems = [], []
        for rel in paths:
            rec = known.get(rel)
            st, why = _stat(f"{self._root_s}/{rel}")
            report.current[rel] = None
            if why is not None:
                problems.append((rel, why))
                continue
            if rec is not None and st is not None and rec.same_stat(st):
                report.unchanged += 1
                report.current[rel] = rec.hash
                continue
            sk = skipped.get(rel)
            if rec is None and sk is not None and st is not None and sk[1:] == (
                    st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
                report.skipped.append((rel, sk[0]))  # skipped before and unchanged since
                continue
            todo.append((rel, st, rec))
        self._record_problems(problems, skipped, set(), report)
        if todo:
            n_skipped = len(report.skipped)
            with self.index.writing():
                for rel, st, rec in todo:
                    report.current[rel] = self._apply(rel, st, report, rec)
            if any(why == BINARY_REASON for _, why in report.skipped[n_skipped:]):
                self._write_binary_ignore()
        report.elapsed = time.perf_counter() - t0
        return report
