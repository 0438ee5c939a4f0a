"""Immutable sparse segments: an inverted index (term -> postings) over the chunks of some units.

The segment design is bm25's (``lar.layers.kits.lexical.segments``): a folder built under a temporary name
and renamed when complete, a header (``segment.json``) with the parameters and the size and
CRC-32 of every file, a doc table (``docs.json``: unit hashes and ``[unit, start, end]`` per doc
id), and ``SegmentStore``'s layout file naming the live main and delta segments; merges, deltas
and tombstones are ``lar.layers.kits.lexical.index.SegmentedIndex``'s, unchanged.

What differs is the index: the docs x vocabulary matrix of the chunks' weights in CSC form
(scipy.sparse), stored as ``indptr.npy`` / ``indices.npy`` / ``data.npy`` and memory-mapped. The
postings of term ``t`` are column ``t``: ``indices[indptr[t]:indptr[t + 1]]`` (doc ids) and their
weights. A query's score for every doc is the exact dot product ``X[:, q.ids] @ q.weights``.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from lar.core.errors import require
from lar.layers.kits.lexical.segments import DOCS, HEADER, NOT_CORRUPTION, TMP, CorruptSegment, SegmentStore
from lar.layers.sparse.vectors import SparseVec, pack

__all__ = ["SparseParams", "SparseSegment", "SparseSegmentStore"]

SPARSE_SEGMENT_FORMAT = 1
ARRAYS = ("indptr", "indices", "data")


@dataclass(frozen=True)
class SparseParams:
    """What a segment depends on: the build key (model, pruning, chunking) and the vocabulary."""

    key: str
    vocab_size: int
    method: str = "dot"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "vocab_size": self.vocab_size, "method": self.method}


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


class SparseSegment:
    """A loaded segment: units, doc table and the CSC matrix (None when it holds no doc)."""

    def __init__(self, seg_id: str, path: Path, units: list[str], docs: np.ndarray, matrix: Any):
        self.id = seg_id
        self.path = path
        self.units = units
        self.docs = docs
        self.matrix = matrix
        self.n_docs = int(len(docs))
        self.unit_set = frozenset(units)
        self.docs_per_unit = np.bincount(docs[:, 0], minlength=len(units)) if len(docs) else \
            np.zeros(len(units), dtype=np.int64)

    @classmethod
    def load(cls, path: Path, params: SparseParams) -> "SparseSegment":
        try:
            header = json.loads((path / HEADER).read_text("utf-8"))
            if header.get("format") != SPARSE_SEGMENT_FORMAT or header.get("kind") != "sparse":
                raise CorruptSegment(f"not a sparse segment of format {SPARSE_SEGMENT_FORMAT}")
            if header.get("params") != params.to_dict():
                raise CorruptSegment("built with other parameters (model, pruning or vocabulary)")
            for name, (size, crc) in header["files"].items():
                fp = path / name
                if fp.stat().st_size != size or _crc(fp) != crc:
                    raise CorruptSegment(f"{name} does not match the header (size or checksum)")
            table = json.loads((path / DOCS).read_text("utf-8"))
            units = list(table["units"])
            docs = np.asarray(table["docs"], dtype=np.int64).reshape(-1, 3)
            if len(docs) != header["n_docs"] or len(units) != header["n_units"]:
                raise CorruptSegment("doc table size differs from the header")
            if len(docs) and (docs[:, 0].min() < 0 or docs[:, 0].max() >= len(units)
                              or (docs[:, 1] > docs[:, 2]).any() or docs[:, 1].min() < 0):
                raise CorruptSegment("doc table holds invalid entries")
            matrix = None
            if len(docs):
                sp = require("scipy.sparse", "models")
                indptr, indices, data = (np.load(path / f"{a}.npy", mmap_mode="r") for a in ARRAYS)
                if (indptr.shape != (params.vocab_size + 1,) or indptr[0] != 0
                        or indptr[-1] != indices.shape[0] or indices.shape != data.shape
                        or (indices.size and (int(indices.max()) >= len(docs) or int(indices.min()) < 0))):
                    raise CorruptSegment("the postings arrays disagree with each other or the doc table")
                matrix = sp.csc_matrix((data, indices, indptr), shape=(len(docs), params.vocab_size),
                                       copy=False)
        except CorruptSegment:
            raise
        except MemoryError:
            raise  # a failure to read, not a damaged segment
        except OSError as exc:
            if exc.errno in NOT_CORRUPTION:  # likewise (no file handles, I/O error, access)
                raise
            raise CorruptSegment(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # missing file, bad JSON, numpy load error
            raise CorruptSegment(f"{type(exc).__name__}: {exc}") from None
        return cls(path.name, path, units, docs, matrix)

    def alive_mask(self, allowed: set[str] | frozenset[str]) -> np.ndarray | None:
        """Per doc True for docs of ``allowed`` units; None when every doc is alive."""
        alive = np.fromiter((h in allowed for h in self.units), dtype=bool, count=len(self.units))
        if alive.all():
            return None
        return alive[self.docs[:, 0]]

    def scores(self, q: SparseVec) -> np.ndarray:
        """Every doc's exact score ``sum_t q_t * d_t`` (float32)."""
        keep = q.ids < self.matrix.shape[1]
        ids, w = q.ids[keep], q.weights[keep]
        if not ids.size:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(self.matrix[:, ids] @ w, dtype=np.float32).reshape(-1)

    def search(self, q: SparseVec, k: int, allowed: set[str] | frozenset[str],
               weights: Any = None, moments=None) -> list[tuple[float, int]]:
        """Top ``k`` ``(score, doc id)`` with a positive score among the docs of ``allowed``
        units; ``moments`` (``lar.core.background.ScoreMoments``) gets every allowed doc's score.
        ``weights`` is unused (the segmented index's global-IDF hook; dot products need none)."""
        if self.matrix is None or k < 1:
            return []
        mask = self.alive_mask(allowed)
        if mask is not None and not mask.any():
            return []
        s = self.scores(q)
        if moments is not None:
            moments.add(s if mask is None else s[mask])
        if mask is not None:
            s = np.where(mask, s, 0.0).astype(np.float32)
        k = min(k, self.n_docs)
        ids = np.argpartition(-s, k - 1)[:k] if k < self.n_docs else np.arange(self.n_docs)
        ids = ids[np.argsort(-s[ids], kind="stable")]
        return [(float(s[i]), int(i)) for i in ids if s[i] > 0]

    def doc(self, i: int) -> tuple[str, int, int]:
        u, s, e = self.docs[i]
        return self.units[int(u)], int(s), int(e)


class SparseSegmentStore(SegmentStore):
    """``SegmentStore``'s folders and layout, with sparse segments in them."""

    def __init__(self, directory: Path, params: SparseParams):
        super().__init__(directory, params)  # type: ignore[arg-type]

    def load(self, seg_id: str) -> SparseSegment:  # type: ignore[override]
        return SparseSegment.load(self.seg_dir / seg_id, self.params)  # type: ignore[arg-type]

    def build(self, units: Iterable[tuple[str, Sequence[tuple[int, int]], Sequence[SparseVec]]],
              seg_id: str | None = None) -> SparseSegment:  # type: ignore[override]
        """A new segment from ``(hash, chunk spans, chunk vectors)`` of units; chunks with an
        empty vector are left out, their units still count as covered."""
        seg_id = seg_id or self.new_id()
        tmp = self.seg_dir / f"{TMP}{seg_id}"
        tmp.mkdir(parents=True)
        try:
            unit_list: list[str] = []
            docs: list[list[int]] = []
            vecs: list[SparseVec] = []
            for h, spans, chunk_vecs in units:
                ui = len(unit_list)
                unit_list.append(h)
                for (s, e), v in zip(spans, chunk_vecs):
                    if v.nnz:
                        docs.append([ui, int(s), int(e)])
                        vecs.append(v)
            if vecs:
                sp = require("scipy.sparse", "models")
                indptr, ids, w = pack(vecs)
                vocab = int(self.params.vocab_size)  # type: ignore[attr-defined]
                if int(ids.max()) >= vocab:
                    raise ValueError(f"a term id {int(ids.max())} lies outside the vocabulary ({vocab})")
                csc = sp.csr_matrix((w, ids, indptr), shape=(len(vecs), vocab)).tocsc()
                csc.sort_indices()
                # index dtypes as scipy chose them (int32 while they fit): loading copies nothing
                for name, arr in zip(ARRAYS, (csc.indptr, csc.indices, csc.data.astype(np.float32))):
                    np.save(tmp / f"{name}.npy", arr)
            (tmp / DOCS).write_text(json.dumps({"units": unit_list, "docs": docs},
                                               separators=(",", ":")), "utf-8")
            files = {p.name: [p.stat().st_size, _crc(p)] for p in sorted(tmp.iterdir())}
            header = {"format": SPARSE_SEGMENT_FORMAT, "kind": "sparse", "id": seg_id,
                      "params": self.params.to_dict(), "n_docs": len(docs),
                      "n_units": len(unit_list), "files": files, "created": time.time()}
            (tmp / HEADER).write_text(json.dumps(header, indent=1), "utf-8")
            os.replace(tmp, self.seg_dir / seg_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.load(seg_id)
