"""Per-unit artefacts of the ``sparse`` layer: each chunk's span and its pruned term vector.

One row per content hash in ``<layer dir>/units.sqlite`` (the same SQLite table as bm25's
``UnitStore``: hash, build version, payload), written in one statement. The payload is a
zlib-compressed binary record, checked when read:

``int64 [n_chunks, nnz]``, ``int64 spans (n, 2)``, ``int64 indptr (n + 1)``, ``int32 ids
(nnz)``, ``float32 weights (nnz)`` (the chunks' vectors as CSR rows, ``lar.layers.sparse.vectors.pack``).

Segments are built from these rows (``lar.layers.sparse.segments``) without running the model again.
"""
from __future__ import annotations

import zlib
from typing import Iterable, Iterator, Sequence

import numpy as np

from lar.layers.kits.lexical.chunks import UnitStore
from lar.layers.sparse.vectors import SparseVec, pack, unpack

__all__ = ["CorruptRecord", "SparseUnitStore", "decode_record", "encode_record"]


class CorruptRecord(ValueError):
    """A stored record that does not decode to consistent arrays."""


def encode_record(spans: Sequence[tuple[int, int]], vecs: Sequence[SparseVec]) -> bytes:
    if len(spans) != len(vecs):
        raise ValueError("one vector per span")
    indptr, ids, w = pack(vecs)
    sp = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    head = np.asarray([len(vecs), ids.size], dtype=np.int64)
    raw = b"".join(a.tobytes() for a in (head, sp, indptr, ids, w))
    return zlib.compress(raw, 1)


def decode_record(blob: bytes) -> tuple[list[tuple[int, int]], list[SparseVec]]:
    try:
        raw = zlib.decompress(blob)
    except zlib.error as exc:
        raise CorruptRecord(f"not zlib data: {exc}") from None
    if len(raw) < 16:
        raise CorruptRecord("record too short")
    n, nnz = (int(x) for x in np.frombuffer(raw, dtype=np.int64, count=2))
    need = 16 + 16 * n + 8 * (n + 1) + 8 * nnz
    if n < 0 or nnz < 0 or len(raw) != need:
        raise CorruptRecord(f"record of {len(raw)} bytes, expected {need}")
    pos = 16
    spans = np.frombuffer(raw, dtype=np.int64, count=2 * n, offset=pos).reshape(n, 2)
    pos += 16 * n
    indptr = np.frombuffer(raw, dtype=np.int64, count=n + 1, offset=pos)
    pos += 8 * (n + 1)
    ids = np.frombuffer(raw, dtype=np.int32, count=nnz, offset=pos)
    w = np.frombuffer(raw, dtype=np.float32, count=nnz, offset=pos + 4 * nnz)
    if indptr[0] != 0 or indptr[-1] != nnz or (np.diff(indptr) < 0).any() or (spans[:, 0] > spans[:, 1]).any():
        raise CorruptRecord("inconsistent chunk table")
    try:
        vecs = unpack(indptr, ids, w)
    except ValueError as exc:
        raise CorruptRecord(str(exc)) from None
    return [(int(a), int(b)) for a, b in spans], vecs


class SparseUnitStore(UnitStore):
    """``{hash: (chunk spans, chunk vectors)}``; ``get_many`` yields the rows a segment is built
    from, skipping (so: not built) any that fails to decode."""

    label = "sparse unit store"

    def put_vectors(self, h: str, version: str, spans: Sequence[tuple[int, int]],
                    vecs: Sequence[SparseVec]) -> int:
        """Store one unit (atomic); returns the stored bytes."""
        blob = encode_record(spans, vecs)
        self.put_blob(h, version, blob)
        return len(blob)

    def get_many(self, hashes: Iterable[str], version: str  # type: ignore[override]
                 ) -> Iterator[tuple[str, list[tuple[int, int]], list[SparseVec]]]:
        for h, blob in self.blobs(hashes, version):
            try:
                spans, vecs = decode_record(blob)
            except CorruptRecord:
                continue
            yield h, spans, vecs

    def chunk_vector(self, h: str, version: str, start: int, end: int) -> SparseVec | None:
        """The stored vector of unit ``h``'s chunk ``[start, end)``, or None."""
        for _, spans, vecs in self.get_many([h], version):
            for (s, e), v in zip(spans, vecs):
                if s == start and e == end:
                    return v
        return None
