"""One encoder pass per unit, shared by the layers that read the same model.

``SharedEncodings`` keeps, per (model id, chunking), one sidecar per content hash with the unit's
token vectors, their byte spans, the chunk spans and the chunks' pooled vectors. ``dense`` reads
the pooled vectors, ``late`` the token vectors: whichever layer builds a unit first pays the
encoder pass, the other reads the file. Files are written atomically (``write_sidecar``); a
corrupt or truncated one is deleted and re-encoded, never used.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from lar.layers.kits.chunking import CHUNKER_VERSION, chunk
from lar.encoders.encoding import UnitEncoding
from lar.layers.kits.vectors.sidecar import CorruptSidecarError, open_sidecar, sidecar_path, write_sidecar

__all__ = ["SharedEncodings", "SharedPass", "SharedPassLayer", "chunk_target_bytes",
           "embedding_chunks"]


def chunk_target_bytes(max_tokens: int) -> int:
    """Chunk size in bytes aimed at one encoder window (~3 bytes a token for prose; longer
    chunks are split into several windows by the encoder, never truncated)."""
    return max(256, int(max_tokens) * 3)


def embedding_chunks(doc, target: int) -> list[tuple[int, int]]:
    """The byte spans of ``doc`` an embedding layer encodes (the shared structural chunker)."""
    return chunk(doc, target=target, hard_max=max(8 * target, 8000))


class SharedEncodings:
    """Sidecars of one encoder under ``state_dir/encodings/<model id>-c<chunking>/``."""

    def __init__(self, state_dir: Path, encoder, *, target: int | None = None):
        self.encoder = encoder
        self.target = int(target or chunk_target_bytes(encoder.max_tokens))
        self.chunker_version = f"{CHUNKER_VERSION}t{self.target}"
        self.key = f"{encoder.model_id}-c{self.chunker_version}"
        self.root = Path(state_dir) / "encodings" / self.key
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.encoded = 0  # encoder passes this process made (the other layer's reuse is free)

    def path(self, h: str) -> Path:
        return sidecar_path(self.root, h)

    def _lock(self, h: str) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(h)
            if lock is None:
                if len(self._locks) > 4096:
                    self._locks = {k: v for k, v in self._locks.items() if v.locked()}
                lock = self._locks[h] = threading.Lock()
            return lock

    def get(self, h: str) -> UnitEncoding | None:
        """The stored encoding of ``h``, or None (absent, or corrupt: then it is deleted)."""
        p = self.path(h)
        if not p.exists():
            return None
        try:
            sc = open_sidecar(p)
        except CorruptSidecarError:
            p.unlink(missing_ok=True)
            return None
        enc = sc.encoding
        if enc.model_id != self.encoder.model_id or enc.chunker_version != self.chunker_version:
            p.unlink(missing_ok=True)
            return None
        return enc

    def encode(self, h: str, doc) -> UnitEncoding:
        """The encoding of unit ``h`` (whose Document is ``doc``): read, or computed and stored."""
        with self._lock(h):
            enc = self.get(h)
            if enc is not None:
                return enc
            spans = embedding_chunks(doc, self.target)
            enc = self.encoder.encode_spans(doc.text, spans, chunker_version=self.chunker_version)
            self.encoded += 1
            return self.put(h, enc)

    def encode_missing(self, units: Iterable[tuple[str, Any]]) -> int:
        """Encode, in one encoder pass, those of ``units`` ((hash, Document) pairs) that have
        no stored encoding yet, and store them: a build of many small units fills whole encoder
        batches (``TokenEncoder.encode_spans_many``) instead of one short batch per unit.
        Returns how many were encoded. Two threads encoding one unit at once both write the
        same file atomically (no lock is held across the pass)."""
        todo = [(h, doc) for h, doc in units if self.get(h) is None]
        if not todo:
            return 0
        encs = self.encoder.encode_spans_many(
            [(doc.text, embedding_chunks(doc, self.target)) for _, doc in todo],
            chunker_version=self.chunker_version)
        for (h, _), enc in zip(todo, encs):
            write_sidecar(self.path(h), enc, meta={"unit": h, "chunk_target": self.target})
        self.encoded += len(todo)
        return len(todo)

    def put(self, h: str, enc: UnitEncoding) -> UnitEncoding:
        """Store ``enc`` as the encoding of ``h`` (computed here, or by a ``SharedPass`` in
        another process: the same bytes either way) and return it as read back."""
        write_sidecar(self.path(h), enc, meta={"unit": h, "chunk_target": self.target})
        return open_sidecar(self.path(h)).encoding

    def drop(self, hashes: Iterable[str]) -> None:
        for h in hashes:
            self.path(h).unlink(missing_ok=True)

    def bytes_used(self) -> int:
        if not self.root.exists():
            return 0
        return sum(p.stat().st_size for p in self.root.glob("*/*.lvec"))



_ENCODERS: dict[str, Any] = {}
_ENCODERS_LOCK = threading.Lock()


@dataclass(frozen=True)
class SharedPass:
    """The shared encoder pass of one unit, run in another process (a Ray worker): the same
    chunks and the same ``encode_spans`` as :meth:`SharedEncodings.encode`. ``encoder`` is a
    picklable factory (e.g. ``functools.partial(get_encoder, path)``), called once per process."""

    encoder: Callable[[], Any]
    target: int
    chunker_version: str

    def run(self, unit, doc) -> UnitEncoding:
        from lar.core.building import SkipUnit

        if not doc.text or not doc.text.strip():
            raise SkipUnit("no text")
        key = repr(self.encoder)
        with _ENCODERS_LOCK:
            enc = _ENCODERS.get(key)
            if enc is None:
                enc = _ENCODERS[key] = self.encoder()
        return enc.encode_spans(doc.text, embedding_chunks(doc, self.target),
                                chunker_version=self.chunker_version)


class SharedPassLayer:
    """Mixin of the layers whose model pass is the shared encoding (``dense``, ``late``): they
    build on Ray workers (``lar.distributed.ray_build``) by storing the encodings the workers
    computed, then indexing as usual from the stored file. Needs ``shared``, ``problem()``,
    ``index_unit`` and ``shared_encoder_factory()``."""

    def shared_encoder_factory(self) -> Callable[[], Any]:  # pragma: no cover
        raise NotImplementedError

    def remote_pass(self):
        if self.problem() is not None:
            return None
        sh = self.shared
        return SharedPass(self.shared_encoder_factory(), sh.target, sh.chunker_version)

    def needs_pass(self, unit) -> bool:
        return not self.shared.path(unit.hash).exists()

    def index_payload(self, unit, doc, payload):
        self.shared.put(unit.hash, payload)
        return self.index_unit(unit, doc)

    def prepare_units(self, units) -> int:
        """Before a batch of ``units`` is built one by one: their encoder pass, all in one
        (``SharedEncodings.encode_missing``), so that each ``build_one`` reads its stored
        encoding. Units that will be skipped (blank, too large, unreadable) are left to
        ``build_one``, which says why. Returns how many units were encoded."""
        if self.remote_pass() is None:  # unusable model, or a layer whose pass is not shared
            return 0
        todo = []
        for u in units:
            if not self.needs_pass(u) or self.skip_reason(u):
                continue
            doc = self.ctx.reader.document(u.hash, u.path)
            if doc.skipped or not doc.text or not doc.text.strip():
                continue
            todo.append((u.hash, doc))
        return self.shared.encode_missing(todo) if todo else 0
