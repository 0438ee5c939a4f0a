"""Vector sidecars: one binary file per (unit content hash, layer) holding a ``UnitEncoding``.

Layout (all integers little-endian)::

    b"LARVEC01"                 8-byte magic
    u32                         header length H
    H bytes                     UTF-8 JSON header
    zero padding                up to the next multiple of 64: the payload starts here
    payload                     the sections, each starting 64-byte aligned (relative to the
                                payload start, which is itself 64-byte aligned in the file)

The header holds ``format`` (1), ``model_id``, ``chunker_version``, ``dim``, ``n_tokens``,
``n_chunks``, ``token_dtype`` ("float16" | "float32" | "int8"), ``pooled_dim`` (or null), the
caller's ``meta`` dict (lever settings, PCA id, ...), ``payload_nbytes``, ``sections``
(``{name: [offset, nbytes, dtype, shape]}``, offsets relative to the payload start) and
``checksum``, the blake2b-128 hex digest of the payload bytes (padding included).

Sections, in order: ``tokens`` (float16, or int8 when the encoding's tokens are int8),
``token_scales`` (float32, int8 only), ``token_spans``, ``chunk_starts``, ``chunk_spans``
(int32 when every value fits, else int64; the dtype is recorded) and ``pooled`` (float16).
float32 token input is stored as float16.

Writes are atomic (temp file in the same folder, fsync, ``os.replace``). Reads memory-map the
file and hand out read-only views, so opening a sidecar costs a header parse; the checksum pass
(one read of the payload) is done on request, or once per file version per process through
``open_sidecar``.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from lar.core.errors import ConfigError, CorruptStateError
from lar.store.cas import atomic_write
from lar.encoders.encoding import UnitEncoding

__all__ = [
    "MAGIC", "FORMAT", "SUFFIX", "CorruptSidecarError", "Sidecar", "write_sidecar",
    "read_sidecar", "verify_sidecar", "open_sidecar", "sidecar_path", "clear_verified_cache",
]

MAGIC = b"LARVEC01"
FORMAT = 1
SUFFIX = ".lvec"
ALIGN = 64
MAX_HEADER_BYTES = 1 << 20
VERIFIED_CACHE_SIZE = 4096

_PREFIX = struct.Struct("<8sI")
_DTYPES = {"float16": "<f2", "float32": "<f4", "int8": "i1", "int32": "<i4", "int64": "<i8"}
_SECTION_ORDER = ("tokens", "token_scales", "token_spans", "chunk_starts", "chunk_spans", "pooled")
_REQUIRED = ("format", "model_id", "chunker_version", "dim", "n_tokens", "n_chunks",
             "token_dtype", "pooled_dim", "meta", "payload_nbytes", "sections", "checksum")


class CorruptSidecarError(CorruptStateError):
    """A vector sidecar failed an integrity check; ``path`` and ``problem`` say which and why."""

    def __init__(self, path: Path | str, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"vector sidecar {self.path} is corrupt: {problem}; lar drops this "
                         "file and rebuilds it by re-encoding the unit")


@dataclass(frozen=True, eq=False)
class Sidecar:
    """A read sidecar: the encoding (read-only arrays), the caller's meta, the file size."""

    encoding: UnitEncoding
    meta: dict
    nbytes: int
    header: dict
    path: Path | None = None


def sidecar_path(root: Path, h: str) -> Path:
    """Where the sidecar of unit ``h`` lives under ``root``: ``root/h[:2]/h.lvec``."""
    return Path(root) / h[:2] / f"{h}{SUFFIX}"


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def index_dtype(a: np.ndarray) -> str:
    """int32 when every value fits (the common case), else int64."""
    if a.size == 0:
        return "int32"
    lo, hi = int(a.min()), int(a.max())
    return "int32" if -(2 ** 31) <= lo and hi < 2 ** 31 else "int64"


def _storage_arrays(enc: UnitEncoding) -> list[tuple[str, str, np.ndarray]]:
    """(name, dtype name, C-contiguous little-endian array) for each section to write."""
    out: list[tuple[str, str, np.ndarray]] = []

    def add(name: str, dtype: str, a: np.ndarray) -> None:
        out.append((name, dtype, np.ascontiguousarray(a, dtype=_DTYPES[dtype])))

    if enc.tokens.dtype == np.int8:
        add("tokens", "int8", enc.tokens)
        add("token_scales", "float32", enc.token_scales)
    else:
        add("tokens", "float16", enc.tokens)
    for name in ("token_spans", "chunk_starts", "chunk_spans"):
        a = np.asarray(getattr(enc, name))
        add(name, index_dtype(a), a)
    if enc.pooled is not None:
        add("pooled", "float16", enc.pooled)
    return out


def _raw(a: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 view (no copy)."""
    return a.reshape(-1).view(np.uint8)


def write_sidecar(path: Path, enc: UnitEncoding, *, meta: dict | None = None,
                  durable: bool = True) -> int:
    """Write ``enc`` to ``path`` atomically and return the number of bytes written.

    ``meta`` is stored verbatim in the header (it must be JSON-serialisable). ``durable``
    fsyncs the file before the rename (on by default)."""
    path = Path(path)
    if meta is not None and not isinstance(meta, dict):
        raise ConfigError(f"sidecar meta must be a dict, got {type(meta).__name__}")
    arrays = _storage_arrays(enc)
    digest = hashlib.blake2b(digest_size=16)
    sections: dict[str, list[Any]] = {}
    layout: list[tuple[int, np.ndarray]] = []  # (padding before, array)
    off = 0
    for name, dtype, a in arrays:
        pad = _align(off) - off
        if pad:
            digest.update(bytes(pad))
        off += pad
        sections[name] = [off, int(a.nbytes), dtype, [int(x) for x in a.shape]]
        digest.update(_raw(a))
        layout.append((pad, a))
        off += a.nbytes
    header = {
        "format": FORMAT, "model_id": enc.model_id, "chunker_version": enc.chunker_version,
        "dim": enc.dim, "n_tokens": enc.n_tokens, "n_chunks": enc.n_chunks,
        "token_dtype": arrays[0][1],
        "pooled_dim": None if enc.pooled is None else int(enc.pooled.shape[1]),
        "meta": meta or {}, "payload_nbytes": off, "sections": sections,
        "checksum": digest.hexdigest(),
    }
    try:
        head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"sidecar meta is not JSON-serialisable: {exc}") from None
    if len(head) > MAX_HEADER_BYTES:
        raise ConfigError(f"sidecar header is {len(head)} bytes (limit {MAX_HEADER_BYTES}); "
                          "keep meta small")
    start = _align(_PREFIX.size + len(head))
    total = start + off
    def write(fh) -> None:
        fh.write(_PREFIX.pack(MAGIC, len(head)))
        fh.write(head)
        fh.write(bytes(start - _PREFIX.size - len(head)))
        for pad, a in layout:
            if pad:
                fh.write(bytes(pad))
            fh.write(_raw(a))

    atomic_write(path, write, durable=durable)
    return total


def _check_header(hdr: Any) -> str | None:
    """What is wrong with a parsed header, or None."""
    if not isinstance(hdr, dict):
        return "header is not a JSON object"
    missing = [k for k in _REQUIRED if k not in hdr]
    if missing:
        return f"header lacks {', '.join(missing)}"
    if hdr["format"] != FORMAT:
        return f"unsupported format {hdr['format']!r} (this lar reads format {FORMAT})"
    for k in ("dim", "n_tokens", "n_chunks", "payload_nbytes"):
        if not isinstance(hdr[k], int) or isinstance(hdr[k], bool) or hdr[k] < 0:
            return f"header field {k} is not a non-negative integer"
    if hdr["token_dtype"] not in ("float16", "float32", "int8"):
        return f"unsupported token dtype {hdr['token_dtype']!r}"
    if not isinstance(hdr["meta"], dict) or not isinstance(hdr["sections"], dict):
        return "header meta/sections are not objects"
    for name, sec in hdr["sections"].items():
        if name not in _SECTION_ORDER:
            return f"unknown section {name!r}"
        if (not isinstance(sec, list) or len(sec) != 4 or sec[2] not in _DTYPES
                or not all(isinstance(v, int) and v >= 0 for v in sec[:2])
                or not isinstance(sec[3], list)
                or not all(isinstance(v, int) and v >= 0 for v in sec[3])):
            return f"section {name!r} entry {sec!r} is malformed"
        if sec[0] % ALIGN:
            return f"section {name!r} offset {sec[0]} is not {ALIGN}-byte aligned"
        want = int(np.prod(sec[3], dtype=np.int64)) * np.dtype(_DTYPES[sec[2]]).itemsize
        if want != sec[1]:
            return f"section {name!r} has {sec[1]} bytes but shape {sec[3]} {sec[2]} needs {want}"
    for name in ("tokens", "token_spans", "chunk_starts", "chunk_spans"):
        if name not in hdr["sections"]:
            return f"section {name!r} is missing"
    return None


def _read_open(path: Path, fh: BinaryIO, size: int, verify: bool, mmap: bool) -> Sidecar:
    def bad(problem: str) -> CorruptSidecarError:
        return CorruptSidecarError(path, problem)

    prefix = fh.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size:
        raise bad(f"the file has {size} bytes, shorter than its {_PREFIX.size}-byte prefix "
                  "(truncated)")
    magic, hlen = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise bad(f"bad magic {magic!r} (expected {MAGIC!r}: not a lar vector sidecar)")
    if hlen > MAX_HEADER_BYTES:
        raise bad(f"header length {hlen} exceeds the {MAX_HEADER_BYTES}-byte limit")
    if _PREFIX.size + hlen > size:
        raise bad(f"the {hlen}-byte header runs past the end of the {size}-byte file (truncated)")
    try:
        hdr = json.loads(fh.read(hlen).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"unreadable header ({exc})") from None
    problem = _check_header(hdr)
    if problem:
        raise bad(f"unsupported header: {problem}")
    start = _align(_PREFIX.size + hlen)
    plen = hdr["payload_nbytes"]
    if size < start + plen:
        raise bad(f"the file has {size} bytes but its sections need {start + plen} (truncated)")
    if size > start + plen:
        raise bad(f"{size - start - plen} unexpected bytes after the last section")
    for name, (off, nb, _, _) in hdr["sections"].items():
        if off + nb > plen:
            raise bad(f"section {name!r} [{off}, {off + nb}) lies outside the "
                      f"{plen}-byte payload")
    if plen == 0:
        buf = np.zeros(0, dtype=np.uint8)
    elif mmap:
        buf = np.memmap(fh, dtype=np.uint8, mode="r", offset=start, shape=(plen,))
    else:
        fh.seek(start)
        data = fh.read(plen)
        if len(data) != plen:
            raise bad(f"read {len(data)} of {plen} payload bytes (truncated)")
        buf = np.frombuffer(data, dtype=np.uint8)
    if verify:
        got = hashlib.blake2b(buf, digest_size=16).hexdigest()
        if got != hdr["checksum"]:
            raise bad(f"checksum mismatch (header {hdr['checksum']}, payload {got}): the bytes "
                      "changed after the file was written")
    arrays: dict[str, np.ndarray] = {}
    for name, (off, nb, dtype, shape) in hdr["sections"].items():
        arrays[name] = buf[off:off + nb].view(_DTYPES[dtype]).reshape(shape)
    tok = arrays["tokens"]
    pooled = arrays.get("pooled")
    expect = {
        "tokens shape": (tok.shape, (hdr["n_tokens"], hdr["dim"])),
        "token dtype": (tok.dtype.name, hdr["token_dtype"]),
        "chunk count": (arrays["chunk_starts"].shape, (hdr["n_chunks"],)),
        "pooled dim": (None if pooled is None or pooled.ndim != 2 else pooled.shape[1],
                       hdr["pooled_dim"]),
    }
    for what, (got_v, want_v) in expect.items():
        if got_v != want_v:
            raise bad(f"header and sections disagree on the {what} ({want_v} vs {got_v})")
    try:
        enc = UnitEncoding(
            model_id=hdr["model_id"], chunker_version=hdr["chunker_version"], tokens=tok,
            token_spans=arrays["token_spans"], chunk_starts=arrays["chunk_starts"],
            chunk_spans=arrays["chunk_spans"], pooled=pooled,
            token_scales=arrays.get("token_scales"))
    except ConfigError as exc:
        raise bad(f"inconsistent arrays ({exc})") from None
    return Sidecar(encoding=enc, meta=hdr["meta"], nbytes=size, header=hdr, path=path)


def read_sidecar(path: Path, *, verify: bool = True, mmap: bool = True) -> Sidecar:
    """Read a sidecar. ``verify`` checks the payload checksum (one read of the payload);
    ``mmap`` returns read-only ``np.memmap`` views instead of reading the file into memory.
    Raises ``CorruptSidecarError`` on any integrity problem, ``FileNotFoundError`` if absent."""
    path = Path(path)
    with open(path, "rb") as fh:
        return _read_open(path, fh, os.fstat(fh.fileno()).st_size, verify, mmap)


def verify_sidecar(path: Path) -> None:
    """Raise ``CorruptSidecarError`` unless the sidecar at ``path`` is whole and unchanged."""
    read_sidecar(path, verify=True, mmap=True)


_verified: OrderedDict[tuple, None] = OrderedDict()
_verified_lock = threading.Lock()


def open_sidecar(path: Path) -> Sidecar:
    """Memory-map a sidecar, verifying its checksum only the first time this process opens
    this version of the file (same path, size, mtime_ns, inode); thread-safe. The process
    remembers the last ``VERIFIED_CACHE_SIZE`` verified versions (keys only, no maps)."""
    path = Path(path)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
        with _verified_lock:
            known = key in _verified
            if known:
                _verified.move_to_end(key)
        sc = _read_open(path, fh, st.st_size, verify=not known, mmap=True)
    if not known:
        with _verified_lock:
            _verified[key] = None
            while len(_verified) > VERIFIED_CACHE_SIZE:
                _verified.popitem(last=False)
    return sc


def clear_verified_cache() -> None:
    """Forget which sidecars were verified (the next ``open_sidecar`` verifies again)."""
    with _verified_lock:
        _verified.clear()
