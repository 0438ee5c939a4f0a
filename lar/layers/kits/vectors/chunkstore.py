"""``ChunkVectorStore``: one vector per chunk for the dense/static layers, scored by exact cosine.

On disk, under ``dir``:

* ``vectors.<generation>.f16`` (or ``.f32``): an append-only pack of raw little-endian rows of
  ``dim`` values. The generation changes only when ``compact`` rewrites the pack, so a reader
  always reads row numbers from the file they were written for, even while another process
  compacts.
* ``rows.sqlite`` (WAL, ``lar.layers.kits.vectors.chunkcatalog``): ``rows(hash PRIMARY KEY, first, n, spans, checksum)``: unit ``hash``
  owns pack rows ``[first, first + n)``, its chunks' byte spans (int64 ``(n, 2)`` blob) and the
  blake2b-128 of those rows' bytes; ``meta`` holds dim, dtype, generation and the live row count.
* ``writer.lock``: ``flock``-ed by writers of every process.

``put`` appends rows at the end of the pack, fsyncs, and only then commits the row, so a kill
mid-write leaves unreferenced tail bytes, never a row pointing at missing data. Replaced or
dropped units leave garbage rows; once garbage passes ``garbage_ratio`` of a pack larger than
``compact_min_bytes``, the pack is rewritten into the next generation.

Reads never trust the pack: a unit whose rows lie past the end of the file (truncated pack) or
whose bytes fail their checksum (checked the first time this store object reads them) is never
scored; it is dropped and listed by ``problems()`` so the layer can rebuild it.

Scoring converts float16 to float32 in cache-sized blocks with integer bit operations (exact,
several times faster than numpy's scalar float16 cast), then one BLAS matrix-vector product.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from lar.core.errors import ConfigError, CorruptStateError
from lar.layers.kits.vectors.chunkcatalog import RowCatalog
from lar.layers.kits.vectors.chunkpack import append_rows, rewrite_pack
from lar.layers.kits.vectors.chunkrows import (
    DTYPES, MISMATCH, TRUNCATED, ChunkHits, ChunkMatrix, RowTable, UnitRows, checksum, iter_f32,
    normalise)
from lar.layers.kits.vectors.chunkscan import scan_top_k

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: in-process locking only
    fcntl = None  # type: ignore[assignment]

__all__ = ["ChunkVectorStore", "ChunkMatrix", "ChunkHits"]

BLOCK_ROWS = 65536  # rows scored between two should_stop checks


class ChunkVectorStore:
    """Chunk vectors of many units: a pack file plus a SQLite row table (see the module doc).
    Thread-safe; writers in different processes serialise on ``writer.lock``."""

    def __init__(self, directory: Path, dim: int, dtype: str = "float16", *,
                 compact_min_bytes: int = 1 << 20, garbage_ratio: float = 0.5):
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
            raise ConfigError(f"ChunkVectorStore dim must be a positive integer, got {dim!r}")
        if dtype not in DTYPES:
            raise ConfigError(f"ChunkVectorStore dtype must be one of {sorted(DTYPES)}, "
                              f"got {dtype!r}")
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dim, self.dtype_name = int(dim), dtype
        self._dtype = np.dtype(DTYPES[dtype][0])
        self._suffix = DTYPES[dtype][1]
        self._row_bytes = self.dim * self._dtype.itemsize
        self.compact_min_bytes, self.garbage_ratio = compact_min_bytes, garbage_ratio
        self._lock = threading.RLock()
        self._rows: dict[str, UnitRows] | None = None  # the row table, loaded lazily
        self._table: RowTable | None = None  # its array form, rebuilt after changes
        self._dv, self._gen = -1, 0  # PRAGMA data_version and generation of the loaded rows
        self._mm: tuple[int, int, int, np.ndarray] | None = None  # (gen, inode, size, view)
        self._verified: set[tuple[int, str, int]] = set()  # (gen, hash, first)
        self._bad: dict[str, tuple[tuple[int, int, str], str]] = {}  # hash -> (identity, why)
        self._undropped: set[str] = set()  # quarantined units still in the database
        self._lock_fd = os.open(self.dir / "writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._cat = RowCatalog(self.dir / "rows.sqlite")
            with self._flock():
                meta = self._cat.initialise(self.dim, dtype)
        except CorruptStateError:
            os.close(self._lock_fd)
            raise
        if meta.get("dim") != str(self.dim) or meta.get("dtype") != dtype:
            self.close()
            raise CorruptStateError(
                f"the chunk vector store {self.dir} holds {meta.get('dim')}-dim "
                f"{meta.get('dtype')} vectors but was opened for {self.dim}-dim {dtype} (another "
                f"model or setting wrote it); delete {self.dir} and lar rebuilds it")

    # -- plumbing ---------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._lock_fd >= 0:
                self._cat.close()
                os.close(self._lock_fd)
                self._lock_fd, self._mm = -1, None

    def __enter__(self) -> "ChunkVectorStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _flock(self, blocking: bool = True) -> Iterator[bool]:
        if fcntl is None:
            yield True
            return
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _pack_path(self, gen: int) -> Path:
        return self.dir / f"vectors.{gen}.{self._suffix}"

    def _sync(self) -> dict[str, UnitRows]:
        """The row table, reloaded when another connection committed since the last load."""
        dv = self._cat.data_version()
        if self._rows is None or dv != self._dv:
            gen, rows = self._cat.load()
            self._rows, self._dv, self._gen, self._table = rows, dv, gen, None
        return self._rows

    def _is_bad(self, h: str, r: UnitRows) -> bool:
        b = self._bad.get(h)
        return b is not None and b[0] == (self._gen, r.first, r.checksum)

    def _plan(self, hashes: Iterable[str] | None) -> tuple[RowTable, np.ndarray, np.ndarray]:
        """The table, the wanted non-empty in-bounds units sorted by pack row, the pack."""
        with self._lock:
            for _ in range(2):
                rows = self._sync()
                pack = self._pack(self._gen)
                if pack is not None:
                    break
                self._rows = None  # compacted by another process since we loaded: reload
            t = self._table
            if t is None:
                hs, rs = list(rows), list(rows.values())
                t = self._table = RowTable(
                    self._gen, hs, {h: i for i, h in enumerate(hs)},
                    np.fromiter((r.first for r in rs), np.int64, len(rs)),
                    np.fromiter((r.n for r in rs), np.int64, len(rs)),
                    [r.spans for r in rs], [r.checksum for r in rs],
                    np.fromiter((self._is_bad(h, r) for h, r in rows.items()), bool, len(rs)),
                    np.fromiter(((self._gen, h, r.first) in self._verified
                                 for h, r in rows.items()), bool, len(rs)))
        if pack is None:  # the pack is gone: every row that needs it is reported
            pack = np.zeros((0, self.dim), dtype=self._dtype)
        if hashes is None:
            sel = np.arange(len(t.hashes))
        else:
            idx = t.index
            sel = np.fromiter((idx[h] for h in dict.fromkeys(hashes) if h in idx), np.int64)
        sel = sel[(t.n[sel] > 0) & ~t.bad[sel]]
        over = t.first[sel] + t.n[sel] > pack.shape[0]
        for i in sel[over].tolist():
            a = int(t.first[i])
            self._quarantine(t, i, TRUNCATED.format(a=a, b=a + t.n[i], n=pack.shape[0]))
        sel = sel[~over]
        return t, sel[np.argsort(t.first[sel], kind="stable")], pack

    def _pack(self, gen: int) -> np.ndarray | None:
        """Read-only (rows, dim) view of generation ``gen``'s pack, remapped when it grew;
        None when the file is missing (and not mapped already)."""
        try:
            st = os.stat(self._pack_path(gen))
        except FileNotFoundError:
            if self._mm is not None and self._mm[0] == gen:
                return self._mm[3]  # unlinked by a compaction; our mapping matches our rows
            return None if self._rows else np.zeros((0, self.dim), dtype=self._dtype)
        if self._mm is None or self._mm[:3] != (gen, st.st_ino, st.st_size):
            n = st.st_size // self._row_bytes
            view = (np.memmap(self._pack_path(gen), dtype=self._dtype, mode="r",
                              shape=(n, self.dim)) if n else np.zeros((0, self.dim), self._dtype))
            self._mm = (gen, st.st_ino, st.st_size, view)
        return self._mm[3]

    def _quarantine(self, t: RowTable, i: int, why: str) -> None:
        with self._lock:
            t.bad[i] = True
            h = t.hashes[i]
            self._bad[h] = ((t.gen, int(t.first[i]), t.checksum[i]), why)
            self._undropped.add(h)

    def _verify(self, t: RowTable, sel: np.ndarray, pack: np.ndarray) -> np.ndarray:
        """``sel`` less the units whose bytes fail their checksum (checked once per unit)."""
        todo = sel[~t.verified[sel]]
        for i in todo.tolist():
            a, b = int(t.first[i]), int(t.first[i] + t.n[i])
            if checksum(pack[a:b]) == t.checksum[i]:
                t.verified[i] = True
                self._verified.add((t.gen, t.hashes[i], a))
            else:
                self._quarantine(t, i, MISMATCH)
        return sel[~t.bad[sel]] if len(todo) else sel

    def _drop_quarantined(self, blocking: bool) -> None:
        if not self._undropped:
            return
        with self._lock, self._flock(blocking) as locked:
            if locked:
                todo = {h: self._bad[h][0] for h in self._undropped if h in self._bad}
                self._undropped.clear()
                self._delete_locked(todo)

    def _delete_locked(self, ident: dict[str, tuple[int, int, str] | None]) -> None:
        """Delete rows (only those still matching ``ident`` when one is given); locks held."""
        gone = self._cat.delete(ident)
        if self._rows is not None:
            for h in gone:
                self._rows.pop(h, None)
            self._table = None

    # -- writing ----------------------------------------------------------------------------
    def put(self, h: str, spans: np.ndarray, vectors: np.ndarray) -> None:
        """Store unit ``h``'s chunk vectors (normalised here) and chunk byte spans, replacing
        what ``h`` had."""
        self.put_many([(h, spans, vectors)])

    def put_many(self, items: Iterable[tuple[str, np.ndarray, np.ndarray]]) -> None:
        """``put`` several units with one append, one fsync and one transaction."""
        prepared = []
        for h, spans, vectors in items:
            v = np.asarray(vectors)
            if v.ndim != 2 or v.shape[1] != self.dim:
                raise ConfigError(f"unit {h}: vectors must have shape (n, {self.dim}), got "
                                  f"{v.shape}")
            s = np.ascontiguousarray(spans, dtype="<i8")
            if s.shape != (v.shape[0], 2):
                raise ConfigError(f"unit {h}: spans must have shape ({v.shape[0]}, 2), got "
                                  f"{s.shape}")
            if not np.isfinite(v).all():
                raise ConfigError(f"unit {h}: vectors contain NaN or infinity")
            raw = np.ascontiguousarray(normalise(v), dtype=self._dtype)
            prepared.append((h, s, raw, checksum(raw)))
        if not prepared:
            return
        self._drop_quarantined(blocking=True)
        with self._lock, self._flock():
            data = b"".join(raw.tobytes() for _, _, raw, _ in prepared)
            first = append_rows(self._pack_path(self._cat.meta_int("generation")),
                                self._row_bytes, data)
            new = self._cat.insert(prepared, first)
            if self._rows is not None:
                self._rows.update(new)
                self._table = None
            for h in new:
                self._bad.pop(h, None)
                self._undropped.discard(h)
            self._maybe_compact()

    def drop(self, hashes: Iterable[str]) -> None:
        """Forget these units (their rows become garbage)."""
        hashes = list(dict.fromkeys(hashes))
        with self._lock, self._flock():
            self._delete_locked(dict.fromkeys(hashes))
            for h in hashes:
                self._bad.pop(h, None)
                self._undropped.discard(h)
            self._maybe_compact()

    def _garbage(self) -> tuple[int, int]:
        """(garbage rows, pack bytes) of the current generation; locks held."""
        try:
            size = os.stat(self._pack_path(self._cat.meta_int("generation"))).st_size
        except FileNotFoundError:
            return 0, 0
        return -(-size // self._row_bytes) - self._cat.meta_int("live"), size

    def _maybe_compact(self) -> None:
        garbage, size = self._garbage()
        if (size > self.compact_min_bytes
                and garbage > self.garbage_ratio * (size / self._row_bytes)):
            self._compact_locked()

    def compact(self, *, force: bool = False) -> bool:
        """Rewrite the pack without garbage when garbage exceeds ``garbage_ratio`` of it (or
        always with ``force``); returns whether it did. Rows whose bytes are missing or fail
        their checksum are dropped and reported by ``problems()``."""
        with self._lock, self._flock():
            garbage, size = self._garbage()
            if not force and garbage <= self.garbage_ratio * (size / self._row_bytes):
                return False
            self._compact_locked()
            return True

    def _compact_locked(self) -> None:
        gen = self._cat.meta_int("generation")
        old_path, new_path = self._pack_path(gen), self._pack_path(gen + 1)  # locks held
        moves, lost, pos = rewrite_pack(old_path, new_path, self._cat.in_pack_order(),
                                        self._dtype, self.dim)
        try:
            self._cat.commit_compaction(gen + 1, moves, lost, pos)
        except BaseException:
            new_path.unlink(missing_ok=True)
            raise
        for h, first, ck, why in lost:
            self._bad[h] = ((gen, first, ck), why)
        for stale in self.dir.glob(f"vectors.*.{self._suffix}"):  # ours, and crash leftovers
            if stale != new_path:
                stale.unlink(missing_ok=True)
        self._rows, self._table, self._mm = None, None, None  # reload at the next read
        self._verified.clear()  # row numbers changed: verify again lazily

    # -- reading ----------------------------------------------------------------------------
    def problems(self) -> list[tuple[str, str]]:
        """(hash, reason) of units found corrupt (never scored); each stays listed until the
        unit is put again or dropped."""
        with self._lock:
            rows = self._sync()
            return sorted((h, why) for h, (ident, why) in self._bad.items()
                          if h not in rows or self._is_bad(h, rows[h]))

    def has(self, h: str) -> bool:
        with self._lock:
            r = self._sync().get(h)
            return r is not None and not self._is_bad(h, r)

    __contains__ = has

    def hashes(self) -> list[str]:
        with self._lock:
            return sorted(h for h, r in self._sync().items() if not self._is_bad(h, r))

    def __len__(self) -> int:
        return len(self.hashes())

    def pack_order(self, hashes: Iterable[str]) -> list[str]:
        """The stored non-empty units of ``hashes`` in the order a search scans them (pack
        order; the dense layer's shards scan in it too)."""
        t, sel, _ = self._plan(hashes)
        return [t.hashes[i] for i in sel.tolist()]

    def n_rows(self) -> int:
        """Live chunk rows (garbage and quarantined units excluded)."""
        with self._lock:
            return sum(r.n for h, r in self._sync().items() if not self._is_bad(h, r))

    def bytes_used(self) -> int:
        """Bytes on disk: the pack (garbage included) and the SQLite files."""
        total = 0
        for p in self.dir.iterdir():
            if p.name.startswith(("vectors.", "rows.sqlite")):
                try:
                    total += p.stat().st_size
                except FileNotFoundError:
                    pass
        return total

    def matrix(self, hashes: Iterable[str] | None = None, *, float32: bool = True) -> ChunkMatrix:
        """The chunk vectors of ``hashes`` (every unit when None; unknown hashes are skipped),
        in pack order."""
        t, sel, pack = self._plan(hashes)
        sel = self._verify(t, sel, pack)
        self._drop_quarantined(blocking=False)
        rows, counts = t.rows_of(sel), t.n[sel]
        if float32:
            vectors = np.empty((len(rows), self.dim), dtype=np.float32)
            for o, x in iter_f32(pack, rows):
                vectors[o:o + x.shape[0]] = x
        elif len(rows) and rows[-1] - rows[0] + 1 == len(rows):  # one contiguous range
            vectors = pack[int(rows[0]):int(rows[-1]) + 1]
        else:
            vectors = pack[rows]
        spans = (np.concatenate([t.spans[i] for i in sel.tolist()]) if len(sel)
                 else np.zeros((0, 2), dtype=np.int64))
        return ChunkMatrix(vectors=vectors, owners=[t.hashes[i] for i in sel.tolist()],
                           spans=spans,
                           unit_index=np.repeat(np.arange(len(sel), dtype=np.int32), counts))

    def get(self, h: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(spans, float32 vectors) of one unit, or None if absent or corrupt."""
        m = self.matrix([h])
        return (m.spans, m.vectors) if m.owners else None

    def search(self, q: np.ndarray, hashes: Iterable[str] | None = None, k: int = 10, *,
               should_stop: Callable[[], bool] | None = None,
               block_rows: int = BLOCK_ROWS, arena=None) -> ChunkHits:
        """Exact cosine top-``k`` chunks among ``hashes`` (every unit when None), scanned in
        blocks of about ``block_rows`` rows; ``should_stop`` is asked between blocks, and a
        stop returns the best of what was scored with ``fraction`` < 1; ``arena``: a device
        arena to score from (``lar.layers.kits.vectors.chunkscan``)."""
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ConfigError(f"query has {q.shape[0]} dims, the store holds {self.dim}")
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        qn = normalise(q)
        t, sel, pack = self._plan(hashes)
        found = scan_top_k(t, sel, pack, qn, k, verify=self._verify, should_stop=should_stop,
                           block_rows=block_rows, arena=arena)
        self._drop_quarantined(blocking=False)
        return found
