"""Jupyter notebooks (``.ipynb``): the cells' sources as text, outputs left out.

The text is every cell as a header line ``# %% [<cell_type>]`` followed by the cell's source,
cells joined by a blank line (the "percent" format editors understand). Each cell is a
``Block(kind="cell", label=cell_type)``; code cells under ``ATOMIC_CODE_BYTES`` are atomic so a
chunker keeps them whole. The source map has one entry per cell,
``{"cell": i, "cell_type": ..., "line": L}`` with ``i`` 0-based and ``L`` the 1-based line of
the cell's header in the text; each entry also covers the blank line after its cell. nbformat 4
(``cells``) and 3 (``worksheets[0].cells`` with ``input``) are read; anything else is skipped.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Optional

from lar.store.extract.document import Block, Document, SourceRef

VERSION = "1"
ATOMIC_CODE_BYTES = 4000
Resolver = Optional[Callable[[str], Optional[bytes]]]


def _skipped(reason: str) -> Document:
    return Document(kind="notebook", text=b"", derived=True, skipped=reason)


def _source(cell: dict[str, Any]) -> str | None:
    """The cell's source as one string (nbformat stores a string or a list of lines)."""
    src = cell.get("source", cell.get("input", ""))
    if isinstance(src, str):
        return src
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    return None


def _cells(nb: Any) -> list[Any] | None:
    if not isinstance(nb, dict):
        return None
    if isinstance(nb.get("cells"), list):
        return nb["cells"]
    sheets = nb.get("worksheets")
    if isinstance(sheets, list):
        cells: list[Any] = []
        for sheet in sheets:
            if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list):
                cells += sheet["cells"]
        return cells
    return None


def extract_notebook(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Text, cell blocks and cell source map of a notebook; skipped (never raises) when the
    bytes are not JSON or not a notebook."""
    try:
        nb = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        return _skipped(f"notebook is not UTF-8: {exc}")
    except ValueError as exc:
        return _skipped(f"notebook is not valid JSON: {exc}")
    cells = _cells(nb)
    if cells is None:
        return _skipped("JSON is not a Jupyter notebook (no 'cells' list)")
    parts: list[bytes] = []
    spans: list[tuple[int, int, int, str, int, bool]] = []  # start, end, index, type, line, atomic
    pos, line, bad = 0, 1, 0
    for i, cell in enumerate(cells):
        src = _source(cell) if isinstance(cell, dict) else None
        if src is None:
            bad += 1
            continue
        ctype = cell.get("cell_type")
        ctype = ctype if isinstance(ctype, str) and ctype else "code"
        body = src.rstrip("\n").encode("utf-8", errors="surrogateescape")
        chunk = f"# %% [{ctype}]\n".encode() + body
        if parts:
            parts.append(b"\n\n")
            pos += 2
            line += 2
        atomic = ctype == "code" and len(body) < ATOMIC_CODE_BYTES
        spans.append((pos, pos + len(chunk), i, ctype, line, atomic))
        parts.append(chunk)
        pos += len(chunk)
        line += chunk.count(b"\n")
    text = b"".join(parts)
    blocks = tuple(Block(s, e, "cell", t, atomic=a) for s, e, _, t, _, a in spans)
    source_map = tuple(
        SourceRef(s, spans[k + 1][0] if k + 1 < len(spans) else e,
                  {"cell": i, "cell_type": t, "line": ln})
        for k, (s, e, i, t, ln, _) in enumerate(spans))
    notes: list[str] = []
    if bad:
        notes.append(f"{bad} cell(s) without a readable source left out")
    if not cells:
        notes.append("notebook has no cells")
    return Document(kind="notebook", text=text, derived=True, blocks=blocks,
                    source_map=source_map, notes=tuple(notes))
