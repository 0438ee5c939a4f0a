"""The files the scanner skipped as binary, as an ignore file for ripgrep (issue 18, item 11).

The grep layer reads every file as text (``rg --text``) so that it sees the files the building
layers index (the scanner calls a file binary only for a NUL byte in its first 8 KiB; ripgrep's
own detection would also drop a file whose first NUL comes later). Reading the binaries the
scanner skipped would cost a search their bytes for matches that are dropped anyway, so the
scanner lists them in ``<state>/binary.ignore`` (gitignore syntax, one anchored path a line,
written when the set changes) and grep passes it with ``--ignore-file``. An ignore file can only
narrow what ripgrep lists: every line is an escaped literal path, never a ``!`` negation. Paths
that gitignore syntax cannot hold (a newline, bytes that are not UTF-8) are left out: grep
reads them and the stat check drops their matches.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from lar.store.pathkeys import is_utf8_name

BINARY_REASON = "binary (NUL byte in the first 8 KiB)"
FILE_NAME = "binary.ignore"
_SPECIAL = re.compile(r"([\\*?\[\]!#{}])")


def ignore_path(state_dir: Path) -> Path:
    return Path(state_dir) / FILE_NAME


def ignore_line(path: str) -> str | None:
    """The anchored, escaped gitignore line that matches exactly ``path``, or None."""
    if "\n" in path or "\r" in path or not is_utf8_name(path) or not path:
        return None
    line = "/" + _SPECIAL.sub(r"\\\1", path)
    if line.endswith(" "):
        line = line[:-1] + "\\ "
    return line


def write_ignore(state_dir: Path, paths: Iterable[str]) -> bool:
    """Write the ignore file for ``paths`` if it differs from the one there; True if written."""
    target = ignore_path(state_dir)
    text = "".join(f"{line}\n" for line in sorted(filter(None, map(ignore_line, paths))))
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    tmp = target.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return True
