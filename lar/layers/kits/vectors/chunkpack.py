"""The chunk vector store's pack files: appending rows durably, and rewriting a pack without
garbage (compaction) while checking every unit's bytes against its checksum."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lar.layers.kits.vectors.chunkrows import MISMATCH, TRUNCATED, checksum


def fsync_dir(directory: Path) -> None:
    """Make a created or renamed file's directory entry durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_rows(path: Path, row_bytes: int, data: bytes) -> int:
    """Write ``data`` (whole rows) at the end of the pack ``path`` and fsync it; returns the
    first row number written. A torn tail left by a killed write is skipped, never reused."""
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        first = -(-os.fstat(fd).st_size // row_bytes)
        pos, view = first * row_bytes, memoryview(data)
        while view:
            done = os.pwrite(fd, view, pos)
            view, pos = view[done:], pos + done
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return first


def rewrite_pack(old_path: Path, new_path: Path, rows: list[tuple[str, int, int, str]],
                 dtype: np.dtype, dim: int) -> tuple[list[tuple[int, str]], list[tuple], int]:
    """Copy the units ``rows`` (hash, first, n, checksum; in pack order) from ``old_path`` into
    a new pack at ``new_path`` (fsynced). Returns the moves ``(new first, hash)``, the units
    lost ``(hash, first, checksum, why)`` (bytes missing or changed) and the rows written."""
    row_bytes = dim * dtype.itemsize
    try:
        old_size = os.stat(old_path).st_size
    except FileNotFoundError:
        old_size = 0
    n_old = old_size // row_bytes
    old = (np.memmap(old_path, dtype=dtype, mode="r", shape=(n_old, dim))
           if n_old else np.zeros((0, dim), dtype=dtype))
    moves, lost, pos = [], [], 0
    with open(new_path, "wb") as fh:
        for h, first, n, ck in rows:
            if first + n > n_old:
                lost.append((h, first, ck, TRUNCATED.format(a=first, b=first + n, n=n_old)))
                continue
            block = old[first:first + n]
            if checksum(block) != ck:
                lost.append((h, first, ck, MISMATCH))
                continue
            fh.write(block.tobytes())
            moves.append((pos, h))
            pos += n
        fh.flush()
        os.fsync(fh.fileno())
    del old
    fsync_dir(new_path.parent)
    return moves, lost, pos
