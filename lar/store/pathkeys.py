"""Paths whose names are not valid UTF-8 (issue 18, item 8).

POSIX file names are bytes; lar holds paths as ``str`` and a name that is not valid UTF-8 is
decoded the way ``os.fsdecode`` does it (each bad byte becomes a lone surrogate). Such a string
cannot be written to SQLite as TEXT, printed or put in JSON. lar never indexes such a file (its
path could not appear in a hit); it records it as skipped, keyed by the name's raw bytes (a
BLOB, which never equals a TEXT key, so no real file's row can be hit by mistake), and shows the
name with the bad bytes escaped (``bad\\xff.txt``).
"""
from __future__ import annotations

import os


def is_utf8_name(path: str) -> bool:
    """True when ``path`` round-trips through UTF-8 (no surrogate-escaped bytes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def path_key(path: str) -> str | bytes:
    """The SQLite key of ``path``: the path itself, or the raw bytes of a non-UTF-8 name."""
    return path if is_utf8_name(path) else os.fsencode(path)


def key_path(key: str | bytes) -> str:
    """The inverse of ``path_key``: the path as the scanner holds it."""
    return os.fsdecode(key) if isinstance(key, bytes) else key


def display_path(key: str | bytes) -> str:
    """A printable form of a path or key: bytes that are not UTF-8 shown as ``\\xNN``."""
    raw = key if isinstance(key, bytes) else os.fsencode(key) if not is_utf8_name(key) else None
    return key if raw is None else raw.decode("utf-8", errors="backslashreplace")
