"""PDF text with pypdf, page by page (``derived=True``).

The text is the pages' text joined by ``"\\n\\f\\n"`` (a form feed on a line of its own between
pages; form feeds inside a page's text become newlines so the separator stays unambiguous, and
ligature characters such as U+FB01 become their letters so that words are found).
Each page ``n`` (1-based) gives a ``Block(kind="page", label=str(n))`` over its own text and a
``SourceRef`` with ``{"page": n}`` that also covers the separator after it, so every offset of
the text maps to a page. A PDF that is encrypted (and does not open with the empty password),
truncated, unreadable or without any extractable text yields a Document with ``skipped`` set
and no text; this function does not raise on bad input. pypdf is imported lazily (extra
``formats``).
"""
from __future__ import annotations

import io
from typing import Any, Callable, Optional

from lar.core.errors import require
from lar.store.extract.document import Block, Document, SourceRef

VERSION = "1"
PAGE_SEPARATOR = b"\n\f\n"
# typographic ligatures (U+FB00..FB06) as letters, so that "efﬁcient" is found as "efficient"
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi",
                            "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st", "\f": "\n",
                            "\x00": None})
Resolver = Optional[Callable[[str], Optional[bytes]]]


def _skipped(reason: str, notes: tuple[str, ...] = ()) -> Document:
    return Document(kind="pdf", text=b"", derived=True, skipped=reason, notes=notes)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _open(pypdf: Any, data: bytes) -> tuple[Any, str | None]:
    """A reader with the pages accessible, or ``(None, reason)``."""
    if b"%PDF-" not in data[:1024]:
        return None, "not a PDF (no %PDF- header in the first 1024 bytes)"
    if b"%%EOF" not in data[-2048:]:
        return None, "truncated or damaged PDF (no %%EOF marker at the end)"
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
    except Exception as exc:
        return None, f"broken PDF: {_why(exc)}"
    try:
        encrypted = reader.is_encrypted
    except Exception as exc:
        return None, f"broken PDF: {_why(exc)}"
    if encrypted:
        try:
            result = reader.decrypt("")
        except Exception as exc:  # e.g. AES without a crypto library
            return None, f"encrypted PDF that could not be decrypted: {_why(exc)}"
        if not result:  # PasswordType.NOT_DECRYPTED == 0
            return None, "encrypted PDF: it needs a password (the empty one does not open it)"
    try:
        len(reader.pages)
    except Exception as exc:
        return None, f"broken PDF (page tree unreadable): {_why(exc)}"
    return reader, None


def _page_text(page: Any) -> str:
    text = page.extract_text() or ""
    return text.translate(_LIGATURES).rstrip()


def extract_pdf(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Page texts, page blocks and a page source map of a PDF; see the module docstring."""
    pypdf = require("pypdf", "formats")
    reader, reason = _open(pypdf, data)
    if reader is None:
        return _skipped(reason or "unreadable PDF")
    count = len(reader.pages)
    if count == 0:
        return _skipped("PDF has no pages")
    texts: list[bytes] = []
    failed: list[str] = []
    for i in range(count):
        try:
            texts.append(_page_text(reader.pages[i]).encode("utf-8", errors="replace"))
        except Exception as exc:  # one bad page does not lose the others
            texts.append(b"")
            failed.append(f"page {i + 1}: {_why(exc)}")
    notes = tuple(f"text of {p} could not be extracted" for p in failed[:10])
    if len(failed) > 10:
        notes += (f"... and {len(failed) - 10} more pages failed",)
    if not any(t.strip() for t in texts):
        return _skipped(f"no extractable text in {count} page(s) (scanned or image-only PDF?)",
                        notes)
    blocks: list[Block] = []
    starts: list[int] = []
    pos = 0
    for n, t in enumerate(texts, start=1):
        if n > 1:
            pos += len(PAGE_SEPARATOR)
        starts.append(pos)
        blocks.append(Block(pos, pos + len(t), "page", str(n)))
        pos += len(t)
    text = PAGE_SEPARATOR.join(texts)
    source_map = tuple(SourceRef(s, starts[k + 1] if k + 1 < len(starts) else len(text),
                                 {"page": k + 1}) for k, s in enumerate(starts))
    return Document(kind="pdf", text=text, derived=True, blocks=tuple(blocks),
                    source_map=source_map, notes=notes)
