"""The document an extractor makes of a unit's bytes: its reading text, structure and source map."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

# kind -> extensions (lower case, with dot)
KINDS: dict[str, tuple[str, ...]] = {
    "pdf": (".pdf",),
    "notebook": (".ipynb",),
    "html": (".html", ".htm", ".xhtml"),
    "latex": (".tex", ".sty", ".cls", ".ltx"),
    "markdown": (".md", ".markdown", ".mdx"),
    "rst": (".rst", ".rest"),
}
# binary formats that are still units (the scanner keeps them; their text is extracted)
BINARY_EXTRACTABLE = frozenset({".pdf"})
DERIVED_KINDS = frozenset({"pdf", "notebook", "html"})


@dataclass(frozen=True, slots=True)
class Block:
    """A structural range of the document text. ``atomic`` blocks (formula, theorem, proof,
    algorithm environments; code cells) must never be split by a chunker."""

    start: int
    end: int
    kind: str  # "section", "environment", "formula", "cell", "page", "heading", ...
    label: str = ""
    level: int = 0
    atomic: bool = False


@dataclass(frozen=True, slots=True)
class SourceRef:
    """Bytes ``[start, end)`` of the document text come from ``locator`` in the source, e.g.
    ``{"page": 3}``, ``{"cell": 4, "cell_type": "code"}``, ``{"file": "intro.tex", "line": 12}``."""

    start: int
    end: int
    locator: dict[str, Any]


@dataclass(frozen=True)
class Document:
    kind: str
    text: bytes
    derived: bool = False
    blocks: tuple[Block, ...] = ()
    source_map: tuple[SourceRef, ...] = ()
    skipped: str | None = None
    notes: tuple[str, ...] = ()

    def locate(self, start: int, end: int | None = None) -> dict[str, Any]:
        """Where ``[start, end)`` of the text came from in the source ({} if not mapped)."""
        for ref in self.source_map:
            if ref.start <= start < ref.end or (start == ref.end == len(self.text)):
                return dict(ref.locator)
        return {}

    def to_json(self) -> bytes:
        d = asdict(self)
        d["text"] = self.text.decode("utf-8", errors="surrogateescape")
        return json.dumps(d, ensure_ascii=False).encode("utf-8", errors="surrogateescape")

    @classmethod
    def from_json(cls, raw: bytes) -> "Document":
        d = json.loads(raw.decode("utf-8", errors="surrogateescape"))
        return cls(
            kind=d["kind"], text=d["text"].encode("utf-8", errors="surrogateescape"),
            derived=d["derived"], blocks=tuple(Block(**b) for b in d["blocks"]),
            source_map=tuple(SourceRef(**r) for r in d["source_map"]), skipped=d["skipped"],
            notes=tuple(d.get("notes", ())))


@lru_cache(maxsize=1 << 16)  # called per hit on the search path; a path's kind never changes
def kind_for(path: str) -> str:
    suffix = Path(path).suffix.lower()
    for kind, exts in KINDS.items():
        if suffix in exts:
            return kind
    return "text"


def plain(data: bytes, kind: str = "text") -> Document:
    return Document(kind=kind, text=data)


__all__ = ["BINARY_EXTRACTABLE", "DERIVED_KINDS", "KINDS", "Block", "Document", "SourceRef", "kind_for", "plain"]
