"""Content-addressed store under the state dir, sharded by hash prefix (``ab/cdef...``).

Every write is atomic (temp file in the same folder, then ``os.replace``), so a reader sees a
whole object or none, and two writers of the same content cannot corrupt each other.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

HASH_BYTES = 16  # 32 hex chars; blake2b is fast and collision-safe at this size for a corpus


def content_hash(data: bytes) -> str:
    """The hash lar uses for a unit: blake2b-128 over the bytes actually read."""
    return hashlib.blake2b(data, digest_size=HASH_BYTES).hexdigest()


def atomic_write(path: Path, data: bytes | Callable[[BinaryIO], None], *,
                 durable: bool = True) -> None:
    """Write ``data`` (bytes, or a function writing to the open file) to ``path`` so that
    readers never see a partial file (temp + rename); ``durable`` also fsyncs before the rename.
    On any error the temp file is removed and ``path`` keeps its old content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class ContentStore:
    """Blobs keyed by content hash: ``<dir>/<hash[:2]>/<hash>``."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, h: str) -> Path:
        return self.dir / h[:2] / h

    def has(self, h: str) -> bool:
        return self.path(h).exists()

    def put(self, data: bytes, h: str | None = None) -> str:
        h = h or content_hash(data)
        p = self.path(h)
        if not p.exists():
            atomic_write(p, data, durable=False)  # content-verified on read
        return h

    def get(self, h: str) -> bytes | None:
        p = self.path(h)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None
        if content_hash(data) != h:  # corrupt blob: drop it rather than serve wrong bytes
            try:
                p.unlink()
            except OSError:
                pass
            return None
        return data

    def find_prefix(self, prefix: str) -> list[str]:
        d = self.dir / prefix[:2]
        if len(prefix) < 2 or not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if p.name.startswith(prefix))
