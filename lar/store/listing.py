"""Listing the folder with ``rg --files``: the paths ripgrep would search, and the paths it
could not read (a folder whose path is longer than PATH_MAX, one without permission).

ripgrep lists what it can and exits 2 when some path failed; lar keeps the listing and reports
each failed path with ripgrep's reason (the scanner records it as skipped), so one bad path
never makes the whole folder unusable. Only a listing that failed as a whole raises.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lar.core.errors import LarError
from lar.store.rg import LIST_FLAGS, ignore_flags, rg_path


@dataclass(frozen=True)
class Listing:
    paths: tuple[str, ...]  # root-relative POSIX paths (a non-UTF-8 name as os.fsdecode gives it)
    problems: tuple[tuple[str, str], ...] = ()  # (root-relative path, why it was not listed)


def _problem(line: bytes) -> tuple[str, str] | None:
    """``rg: ./PATH: REASON (os error N)`` -> (PATH, REASON); None for any other message."""
    if not line.startswith(b"rg: ./") or not line.rstrip().endswith(b")") \
            or b"(os error " not in line:
        return None
    path, sep, reason = line[len(b"rg: ./"):].rstrip().rpartition(b": ")
    if not sep:
        return None
    return os.fsdecode(path.rstrip(b"/")), reason.decode("utf-8", errors="replace")


def list_root(root: Path, exclude: Iterable[str] = ()) -> Listing:
    """What ripgrep lists under ``root`` (its ignore rules, hidden files left out, symlinks
    not followed), and the paths it could not read."""
    cmd = [rg_path(), "--files", "--null", *LIST_FLAGS, *ignore_flags(root)]
    for g in exclude:
        cmd += ["--glob", f"!{g}"]
    proc = subprocess.run([*cmd, "./"], cwd=root, capture_output=True)
    problems, other = [], []
    for line in proc.stderr.splitlines():
        got = _problem(line)
        if got is not None and got[0] not in ("", "."):
            problems.append(got)
        elif line.strip():
            other.append(line.decode("utf-8", errors="replace"))
    if proc.returncode not in (0, 1) and not proc.stdout and not problems:
        reason = "; ".join(other) or f"rg exited with status {proc.returncode}"
        raise LarError(f"listing the files under {str(root)!r} with ripgrep failed: {reason}")
    paths = []
    for raw in proc.stdout.split(b"\0"):
        if raw.startswith(b"./"):
            raw = raw[2:]
        if raw:
            try:
                paths.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                paths.append(os.fsdecode(raw))  # the scanner skips it with a reason
    return Listing(tuple(paths), tuple(problems))
