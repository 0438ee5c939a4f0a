"""Reading units by content hash: from the current files when one still has that hash, else
from the snapshot kept in the content-addressed store. Nothing outside the root is read."""
from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from pathlib import Path

from lar.core.errors import HitNotFoundError, StaleSpanError, UnreadablePathError
from lar.core.scope import normalize_relpath
from lar.store.cas import ContentStore, content_hash
from lar.store.extract.document import DERIVED_KINDS, kind_for
from lar.store.fileindex import FileIndex

_CACHE_BYTES = 64 * 1024 * 1024


class UnitReader:
    def __init__(self, root: Path, index: FileIndex, store: ContentStore,
                 extract_dir: Path | None = None):
        from lar.store.extract import ExtractionCache

        self.root = Path(root).resolve()
        self.index = index
        self.store = store
        self.extractions = ExtractionCache(extract_dir or (store.dir.parent / "extract"))
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._lock = threading.Lock()

    def _remember(self, h: str, data: bytes) -> None:
        with self._lock:
            if h in self._cache:
                self._cache.move_to_end(h)
                return
            self._cache[h] = data
            self._cache_bytes += len(data)
            while self._cache_bytes > _CACHE_BYTES and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._cache_bytes -= len(old)

    def read_path(self, path: str) -> tuple[str, bytes]:
        """Current bytes of ``path`` (relative to the root) and their hash."""
        rel = normalize_relpath(self.root, path)
        full = self.root / rel  # normalize_relpath refused links leaving the root
        try:
            data = full.read_bytes()
        except FileNotFoundError:
            raise HitNotFoundError(f"{rel!r} does not exist under {str(self.root)!r}") from None
        except IsADirectoryError:
            raise HitNotFoundError(f"{rel!r} is a directory, not a file") from None
        except OSError as exc:  # a symlink loop, no permission, a name too long
            what = "is a symlink loop" if exc.errno == errno.ELOOP else \
                f"cannot be read ({exc.strerror or exc})"
            raise UnreadablePathError(f"{rel!r} {what}; lar cannot read it") from None
        h = content_hash(data)
        self._remember(h, data)
        return h, data

    def read(self, h: str) -> bytes:
        """The bytes whose hash is ``h``: cached, a current file with that hash, or the snapshot."""
        with self._lock:
            data = self._cache.get(h)
        if data is not None:
            return data
        paths = self.index.paths_for_hash(h)
        known = self.index.get_many(paths) if paths else {}
        for rel in paths:
            full = self.root / rel
            try:
                st = os.stat(full, follow_symlinks=False)
                data = full.read_bytes()
            except OSError:
                continue
            rec = known.get(rel)
            # stat unchanged since the file was hashed (size, mtime, ctime, inode): trust the
            # index as git does; otherwise verify the hash of the bytes actually read
            if (rec is not None and rec.hash == h and rec.same_stat(st) and len(data) == st.st_size) \
                    or content_hash(data) == h:
                self._remember(h, data)
                return data
        data = self.store.get(h)
        if data is not None:
            self._remember(h, data)
            return data
        if self.index.known_hash(h):
            raise StaleSpanError(
                f"the unit {h[:12]} changed on disk and no snapshot of its old text was kept; "
                "search again to get ids for the current text"
            )
        raise HitNotFoundError(f"no unit with hash {h[:12]} is known; search again for fresh ids")

    def snapshot(self, h: str) -> None:
        """Keep the unit's bytes in the content store so its spans stay readable after edits."""
        if self.store.has(h):
            return
        try:
            data = self.read(h)
        except (HitNotFoundError, StaleSpanError):
            return
        self.store.put(data, h)

    def text(self, h: str) -> str:
        return self.unit_text(h).decode("utf-8", errors="replace")

    def path_of(self, h: str) -> str | None:
        paths = self.index.paths_for_hash(h) or self.index.past_paths(h)
        return paths[0] if paths else None

    def document(self, h: str, path: str | None = None):
        """The unit as a ``lar.store.extract.Document``: the text spans refer to, plus structure.
        Plain text units are their own text; PDFs, notebooks and HTML are extracted (cached)."""
        from lar.store.extract import kind_for, plain

        path = path or self.path_of(h) or ""
        data = self.read(h)
        if kind_for(path) == "text":
            return plain(data)

        def resolve(rel: str) -> bytes | None:
            try:
                return self.read_path(rel)[1]
            except Exception:
                return None

        return self.extractions.get(h, path, data, resolve)

    def unit_text(self, h: str, path: str | None = None) -> bytes:
        """The bytes that spans of unit ``h`` index into (extracted text for derived formats)."""
        path = path or self.path_of(h) or ""
        if kind_for(path) not in DERIVED_KINDS:
            return self.read(h)
        return self.document(h, path).text


def line_range(data: bytes, start: int, end: int) -> tuple[int, int]:
    """1-based first and last line numbers covered by byte span ``[start, end)``."""
    first = data.count(b"\n", 0, start) + 1
    last_byte = max(start, end - 1)
    last = data.count(b"\n", 0, last_byte) + 1 if end > start else first
    return first, last


def decode_span(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", errors="replace")


def expand_to_lines(data: bytes, start: int, end: int, context: int = 0) -> tuple[int, int]:
    """Grow ``[start, end)`` to whole lines plus ``context`` lines on each side."""
    s = data.rfind(b"\n", 0, start) + 1
    e = data.find(b"\n", max(start, end - 1) if end > start else start)
    e = len(data) if e < 0 else e + 1
    for _ in range(context):
        if s <= 0 and e >= len(data):
            break  # the whole unit: more context adds nothing
        if s > 0:
            s = data.rfind(b"\n", 0, s - 1) + 1
        if e < len(data):
            nxt = data.find(b"\n", e)
            e = len(data) if nxt < 0 else nxt + 1
    return s, e


MAX_CONTEXT_LINES = 1000  # lines of context a fetch gives on each side at most (read for more)


def capped_context(context: int) -> tuple[int, str]:
    """``context`` limited to ``MAX_CONTEXT_LINES``, and a note saying so when it was cut."""
    if context <= MAX_CONTEXT_LINES:
        return context, ""
    return MAX_CONTEXT_LINES, (f"context capped at {MAX_CONTEXT_LINES} lines on each side "
                               f"(asked for {context})")
