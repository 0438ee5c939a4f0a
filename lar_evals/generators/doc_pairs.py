"""Two more pair kinds of :mod:`lar_evals.generators.pairs`: documentation prose against code.

* ``readme2code``: a sentence of a README (``README*`` in any folder), of a Markdown/reST file
  under a ``docs``/``doc`` folder, or of any ``.rst`` file that names a function or class defined
  exactly once in a code file of the corpus (:func:`lar_evals.generators.sources.definitions`;
  a plain lower-case name such as ``pieces`` counts only written as code: `` `pieces` `` or
  ``pieces()``); the name (and every code-shaped word) is removed from the query; answer: the
  definition.
  Each name is paired with its first such sentence (path order, cut to its list item),
  sentences in fenced code blocks or tables skipped.
* ``cell2code``: a Jupyter notebook's markdown cell against the code cell right after it; the
  query is the markdown text (a heading ended by a colon) with code-shaped words and the names the code cell uses removed
  (Python ``tokenize``). The corpus holds the notebook's JSON as it is, and the harness judges
  whole documents: the answer is the notebook, its span the code cell's ``source`` value in
  the JSON (nbformat 4; in nbformat 3, whose cells sit in ``worksheets``, the code cell's
  ``input``); the markdown cell's ``source`` value is blanked (inside the brackets or quotes, so
  the notebook stays valid JSON). A heading-only cell right before that markdown cell (nbformat
  3's ``heading`` cells, or a v4 cell holding just a title) starts the query and is blanked too.

Queries go through :func:`lar_evals.generators.pairs.prose_query` and then the same leak check
as every pair kind; a query that lost more than a quarter of its prose's words (mostly code)
is dropped (``MIN_KEPT_SHARE``).
"""
from __future__ import annotations

import io
import json
import re
import tokenize

from lar.store.extract import kind_for

from lar_evals.generators.common import ALPHA, WORD, Doc, Target, sentence_bounds
from lar_evals.generators.sources import definitions

MIN_NAME_CHARS = 4
# a query keeps at least this share of its prose's words (else mostly code was removed)
MIN_KEPT_SHARE = 0.75
_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d+[.)]|#+|>)[ \t]+")
_DEC = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)[^\n]*\n.*?^[ \t]*(?:```|~~~)[ \t]*$", re.M | re.S)

__all__ = ["cell_targets", "defined_names", "notebook_cells", "readme_targets"]


def _is_doc_prose(doc_id: str) -> bool:
    kind = kind_for(doc_id)
    if kind not in ("markdown", "rst"):
        return False
    parts = doc_id.lower().split("/")
    return parts[-1].startswith("readme") or kind == "rst" or any(
        p in ("docs", "doc") for p in parts[:-1])


def _clip(text: str, s0: int, s1: int, pos: int) -> tuple[int, int]:
    """The sentence ``[s0, s1)`` around ``pos`` cut to its list item: a line starting with a
    list, heading or quote marker starts a new piece of prose."""
    line = text.find("\n", s0, s1)
    while line >= 0:
        nxt = line + 1
        m = _ITEM.match(text, nxt, s1)
        if m is not None:
            if nxt <= pos:
                s0 = m.end()
            else:
                return s0, line
        line = text.find("\n", nxt, s1)
    m = _ITEM.match(text, s0, s1)
    return (m.end() if m is not None and m.end() <= pos else s0), s1


def _natural(prose: str, query: str | None) -> str | None:
    """``query`` when it kept ``MIN_KEPT_SHARE`` of ``prose``'s words (at most 30), else None."""
    if query is None:
        return None
    return query if len(query.split()) >= MIN_KEPT_SHARE * min(len(prose.split()), 30) else None


def defined_names(docs: list[Doc]) -> dict[str, tuple[Doc, int, int]]:
    """``{name: (doc, start, end)}`` of functions and classes defined exactly once in the
    corpus's code files (names of at least ``MIN_NAME_CHARS`` characters)."""
    found: dict[str, list[tuple[Doc, int, int]]] = {}
    for doc in docs:
        if kind_for(doc.id) in ("markdown", "rst", "latex", "notebook", "html"):
            continue
        for d in definitions(doc):
            if d.kind in ("function", "method", "class") and len(d.name) >= MIN_NAME_CHARS:
                found.setdefault(d.name, []).append((doc, *d.span))
    return {name: where[0] for name, where in found.items() if len(where) == 1}


def readme_targets(docs: list[Doc], names: dict[str, tuple[Doc, int, int]], prose_query,
                   max_chars: int, min_words: int) -> list[Target]:
    """README/docs sentences naming a defined function or class, against its definition."""
    out: list[Target] = []
    taken: set[str] = set()
    for doc in docs:
        if not _is_doc_prose(doc.id):
            continue
        text = doc.text
        fenced = [m.span() for m in _FENCE.finditer(text)]
        seen_sentences: set[tuple[int, int]] = set()
        for m in WORD.finditer(text):
            name = m.group()
            if name not in names or name in taken or any(a <= m.start() < b for a, b in fenced):
                continue
            if name.islower() and name.isalpha() and not (  # a plain word: only as code
                    text[m.start() - 1:m.start()] == "`" or text[m.end():m.end() + 1] in ("(", "`")):
                continue
            s0, s1 = _clip(text, *sentence_bounds(text, m.start()), m.start())
            sentence = text[s0:s1]
            if (s0, s1) in seen_sentences or "|" in sentence or sentence.lstrip().startswith(
                    (">>>", "..", "$")):
                continue
            seen_sentences.add((s0, s1))
            query = _natural(sentence, prose_query(sentence, drop={name.lower()}))
            code_doc, a, b = names[name]
            if query is None or b - a > max_chars or len(ALPHA.findall(code_doc.text[a:b])) < min_words:
                continue
            taken.add(name)
            t = Target(code_doc, a, b, "readme2code", source_text=query, name=name,
                       extra={"pair": "readme" if "readme" in doc.id.lower() else "docs",
                              "sentence_doc": doc.id})
            t.aux = {"redact_in": (doc, ((s0, s1),))}
            out.append(t)
    return out


def _ws(text: str, i: int) -> int:
    return _WS.match(text, i).end()


def _members(text: str, i: int):
    """``(key, value_start, value_end)`` of the JSON object whose ``{`` is at ``i``."""
    i = _ws(text, i + 1)
    if text[i] == "}":
        return
    while True:
        key, i = _DEC.raw_decode(text, i)
        i = _ws(text, i)
        if text[i] != ":":
            raise ValueError("':' expected")
        v0 = _ws(text, i + 1)
        _, v1 = _DEC.raw_decode(text, v0)
        yield key, v0, v1
        i = _ws(text, v1)
        if text[i] == "}":
            return
        i = _ws(text, i + 1)


def _elements(text: str, i: int):
    """``(start, end)`` of the elements of the JSON array whose ``[`` is at ``i``."""
    i = _ws(text, i + 1)
    if text[i] == "]":
        return
    while True:
        _, e = _DEC.raw_decode(text, i)
        yield i, e
        i = _ws(text, e)
        if text[i] == "]":
            return
        i = _ws(text, i + 1)


def _cells(text: str, v0: int):
    """``(start)`` of each cell object of the JSON array of cells at ``v0``."""
    for c0, _ in _elements(text, v0):
        if text[c0] == "{":
            yield c0


def _notebook_cell_starts(text: str, start: int):
    """The cell objects of a notebook: nbformat 4's top-level ``cells``, or nbformat 3's
    ``worksheets`` (each worksheet's ``cells``, in order)."""
    for key, v0, _ in _members(text, start):
        if key == "cells" and text[v0] == "[":
            yield from _cells(text, v0)
        elif key == "worksheets" and text[v0] == "[":
            for w0, _ in _elements(text, v0):
                if text[w0] != "{":
                    continue
                for wkey, c0, _ in _members(text, w0):
                    if wkey == "cells" and text[c0] == "[":
                        yield from _cells(text, c0)


def notebook_cells(text: str) -> list[tuple[str, str, tuple[int, int]]]:
    """``(cell_type, source, (start, end))`` of a notebook's cells, the span being the cell's
    text value in ``text`` (character offsets): ``source``, or for an nbformat-3 code cell
    ``input``. nbformat 3's ``heading`` cells count as markdown (their text a heading of their
    ``level``). ``[]`` for anything else."""
    start = _ws(text, 1 if text.startswith("\ufeff") else 0)
    out = []
    try:
        if text[start] != "{":
            return []
        for c0 in _notebook_cell_starts(text, start):
            fields = {k: (a, b) for k, a, b in _members(text, c0)}
            field = "source" if "source" in fields else "input" if "input" in fields else None
            if field is None:
                continue
            a, b = fields[field]
            src = json.loads(text[a:b])
            src = "".join(src) if isinstance(src, list) else src
            ctype = json.loads(text[slice(*fields["cell_type"])]) if "cell_type" in fields else "code"
            if ctype == "heading" and isinstance(src, str):
                level = json.loads(text[slice(*fields["level"])]) if "level" in fields else 1
                ctype, src = "markdown", "#" * (level if isinstance(level, int) else 1) + " " + src
            if isinstance(src, str) and isinstance(ctype, str):
                out.append((ctype, src, (a, b)))
    except (ValueError, IndexError, TypeError):
        return []
    return out


def _code_names(src: str) -> set[str]:
    """Lower-cased names a code cell uses (Python tokens; words outside comments otherwise)."""
    try:
        return {t.string.lower() for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type == tokenize.NAME}
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {w.lower() for line in src.splitlines() if not line.lstrip().startswith("#")
                for w in WORD.findall(line)}


def _cell_prose(src: str) -> str:
    """A markdown cell's text on one line, each heading ended with a colon."""
    lines = []
    for line in src.splitlines():
        line = line.strip()
        if line.startswith("#"):
            line = line.lstrip("#").strip()
            line = line + ":" if line and line[-1] not in ".:!?" else line
        if line:
            lines.append(line)
    return " ".join(lines)


def _heading_only(src: str) -> bool:
    """True for a markdown cell that is only headings (an nbformat-3 ``heading`` cell, or a
    v4 cell holding a title line)."""
    lines = [x.strip() for x in src.splitlines() if x.strip()]
    return bool(lines) and all(x.startswith("#") for x in lines)


def cell_targets(doc: Doc, prose_query, min_words: int) -> list[Target]:
    """A notebook's markdown cells against the code cell right after each; a heading-only
    cell right before the markdown cell (nbformat 3 keeps headings in cells of their own) is
    the start of the query and blanked with it."""
    if kind_for(doc.id) != "notebook":
        return []
    cells = notebook_cells(doc.text)
    out = []
    for i, ((mtype, msrc, mspan), (ctype, csrc, cspan)) in enumerate(zip(cells, cells[1:])):
        if mtype != "markdown" or ctype != "code" or len(ALPHA.findall(csrc)) < min_words:
            continue
        parts = [(msrc, mspan)]
        if i and cells[i - 1][0] == "markdown" and _heading_only(cells[i - 1][1]) and not _heading_only(msrc):
            parts.insert(0, (cells[i - 1][1], cells[i - 1][2]))
        prose = " ".join(_cell_prose(src) for src, _ in parts)
        query = _natural(prose, prose_query(prose, drop=_code_names(csrc)))
        if query is None:
            continue
        # keep the brackets or quotes: still valid JSON
        inner = tuple((a + 1, b - 1) for _, (a, b) in parts)
        out.append(Target(doc, cspan[0], cspan[1], "cell2code", source_text=query,
                          name=f"cell {i + 1}", extra={"pair": "notebook", "markdown_cell": i}, redact=inner))
    return out
