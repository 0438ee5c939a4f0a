"""The scanner: the single writer that brings the file index in line with the folder.

Listing uses ``rg --files`` so .gitignore/.ignore/.rgignore/.larignore and hidden files are
treated exactly as ripgrep treats them; symlinks are not followed. A stat pass compares size and
mtime with the index; only files whose stat changed are read and hashed (the hash is over the
bytes actually read). Binary files and files over ``max_bytes`` are skipped with a reason.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from lar.core.errors import LarError
from lar.store.rg import BASE_FLAGS, ignore_flags, rg_path
from lar.store.extract import BINARY_EXTRACTABLE
from lar.store.cas import content_hash
from lar.store.fileindex import FileIndex

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
    cmd = [rg_path(), "--files", "--null", *BASE_FLAGS, *ignore_flags(root)]
    for g in exclude:
        cmd += ["--glob", f"!{g}"]
    proc = subprocess.run(cmd, cwd=root, capture_output=True)
    if proc.returncode not in (0, 1):
        raise LarError(f"listing files with ripgrep failed: {proc.stderr.decode(errors='replace')}")
    out = []
    for raw in proc.stdout.split(b"\0"):
        if not raw:
            continue
        if raw.startswith(b"./"):
            raw = raw[2:]
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(os.fsdecode(raw))  # reported as skipped by the caller
    return out


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
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError:
            return "skip", "file name is not valid UTF-8"
        if st is None:
            return "gone", None
        if st.st_size > self.max_bytes:
            return "skip", f"too large ({st.st_size} bytes > limit {self.max_bytes}); raise max_bytes to include it"
        try:
            with open(self.root / rel, "rb") as fh:
                data = fh.read(self.max_bytes + 1)
        except FileNotFoundError:
            return "gone", None
        except OSError as exc:
            return "skip", f"unreadable: {exc.strerror or exc}"
        if len(data) > self.max_bytes:
            return "skip", f"too large (> limit {self.max_bytes} bytes)"
        if is_binary(data) and os.path.splitext(rel)[1].lower() not in BINARY_EXTRACTABLE:
            return "skip", "binary (NUL byte in the first 8 KiB)"
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
        listed = list_files(self.root, self.exclude)
        report.listed = len(listed)
        report.paths = listed
        known = self.index.all_paths()
        skipped = self.index.skipped_stats()
        seen = set()
        todo = []
        for rel in listed:
            seen.add(rel)
            try:
                st = os.stat(f"{self._root_s}/{rel}", follow_symlinks=False)
            except FileNotFoundError:
                st = None
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
        gone = [rel for rel, rec in known.items() if rel not in seen and not rec.deleted]
        stale_skips = [rel for rel in skipped if rel not in seen]
        if gone or stale_skips:
            with self.index.writing():
                for rel in gone:
                    if self.index.tombstone(rel) is not None:
                        report.deleted.append(rel)
                for rel in stale_skips:
                    self.index.forget_skip(rel)
        report.elapsed = time.perf_counter() - t0
        return report

    def refresh(self, paths: Iterable[str]) -> ScanReport:
        """Stat-check only ``paths`` (e.g. files a grep matched); re-hash those that changed.
        ``report.current`` maps each path to its current hash, or None (gone or skipped)."""
        t0 = time.perf_counter()
        report = ScanReport()
        paths = list(paths)
        known = self.index.get_many(paths)
        todo = []
        for rel in paths:
            rec = known.get(rel)
            try:
                st = os.stat(f"{self._root_s}/{rel}", follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                st = None
            except OSError:
                st = None
            if rec is not None and st is not None and rec.same_stat(st):
                report.unchanged += 1
                report.current[rel] = rec.hash
                continue
            report.current[rel] = None
            todo.append((rel, st, rec))
        if todo:
            with self.index.writing():
                for rel, st, rec in todo:
                    report.current[rel] = self._apply(rel, st, report, rec)
        report.elapsed = time.perf_counter() - t0
        return report
