"""Reading units back: ``fetch`` of a hit id from any earlier call, and ``read`` of any unit.

A hit id names ``(hash prefix, start, end)``. ``fetch`` stat-checks the unit's paths first; when
the file changed since the hit, the span's old text (kept by the snapshot taken when the hit was
returned) is found again in the current file and the reply says so, with the new id.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from lar.core.errors import ConfigError, HitNotFoundError, ScopeError, StaleSpanError
from lar.core.result import Fetched
from lar.core.scope import normalize_relpath
from lar.core.types import Span, parse_hit_id
from lar.store import ContentStore, FileIndex, UnitReader
from lar.store.reader import capped_context, decode_span, expand_to_lines, line_range

HEX_ID = re.compile(r"^[0-9a-f]{8,64}$")


class UnitAccess:
    """Fetch and read over one engine's reader, index and store.

    ``detect`` stat-checks paths (the change tracker's), ``rescan`` runs a full stat pass; ``context_for`` gives a span's
    match-time metadata (the enricher's); ``on_fetch`` is told each fetched hash (usage counts
    and build priority)."""

    def __init__(self, root, reader: UnitReader, index: FileIndex, store: ContentStore, *,
                 detect: Callable[[Sequence[str]], Any], rescan: Callable[[], Any],
                 context_for: Callable[[str, Span, str | None], dict[str, Any]],
                 on_fetch: Callable[[str], None]):
        self.root = root
        self.reader = reader
        self.index = index
        self.store = store
        self._detect = detect
        self._rescan = rescan
        self._context_for = context_for
        self._on_fetch = on_fetch

    def resolve_hash(self, prefix: str) -> str:
        """The one content hash starting with ``prefix`` (file index first, then the store)."""
        try:
            return self.index.resolve_prefix(prefix)
        except HitNotFoundError:
            found = self.store.find_prefix(prefix)
            if len(found) == 1:
                return found[0]
            raise

    def is_hash(self, path_or_hash: Any) -> bool:
        """Whether ``path_or_hash`` names a content hash (hex, and no such file in the root)."""
        return (isinstance(path_or_hash, str) and HEX_ID.match(path_or_hash) is not None
                and not (self.root / path_or_hash).exists())

    def fetch(self, hit_id: str, context: int = 0) -> Fetched:
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise ConfigError(f"context must be a number of lines >= 0, got {context!r}")
        prefix, start, end = parse_hit_id(hit_id)
        h = self.resolve_hash(prefix)
        known_paths = self.index.paths_for_hash(h)
        if known_paths:
            self._detect(known_paths)  # stat check: did the file change since the hit?
        current_paths = self.index.paths_for_hash(h)
        if not current_paths:  # renamed or copied? a stat pass finds the same content elsewhere
            self._rescan()
            current_paths = self.index.paths_for_hash(h)
        try:
            old = self.reader.unit_text(h)
        except StaleSpanError:
            old = None
        if old is not None and end > len(old):
            raise HitNotFoundError(f"hit {hit_id!r} ends at byte {end} but the unit has {len(old)} bytes")
        if current_paths and old is not None:
            return self.fetched(hit_id, current_paths[0], h, old, start, end, context)
        if old is None:
            raise StaleSpanError(
                f"hit {hit_id!r}: its file changed and no copy of the old text was kept; search again")
        return self.reanchor(hit_id, h, old, start, end, context)

    def reanchor(self, hit_id: str, h: str, old: bytes, start: int, end: int, context: int) -> Fetched:
        """The unit changed since the hit: find the span's text again in the current file."""
        needle = old[start:end]
        for path in self.index.past_paths(h):
            try:
                new_hash, _ = self.reader.read_path(path)
                self._detect([path])
                data = self.reader.unit_text(new_hash, path)
            except (HitNotFoundError, ScopeError, StaleSpanError):
                continue
            positions = [m.start() for m in re.finditer(re.escape(needle), data)] if needle else []
            if positions:
                pos = min(positions, key=lambda p: abs(p - start))
                self._detect([path])
                new_id = Span(new_hash, pos, pos + len(needle)).id
                note = (f"{path} changed since this hit; its text was found again at bytes "
                        f"{pos}-{pos + len(needle)} (id {new_id})")
                return self.fetched(hit_id, path, new_hash, data, pos, pos + len(needle), context,
                                    changed=True, current_id=new_id, note=note)
        raise StaleSpanError(
            f"hit {hit_id!r}: the file it came from changed and the hit's text no longer exists "
            f"in it (paths it had: {', '.join(self.index.past_paths(h)) or 'none'}); search again")

    def fetched(self, hit_id, path, h, data, start, end, context, **kw) -> Fetched:
        context, capped = capped_context(context)
        if capped:
            kw["note"] = "; ".join(n for n in (kw.get("note", ""), capped) if n)
        cs, ce = expand_to_lines(data, start, end, context)
        self._on_fetch(h)
        src = self._context_for(h, Span(h, start, end), path)
        return Fetched(id=hit_id, path=path, hash=h, start=start, end=end, source=src,
                       lines=line_range(data, start, end), text=decode_span(data, start, end),
                       context_lines=line_range(data, cs, ce), context_text=decode_span(data, cs, ce), **kw)

    def read_unit(self, path_or_hash: str, span: tuple[int, int] | None = None, *,
                  raw: bool = False) -> tuple[str, int, int, bytes]:
        """(hash, start, end, bytes) of a unit's text (``raw``: the file's own bytes) or a span."""
        if self.is_hash(path_or_hash):
            h = self.resolve_hash(path_or_hash)
            data = self.reader.read(h) if raw else self.reader.unit_text(h)
        else:
            h, data = self.reader.read_path(path_or_hash)
            if not raw:
                data = self.reader.unit_text(h, normalize_relpath(self.root, path_or_hash))
        if span is not None:
            s, e = span
            if not (0 <= s <= e <= len(data)):
                raise ConfigError(f"span {span} is outside the unit (0..{len(data)} bytes)")
            return h, s, e, data[s:e]
        return h, 0, len(data), data

    def document(self, path_or_hash: str):
        """The unit's ``lar.store.extract.Document``: its text plus structure and source map."""
        if self.is_hash(path_or_hash):
            return self.reader.document(self.resolve_hash(path_or_hash))
        h, _ = self.reader.read_path(path_or_hash)
        return self.reader.document(h, normalize_relpath(self.root, path_or_hash))
