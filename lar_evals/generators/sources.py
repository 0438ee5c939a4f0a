"""Where queries come from: definitions, documented functions, sections and theorems.

* ``python_defs``: functions, classes and module/class-level assignments of a Python file,
  read with ``ast`` (the header line, the whole definition, its docstring or the comment block
  right above it, and the identifiers its code uses).
* ``code_defs``: the same for the other languages lar's symbols layer knows, read with
  tree-sitter (``lar.layers.kits.code.treesitter``; skipped without ``lar[code]``).
* ``sections`` and ``theorems``: Markdown/reST/LaTeX section headings with their own body, and
  LaTeX theorem-like environments, from lar's extractors (``lar.store.extract``).
* ``latex_terms``: LaTeX definition sites: ``\\newcommand``-like macro names, ``\\label``
  keys and terms set in ``\\emph``/``\\textbf``/``\\textit``.

Every offset returned is a character offset into ``Doc.text``.
"""
from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

from lar.store.extract import extract, kind_for

from lar_evals.generators.common import ALPHA, WORD, Doc, line_bounds, sentence_bounds

PY_SUFFIXES = (".py", ".pyi", ".pyw")
THEOREM_ENVS = frozenset({"theorem", "lemma", "proposition", "corollary", "definition",
                          "conjecture", "claim", "thm", "lem", "prop", "cor", "defn"})
_NEWLINE = re.compile(r"\r\n|\r|\n")
_ADORNMENT = re.compile(r"[ \t]*([=\-~^\"'`#*+<>:._])\1*[ \t]*")
_LATEX_DEF = re.compile(r"\\(?:(?:re)?newcommand\*?|providecommand\*?|DeclareMathOperator\*?|def)"
                        r"\s*\{?\s*\\([A-Za-z@]+)")
_LATEX_LABEL = re.compile(r"\\label\s*\{([^{}\n]{1,80})\}")
_LATEX_EMPH = re.compile(r"\\(?:emph|textbf|textit)\s*\{([^{}\n]{1,60})\}")


@dataclass
class CodeDef:
    """A definition in a code file (character offsets into the document text)."""

    name: str
    kind: str           # "function", "class", "assignment", or tree-sitter's kind
    header: tuple[int, int]   # the line that names it
    span: tuple[int, int]     # the whole definition
    doc: str = ""             # docstring, else the comment block right above
    doc_kind: str = ""        # "docstring" | "comment" | ""
    identifiers: set[str] = field(default_factory=set)


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _NEWLINE.finditer(text)]


def _comment_above(lines: list[str], first: int) -> str:
    """The ``#`` comment block right above 0-based line ``first`` (no blank line between)."""
    out: list[str] = []
    i = first - 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        out.append(lines[i].lstrip().lstrip("#").strip())
        i -= 1
    return "\n".join(reversed(out)).strip()


def _identifiers(node: ast.AST) -> set[str]:
    """Names the code of ``node`` uses: definitions, arguments, names, attributes, keywords
    and imports (string constants and comments are not code)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg:
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.update((n.asname or n.name).split("."))
    return out


def python_defs(doc: Doc) -> list[CodeDef]:
    """Functions, classes and top-level/class-level assignments of a Python file (``[]`` for
    files that do not parse)."""
    text = doc.text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    starts = _line_starts(text)
    lines = [text[starts[i]:(starts[i + 1] if i + 1 < len(starts) else len(text))]
             for i in range(len(starts))]

    def header(lineno: int) -> tuple[int, int]:
        return line_bounds(text, starts[lineno - 1])

    out: list[CodeDef] = []

    def visit(body: list[ast.stmt], assignments: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                end_line = node.end_lineno or node.lineno
                span = (starts[node.lineno - 1], line_bounds(text, starts[end_line - 1])[1])
                doc_text = ast.get_docstring(node) or ""
                doc_kind = "docstring" if doc_text else ""
                if not doc_text:
                    doc_text = _comment_above(lines, first - 1)
                    doc_kind = "comment" if doc_text else ""
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                out.append(CodeDef(node.name, kind, header(node.lineno), span, doc_text,
                                   doc_kind, _identifiers(node)))
                visit(node.body, isinstance(node, ast.ClassDef))
            elif assignments and isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        out.append(CodeDef(t.id, "assignment", header(node.lineno),
                                           header(node.lineno)))

    visit(tree.body, True)
    return out


def code_defs(doc: Doc) -> list[CodeDef]:
    """Definitions of a non-Python source file lar's symbols layer can parse (tree-sitter);
    ``[]`` for other files or without ``lar[code]``. Identifiers are all words of the
    definition's text outside its leading comment."""
    from lar.layers.kits.code import langs

    lang = langs.symbol_language(doc.id)
    if lang is None or lang == "python":
        return []
    try:
        from lar.layers.kits.code.treesitter import extract as ts_extract

        ex = ts_extract(doc.data, lang, langs.FALLBACK_GRAMMAR.get(langs.extension(doc.id)))
    except Exception:  # noqa: BLE001 - a missing extra or a grammar failure: no definitions
        return []
    out: list[CodeDef] = []
    for d in ex.defs:
        start, end = doc.char_offset(d.start), doc.char_offset(d.end)
        body = doc.text[start:end]
        out.append(CodeDef(d.name, d.kind, line_bounds(doc.text, start), (start, end), d.doc,
                           "comment" if d.doc else "", set(WORD.findall(body))))
    return out


def definitions(doc: Doc) -> list[CodeDef]:
    """``python_defs`` for Python files, else ``code_defs``."""
    if doc.id.lower().endswith(PY_SUFFIXES):
        return python_defs(doc)
    return code_defs(doc)


@dataclass
class Section:
    """A heading (``heading``: its line) and its own body (up to its first subsection)."""

    title: str
    heading: tuple[int, int]
    body: tuple[int, int]
    level: int


def structure_blocks(doc: Doc):
    """The structure blocks (sections, environments, ...) lar extracts from a Markdown, reST or
    LaTeX file; empty for other files."""
    if kind_for(doc.id) not in ("markdown", "rst", "latex"):
        return ()
    d = extract(doc.id, doc.data)
    return () if d.derived or d.skipped else d.blocks


def sections(doc: Doc) -> list[Section]:
    """Sections of a Markdown, reST or LaTeX file, each with the body before its first
    subsection (adornment lines under a heading skipped)."""
    blocks = [b for b in structure_blocks(doc) if b.kind == "section" and b.label]
    out: list[Section] = []
    text = doc.text
    for b in blocks:
        start, end = doc.char_offset(b.start), doc.char_offset(b.end)
        head = line_bounds(text, start)
        if _ADORNMENT.fullmatch(text[head[0]:head[1]]) and head[1] < end:  # a reST overline
            head = line_bounds(text, head[1] + 1)
        body_start = head[1]
        while True:  # skip the newline and any underline/overline adornment
            nl = text.find("\n", body_start)
            if nl < 0 or nl >= end:
                body_start = end
                break
            nxt = line_bounds(text, nl + 1)
            line = text[nxt[0]:nxt[1]]
            body_start = nl + 1
            if not (line.strip() and _ADORNMENT.fullmatch(line)):
                break
            body_start = nxt[1]
        child = min((c.start for c in blocks if b.start < c.start < b.end), default=None)
        body_end = end if child is None else doc.char_offset(child)
        out.append(Section(b.label, head, (body_start, max(body_start, body_end)), b.level))
    return out


def theorems(doc: Doc) -> list[tuple[str, int, int]]:
    """``(environment, start, end)`` of every theorem-like LaTeX environment."""
    out = []
    for b in structure_blocks(doc):
        name = b.label.rstrip("*").lower()
        if b.kind == "environment" and name in THEOREM_ENVS:
            out.append((name, doc.char_offset(b.start), doc.char_offset(b.end)))
    return out


def latex_terms(doc: Doc) -> list[tuple[str, str, int, int]]:
    """``(word, kind, start, end)`` of LaTeX definition sites: macro names defined with
    ``\\newcommand`` & co. (span: the line), words of ``\\label`` keys (the line) and words set
    in ``\\emph``/``\\textbf``/``\\textit`` (the sentence)."""
    if kind_for(doc.id) != "latex":
        return []
    text = doc.text
    out: list[tuple[str, str, int, int]] = []
    for m in _LATEX_DEF.finditer(text):
        out.append((m.group(1), "latex-macro", *line_bounds(text, m.start())))
    for m in _LATEX_LABEL.finditer(text):
        for w in ALPHA.findall(m.group(1)):
            out.append((w, "latex-label", *line_bounds(text, m.start())))
    for m in _LATEX_EMPH.finditer(text):
        words = ALPHA.findall(m.group(1))
        if 1 <= len(words) <= 4:
            for w in words:
                out.append((w, "latex-emph", *sentence_bounds(text, m.start(1))))
    return out
