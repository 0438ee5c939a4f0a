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
from pathlib import Path
from typing import Callable

from lar.store.cas import atomic_write
from lar.store.extract import latex, markup, notebook, pdf
from lar.store.extract.document import (BINARY_EXTRACTABLE, DERIVED_KINDS, KINDS, Block, Document,
                                        SourceRef, kind_for, plain)


# kind -> (version, extractor(path, data, resolve) -> Document)
EXTRACTORS: dict[str, tuple[str, Callable[..., Document]]] = {
    "latex": (latex.VERSION, latex.extract_latex),
    "html": (markup.VERSION, markup.extract_html),
    "markdown": (markup.VERSION, markup.extract_markdown),
    "rst": (markup.VERSION, markup.extract_rst),
    "notebook": (notebook.VERSION, notebook.extract_notebook),
    "pdf": (pdf.VERSION, pdf.extract_pdf),
}


def versions_fingerprint() -> str:
    """All extractor versions in one short string: part of every building layer's version, so
    a changed extractor rebuilds the units whose text it produces."""
    return ",".join(f"{k}{v[0]}" for k, v in sorted(EXTRACTORS.items()))


def extractor_version(kind: str) -> str:
    return EXTRACTORS.get(kind, ("0", None))[0]


def extract(path: str, data: bytes, resolve: Callable[[str], bytes | None] | None = None) -> Document:
    """Extract ``data`` (the bytes of ``path``). ``resolve(relpath)`` returns the bytes of another
    unit (LaTeX ``\\input``), or None. Never raises on bad input: the Document says ``skipped``."""
    kind = kind_for(path)
    entry = EXTRACTORS.get(kind)
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


__all__ = ["BINARY_EXTRACTABLE", "DERIVED_KINDS", "EXTRACTORS", "KINDS", "Block", "Document",
           "ExtractionCache", "SourceRef", "extract", "extractor_version", "kind_for", "plain",
           "versions_fingerprint"]
