"""The built-in offline generator: extractive derived texts, copied from the unit by rules.

No model is involved: every text is assembled from words of the unit, and every source span
is the exact byte range those words were copied from.

* **Source files** with a tree-sitter grammar (``lar.layers.kits.code``): per definition a ``signature``
  (its text up to the body, prefixed by the qualified name for nested definitions) and, when it
  has one, a ``docstring`` text: ``"<qualified name>: <first paragraph of the docstring or
  leading comment block>"``, pointing to that paragraph in the file, then to the signature.
  A Python module docstring gives a ``summary`` (its first paragraph). Other source files
  (no grammar: shell, TOML, JSON, ...) give nothing.
* **Documents** (Markdown, reStructuredText, LaTeX, HTML, PDF, notebooks, plain text): per
  section a ``heading`` text ``"<title>: <first sentence of its body>"`` pointing to the
  heading line, then to that sentence; and per further paragraph a ``sentence`` text, its first
  sentence. Code, formula and verbatim blocks, code cells, markup lines (``\\begin{..}``,
  ``\\label``, tables, directives, comments) and a LaTeX preamble are never read as prose.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any

from lar.layers.derived.spans import collapse, find_words, first_sentence, line_end, trim
from lar.layers.derived.types import DerivedText

EXTRACTIVE_VERSION = "1"
DOC_CHARS = 500
MAX_TEXTS = 5000
HEADING_SEARCH_BYTES = 400
COMMENT_SEARCH_BYTES = 20000
MIN_SENTENCE_WORDS = 3

_NON_PROSE_ENVS = frozenset("""equation align alignat flalign gather multline eqnarray displaymath
math dmath algorithm algorithmic algorithm2e verbatim Verbatim BVerbatim LVerbatim lstlisting
minted comment tabular tabularx array tikzpicture""".split())
_LATEX_MARKUP = re.compile(
    rb"[ \t]*(?:(?:\\(?:begin|end)[ \t]*\{[^{}\n]*\}(?:\[[^\]\n]*\]|\{[^{}\n]*\})*"
    rb"|\\(?:label|item|noindent|centering|maketitle|vspace|hspace|medskip|bigskip|smallskip|par"
    rb"|newline|hline|toprule|midrule|bottomrule|includegraphics|input|include|usepackage"
    rb"|documentclass|bibliography|bibliographystyle|newcommand|renewcommand|providecommand|def"
    rb"|newtheorem|date|author|title|thanks|keywords|tableofcontents|clearpage|newpage|appendix"
    rb"|printbibliography|addbibresource)(?![A-Za-z@])\*?(?:\[[^\]\n]*\])?(?:\{[^{}\n]*\})*)"
    rb"[ \t]*)+")
_MD_MARKUP = re.compile(rb"[ \t]*(?:\||<|!\[|\[\^|```|~~~|\[[^\]\n]+\]:[ \t]|(?:[-*_=][ \t]*){3,}$)")
_RST_MARKUP = re.compile(rb"[ \t]*(?:\.\.(?:[ \t]|$)|:[A-Za-z][^:\n]*:(?:[ \t]|$)"
                         rb"|([!-/:-@\[-`{-~])\1{2,}[ \t]*$)")
_LIST_MARKER = re.compile(rb"[ \t]*(?:>[ \t]?)*(?:(?:[-+*]|\d{1,9}[.)])[ \t]+)?")
_DOC_BEGIN = re.compile(rb"\\begin[ \t]*\{document\}")


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=3).hexdigest()


class ExtractiveGenerator:
    """Docstrings, signatures, headings with their first sentence, and first sentences of
    paragraphs, each with its exact source spans (see the module docstring). Offline, no model."""

    name = "extractive"
    model = "none"
    extractive = True

    def __init__(self) -> None:
        from lar.store.extract import versions_fingerprint

        # a changed extractor changes the structure read: a new key regenerates
        self.prompt_version = f"extractive-v{EXTRACTIVE_VERSION}+x{_digest(versions_fingerprint())}"

    def __repr__(self) -> str:
        return f"ExtractiveGenerator({self.prompt_version})"

    def generate(self, unit_text: str | bytes, *, path: str, document: Any = None) -> list[DerivedText]:
        from lar.layers.kits.code.langs import symbol_language
        from lar.store.extract import extract
        from lar.layers.kits.lexical.tokenize import code_mode

        data = unit_text.encode("utf-8", errors="surrogateescape") if isinstance(unit_text, str) \
            else bytes(unit_text)
        if document is None:
            document = extract(path, data)
        lang = symbol_language(path)
        if lang is not None:
            out = code_texts(data, lang, path)
        elif document.kind == "text" and code_mode(path):
            out = []
        else:
            out = prose_texts(data, document)
        seen: set[tuple] = set()
        unique = []
        for t in sorted(out, key=lambda t: (t.span, t.kind, t.text)):
            key = (t.text, t.kind, t.source_spans)
            if key not in seen:
                seen.add(key)
                unique.append(t)
        return unique[:MAX_TEXTS]


# -- source code ------------------------------------------------------------------------------
def code_texts(data: bytes, lang: str, path: str) -> list[DerivedText]:
    from lar.layers.kits.code.langs import FALLBACK_GRAMMAR, extension
    from lar.layers.kits.code.treesitter import extract

    ex = extract(data, lang, FALLBACK_GRAMMAR.get(extension(path)))
    out: list[DerivedText] = []
    if ex.lang == "python":
        mod = module_docstring(data)
        if mod is not None:
            out.append(mod)
    for d in ex.defs:
        sig = _signature_span(data, d)
        prefix = f"{d.qualified}: " if d.qualified != d.name else ""
        if sig is not None:
            out.append(DerivedText(prefix + d.signature, "signature", (sig,)))
        para = _first_paragraph(d.doc)
        if para:
            doc_span = _doc_span(data, d, para, ex.lang, sig)
            spans = (doc_span or (d.start, d.end),) + ((sig,) if sig and sig != doc_span else ())
            out.append(DerivedText(f"{d.qualified}: {para}", "docstring", spans))
    return out


def _signature_span(data: bytes, d) -> tuple[int, int] | None:
    words = d.signature.split()
    if words and words[-1].endswith("…"):
        words[-1] = words[-1][:-1]
        if not words[-1]:
            words.pop()
    return find_words(data, " ".join(words), d.start, d.end)


def _first_paragraph(doc: str) -> str:
    para = " ".join(re.split(r"\n[ \t]*\n", doc.strip(), maxsplit=1)[0].split())
    if len(para) > DOC_CHARS:
        cut = para.rfind(" ", 0, DOC_CHARS)
        para = para[: cut if cut > 0 else DOC_CHARS]
    return para


def _doc_span(data: bytes, d, para: str, lang: str, sig: tuple[int, int] | None
              ) -> tuple[int, int] | None:
    if lang == "python":
        inside = find_words(data, para, sig[1] if sig else d.start, d.end)
        if inside is not None:
            return inside
    return find_words(data, para, max(0, d.start - COMMENT_SEARCH_BYTES), d.start,
                      separators=rb"\s/*#!", last=True)


def module_docstring(data: bytes) -> DerivedText | None:
    """The first paragraph of a Python module docstring as a ``summary`` (None if none)."""
    from lar.layers.kits.code.treesitter import parse

    tree, _ = parse(data, "python")
    node = next((n for n in tree.root_node.named_children if n.type != "comment"), None)
    if node is not None and node.type == "expression_statement" and node.named_child_count == 1:
        node = node.named_children[0]
    if node is None or node.type != "string":
        return None
    parts = {c.type: c for c in node.children}
    if "string_start" not in parts or "string_end" not in parts:
        return None
    lo, hi = trim(data, parts["string_start"].end_byte, parts["string_end"].start_byte)
    if lo >= hi:
        return None
    blank = re.compile(rb"\n[ \t]*\r?\n").search(data, lo, hi)
    lo, hi = trim(data, lo, blank.start() if blank else hi)
    if hi - lo > DOC_CHARS:
        cut = max(data.rfind(b" ", lo, lo + DOC_CHARS), data.rfind(b"\n", lo, lo + DOC_CHARS))
        lo, hi = trim(data, lo, cut if cut > lo else lo + DOC_CHARS)
    text = collapse(data[lo:hi])
    return DerivedText(text, "summary", ((lo, hi),)) if text else None


# -- documents --------------------------------------------------------------------------------
def _skip_intervals(doc) -> list[tuple[int, int]]:
    out = []
    for b in doc.blocks:
        if b.kind in ("code", "formula") or (b.kind == "cell" and b.label != "markdown") \
                or (b.kind == "environment" and b.label.rstrip("*") in _NON_PROSE_ENVS):
            out.append((b.start, b.end))
    merged: list[tuple[int, int]] = []
    for s, e in sorted(out):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _prose_offset(data: bytes, a: int, b: int, kind: str) -> int | None:
    """Where the prose of line ``[a, b)`` starts (after list/quote markers and leading LaTeX
    markup), or None when the line is markup only."""
    line = data[a:b]
    if kind == "latex":
        if line.lstrip().startswith(b"%"):
            return None
        m = _LATEX_MARKUP.match(line)
        off = m.end() if m else 0
        rest = line[off:].strip()
        return None if not rest or rest.startswith(b"%") else a + off
    if kind == "markdown" and _MD_MARKUP.match(line):
        return None
    if kind == "rst" and _RST_MARKUP.match(line):
        return None
    m = _LIST_MARKER.match(line)
    off = m.end() if m else 0
    return a + off if line[off:].strip() else None


def _lines(data: bytes, lo: int):
    pos = lo
    while pos < len(data):
        end = line_end(data, pos)
        yield pos, end
        nl = data.find(b"\n", end)
        if nl < 0:
            return
        pos = nl + 1


def paragraphs(data: bytes, doc, heads: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(prose start, end)`` of every paragraph: runs of prose lines between blank lines,
    markup lines, headings and non-prose blocks."""
    skips = _skip_intervals(doc)
    lo = 0
    if doc.kind == "latex":
        m = _DOC_BEGIN.search(data)
        lo = line_end(data, m.end()) if m else 0
    out: list[tuple[int, int]] = []
    cur: list[int] | None = None
    si = hi_ = 0
    for a, b in _lines(data, lo):
        s, e = trim(data, a, b)
        while si < len(skips) and skips[si][1] < e:
            si += 1
        in_skip = si < len(skips) and skips[si][0] <= s and e <= skips[si][1]
        while hi_ < len(heads) and heads[hi_][1] <= a:
            hi_ += 1
        in_head = hi_ < len(heads) and heads[hi_][0] < max(b, a + 1)
        start = None if (s >= e or in_skip or in_head) else _prose_offset(data, a, b, doc.kind)
        if start is None:
            if cur is not None:
                out.append((cur[0], cur[1]))
                cur = None
            continue
        if cur is None:
            cur = [start, b]
        else:
            cur[1] = b
    if cur is not None:
        out.append((cur[0], cur[1]))
    return out


def _heading_span(data: bytes, block) -> tuple[int, int] | None:
    label = block.label.strip()
    hit = find_words(data, label, block.start, block.start + len(label.encode()) + HEADING_SEARCH_BYTES)
    end = line_end(data, hit[1] if hit else block.start)
    s, e = trim(data, block.start, end)
    return (s, e) if e > s else None


def prose_texts(data: bytes, doc) -> list[DerivedText]:
    sections = sorted((b for b in doc.blocks if b.kind in ("section", "heading") and b.label.strip()),
                      key=lambda b: b.start)
    heads = []
    for b in sections:
        sp = _heading_span(data, b)
        if sp is not None:
            heads.append((sp, b))
    paras = paragraphs(data, doc, sorted(sp for sp, _ in heads))
    out: list[DerivedText] = []
    used: set[tuple[int, int]] = set()
    starts = [sp[0] for sp, _ in heads]
    for k, (sp, b) in enumerate(heads):
        stop = min([b.end] + [x for x in starts[k + 1:] if x > sp[0]])
        body = next((p for p in paras if sp[1] <= p[0] < stop), None)
        label = " ".join(b.label.split())
        sent = first_sentence(data, *body) if body else None
        if sent is not None:
            used.add(body)
            out.append(DerivedText(f"{label}: {collapse(data[sent[0]:sent[1]])}", "heading",
                                   (sp, sent)))
        else:
            out.append(DerivedText(label, "heading", (sp,)))
    for p in paras:
        if p in used:
            continue
        sent = first_sentence(data, *p)
        if sent is None:
            continue
        text = collapse(data[sent[0]:sent[1]])
        if len(text.split()) >= MIN_SENTENCE_WORDS:
            out.append(DerivedText(text, "sentence", (sent,)))
    return out
