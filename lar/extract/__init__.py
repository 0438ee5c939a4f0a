"""Text across formats: turn a unit's bytes into the text that spans refer to, plus structure.

``extract(path, data)`` returns a ``Document``. For plain text (code, prose, LaTeX, Markdown,
reStructuredText) the text *is* the raw bytes, so spans are byte offsets into the file and the
extractor only adds structure (sections, atomic blocks such as formula/theorem environments or
notebook cells). For formats whose bytes are not the reading text (PDF, Jupyter notebooks, HTML)
the text is extracted (``derived=True``) and ``source_map`` maps byte ranges of it back to the
source (page, cell, line). Extraction results are cached by hash, kind and extractor version
(``ExtractionCache``); a broken file yields a Document with ``skipped`` set, never an exception.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from lar.store.cas import atomic_write

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


def kind_for(path: str) -> str:
    suffix = Path(path).suffix.lower()
    for kind, exts in KINDS.items():
        if suffix in exts:
            return kind
    return "text"


def plain(data: bytes, kind: str = "text") -> Document:
    return Document(kind=kind, text=data)


# kind -> (version, extractor(path, data, resolve) -> Document); registered by the submodules
_EXTRACTORS: dict[str, tuple[str, Callable[..., Document]]] = {}


def register_extractor(kind: str, version: str, fn: Callable[..., Document]) -> None:
    _EXTRACTORS[kind] = (version, fn)


_BUILTINS_LOADED = False


def _load_builtin() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    from lar.extract import latex, markup, notebook, pdf  # noqa: F401  (each registers itself)
    _BUILTINS_LOADED = True


def versions_fingerprint() -> str:
    """All extractor versions in one short string: part of every building layer's version, so
    a changed extractor rebuilds the units whose text it produces."""
    _load_builtin()
    return ",".join(f"{k}{v[0]}" for k, v in sorted(_EXTRACTORS.items()))


def extractor_version(kind: str) -> str:
    _load_builtin()
    return _EXTRACTORS.get(kind, ("0", None))[0]


def extract(path: str, data: bytes, resolve: Callable[[str], bytes | None] | None = None) -> Document:
    """Extract ``data`` (the bytes of ``path``). ``resolve(relpath)`` returns the bytes of another
    unit (LaTeX ``\\input``), or None. Never raises on bad input: the Document says ``skipped``."""
    _load_builtin()
    kind = kind_for(path)
    entry = _EXTRACTORS.get(kind)
    if entry is None:
        return plain(data)
    try:
        return entry[1](path, data, resolve)
    except Exception as exc:  # a broken file is skipped with its reason, never a failed build
        if kind in DERIVED_KINDS:
            return Document(kind=kind, text=b"", derived=True,
                            skipped=f"{kind} extraction failed: {type(exc).__name__}: {exc}")
        return Document(kind=kind, text=data, notes=(f"structure not extracted: {exc}",))


def _dep_hash(resolve, rel: str) -> str | None:
    from lar.store.cas import content_hash

    out = resolve(rel) if resolve else None
    return content_hash(out) if out is not None else None


class ExtractionCache:
    """Documents cached under ``<state>/extract/<hash[:2]>/<hash>.<kind>.<version>.json``."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)

    def _path(self, h: str, kind: str) -> Path:
        return self.dir / h[:2] / f"{h}.{kind}.{extractor_version(kind)}.json"

    def get(self, h: str, path: str, data: bytes, resolve=None) -> Document:
        """The cached Document, re-extracted when a file it read through ``resolve`` (a LaTeX
        ``\\input``) changed, appeared or vanished since."""
        from lar.store.cas import content_hash

        kind = kind_for(path)
        if kind == "text":
            return plain(data)
        p = self._path(h, kind)
        try:
            raw = json.loads(p.read_bytes())
            deps = raw.pop("deps", [])
            if all(_dep_hash(resolve, dp) == dh for dp, dh in deps):
                return Document.from_json(json.dumps(raw).encode("utf-8", errors="surrogateescape"))
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError):  # corrupt cache entry: drop and redo
            p.unlink(missing_ok=True)
        seen: dict[str, str | None] = {}

        def recording(rel: str) -> bytes | None:
            out = resolve(rel) if resolve else None
            seen[rel] = content_hash(out) if out is not None else None
            return out

        doc = extract(path, data, recording)
        payload = json.loads(doc.to_json().decode("utf-8", errors="surrogateescape"))
        payload["deps"] = sorted(seen.items())
        atomic_write(p, json.dumps(payload, ensure_ascii=False).encode("utf-8", errors="surrogateescape"),
                     durable=False)
        return doc


__all__ = ["Block", "Document", "ExtractionCache", "SourceRef", "extract", "kind_for", "plain",
           "register_extractor", "BINARY_EXTRACTABLE", "DERIVED_KINDS", "KINDS"]
