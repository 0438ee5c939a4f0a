"""Markup formats: HTML (visible text extracted), Markdown and reStructuredText (raw bytes).

* ``html`` (``derived=True``): the visible text by the stdlib ``html.parser``; script, style,
  template and title dropped; block elements become line breaks (paragraph-like ones a blank
  line); ``h1``-``h6`` give section blocks (level 1-6, up to the next heading of the same or a
  higher level); ``<pre>`` and ``<code>`` give atomic code blocks; one source ref per text
  line with ``{"line": source line}``.
* ``markdown`` (``derived=False``): ATX and setext headings give sections; fenced code blocks
  (atomic ``code``), ``$$..$$`` (atomic display formula) and inline ``$..$`` (Pandoc's rule).
* ``rst`` (``derived=False``): titles under- (and optionally over-) lined with punctuation give
  sections, levels by the order the adornment styles first appear; ``.. math::`` (formula) and
  ``.. code-block::``/``.. code::``/``.. sourcecode::`` and literal blocks after ``::`` (code)
  are atomic; ``:math:`..``` roles give inline formulas.
"""
from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from typing import Callable, Optional

from lar.store.extract.document import Block, Document, SourceRef
from lar.store.extract.latex import blank_out, find_formulas, line_of as _line_of, nest_sections

VERSION = "1"
Resolver = Optional[Callable[[str], Optional[bytes]]]


def _lines(buf: bytes | bytearray) -> list[tuple[int, int]]:
    """``(start, end)`` of every line, ``end`` excluding the newline (and a ``\\r`` before it)."""
    out, pos, n = [], 0, len(buf)
    while pos < n:
        nl = buf.find(b"\n", pos)
        stop = n if nl < 0 else nl
        end = stop - 1 if stop > pos and buf[stop - 1] == 0x0D else stop
        out.append((pos, end))
        pos = stop + 1
    return out


def _text(raw: bytes | bytearray) -> str:
    return " ".join(bytes(raw).decode("utf-8", errors="replace").split())


# ----------------------------------------------------------------------------- Markdown
_FENCE = re.compile(rb" {0,3}(`{3,}|~{3,})[ \t]*([^\n]*)")
_ATX = re.compile(rb" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(rb" {0,3}(=+|-+)[ \t]*")
_NOT_PARA = re.compile(rb" {0,3}(?:[-+*][ \t]|\d{1,9}[.)][ \t]|>|#|```|~~~|<)")
_CODE_SPAN = re.compile(rb"(?<!`)(`+)(?!`)((?:[^\n]|\n(?![ \t\r]*\n))*?)(?<!`)\1(?!`)")
_HTML_COMMENT = re.compile(rb"<!--[\s\S]*?-->")


def extract_markdown(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Sections, fenced code and math of a Markdown file (blocks are byte ranges of the file)."""
    buf, notes, blocks = bytearray(data), [], []
    lines = _lines(data)
    first = 0
    if data.startswith(b"---") and lines and data[lines[0][0]:lines[0][1]].strip() == b"---":
        for k in range(1, len(lines)):  # YAML front matter
            if data[lines[k][0]:lines[k][1]].strip() in (b"---", b"..."):
                blank_out(buf, 0, lines[k][1])
                first = k + 1
                break
    fence: tuple[bytes, int, int, str] | None = None
    for a, b in lines[first:]:
        line = data[a:b]
        m = _FENCE.fullmatch(line)
        if fence is None:
            if m and not (m.group(1)[0] == 0x60 and b"`" in m.group(2)):
                fence = (m.group(1)[:1], len(m.group(1)), a, _text(m.group(2)).split(" ")[0])
            continue
        if m and m.group(1)[:1] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
            blocks.append(Block(fence[2], b, "code", fence[3], atomic=True))
            blank_out(buf, fence[2], b)
            fence = None
    if fence is not None:
        notes.append(f"unclosed code fence at line {_line_of(data, fence[2])}")
        blocks.append(Block(fence[2], len(data), "code", fence[3], atomic=True))
        blank_out(buf, fence[2], len(data))
    for rx in (_HTML_COMMENT, _CODE_SPAN):
        for m in rx.finditer(bytes(buf)):
            blank_out(buf, m.start(), m.end())
    heads: list[tuple[int, int, str]] = []
    para: list[tuple[int, int]] = []  # lines of the current paragraph
    for a, b in lines:
        line = bytes(buf[a:b])
        if not line.strip():
            para = []
            continue
        atx = _ATX.fullmatch(line)
        if atx:
            title = _text(atx.group(2) or b"")
            heads.append((a, len(atx.group(1)), "" if set(title) <= {"#"} else title))
            para = []
            continue
        st = _SETEXT.fullmatch(line)
        if st and para and not _NOT_PARA.match(bytes(buf[para[0][0]:para[0][1]])):
            title = _text(b" ".join(bytes(buf[x:y]) for x, y in para))
            heads.append((para[0][0], 1 if st.group(1)[:1] == b"=" else 2, title))
            para = []
            continue
        para.append((a, b))
    blocks += nest_sections(heads, len(data))
    math_notes: list[str] = []
    blocks += find_formulas(buf, 0, len(buf), math_notes, brackets=False, pandoc=True)
    notes += [n for n in math_notes if not n.startswith("unclosed math $ ")]
    blocks.sort(key=lambda x: (x.start, -x.end, x.kind))
    return Document(kind="markdown", text=data, blocks=tuple(blocks), notes=tuple(notes))


# ----------------------------------------------------------------------------- reStructuredText
_ADORN = re.compile(rb"([!-/:-@\[-`{-~])\1*[ \t]*")
_DIRECTIVE = re.compile(rb"([ \t]*)\.\.[ \t]+(math|code-block|code|sourcecode)::[ \t]*(.*)")
_MATH_ROLE = re.compile(rb":math:`[^`\n]+`")


def _indent(line: bytes) -> int:
    return len(line) - len(line.lstrip(b" \t"))


def _indented_body(data: bytes, lines: list[tuple[int, int]], k: int, indent: int) -> int:
    """Index of the last line of the block indented deeper than ``indent`` after line ``k``."""
    last = k
    for j in range(k + 1, len(lines)):
        line = data[lines[j][0]:lines[j][1]]
        if not line.strip():
            continue
        if _indent(line) <= indent:
            break
        last = j
    return last


def extract_rst(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Sections, math/code directives and literal blocks of a reStructuredText file."""
    buf, blocks = bytearray(data), []
    lines = _lines(data)
    k = 0
    while k < len(lines):
        a, b = lines[k]
        line = data[a:b]
        d = _DIRECTIVE.fullmatch(line)
        if d:
            last = _indented_body(data, lines, k, _indent(line))
            name = d.group(2).decode()
            label = "display" if name == "math" else (_text(d.group(3)) or name)
            blocks.append(Block(a, lines[last][1], "formula" if name == "math" else "code",
                                label, atomic=True))
            blank_out(buf, a, lines[last][1])
            k = last + 1
            continue
        if line.rstrip().endswith(b"::") and not line.lstrip().startswith(b".."):
            j = k + 1
            while j < len(lines) and not data[lines[j][0]:lines[j][1]].strip():
                j += 1
            if j > k + 1 and j < len(lines) and _indent(data[lines[j][0]:lines[j][1]]) > _indent(line):
                last = _indented_body(data, lines, j - 1, _indent(line))
                blocks.append(Block(lines[j][0], lines[last][1], "code", "literal", atomic=True))
                blank_out(buf, lines[j][0], lines[last][1])
                k = last + 1
                continue
        k += 1
    styles: list[tuple[bytes, bool]] = []
    heads: list[tuple[int, int, str]] = []
    text = [bytes(buf[x:y]) for x, y in lines]
    k = 0
    while k < len(lines):
        line = text[k]
        prev_blank = k == 0 or not text[k - 1].strip()
        over = _ADORN.fullmatch(line) if line else None
        if over and prev_blank and k + 2 < len(lines) and text[k + 1].strip() \
                and not _ADORN.fullmatch(text[k + 1]) and text[k + 2].rstrip() == line.rstrip():
            key, start, title, k_next = (line[:1], True), lines[k][0], text[k + 1], k + 3
        elif k + 1 < len(lines) and line.strip() and _indent(line) == 0 and prev_blank \
                and not _ADORN.fullmatch(line) and (under := _ADORN.fullmatch(text[k + 1])) \
                and (len(under.group(0).rstrip()) >= len(line.rstrip().decode("utf-8", "replace"))
                     or len(under.group(0).rstrip()) >= 4):
            key, start, title, k_next = (text[k + 1][:1], False), lines[k][0], line, k + 2
        else:
            k += 1
            continue
        if key not in styles:
            styles.append(key)
        heads.append((start, styles.index(key) + 1, _text(title)))
        k = k_next
    blocks += nest_sections(heads, len(data))
    blocks += [Block(m.start(), m.end(), "formula", "inline", atomic=True)
               for m in _MATH_ROLE.finditer(bytes(buf))]
    blocks.sort(key=lambda x: (x.start, -x.end, x.kind))
    return Document(kind="rst", text=data, blocks=tuple(blocks))


# ----------------------------------------------------------------------------- HTML
_SKIP = frozenset({"script", "style", "template", "title"})
_PARA = frozenset({"p", "pre", "blockquote", "table", "ul", "ol", "dl", "figure", "section",
                   "article", "h1", "h2", "h3", "h4", "h5", "h6", "hr"})
_LINE = frozenset({"address", "aside", "body", "br", "caption", "dd", "details", "dialog", "div",
                   "dt", "fieldset", "figcaption", "footer", "form", "header", "hgroup", "li",
                   "main", "nav", "summary", "tbody", "tfoot", "thead", "tr", "html", "head"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}


class _Visible(HTMLParser):
    """Collects the visible text with byte offsets, headings, code blocks and line starts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[bytes] = []
        self.pos = 0
        self.tail = b""  # last two bytes written
        self.pending = False  # a collapsed space waits to be written before the next text
        self.skip = 0
        self.pre = 0
        self.code_at: list[tuple[str, int]] = []
        self.heading: tuple[int, int, list[str]] | None = None
        self.heads: list[tuple[int, int, str]] = []
        self.codes: list[Block] = []
        self.refs: list[tuple[int, int]] = []  # (text offset, source line) of each text line

    def _write(self, s: str) -> None:
        b = s.encode("utf-8", errors="replace")
        if b:
            self.parts.append(b)
            self.pos += len(b)
            self.tail = (self.tail + b)[-2:]

    def _breaks(self, k: int) -> None:
        self.pending = False
        if self.pos and not self.tail.endswith(b"\n" * k):
            self._write("\n" * (k - (1 if self.tail.endswith(b"\n") else 0)))

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag in _PARA or tag in _LINE:
            self._breaks(2 if tag in _PARA else 1)
        elif self.pending and self.pos and not self.tail.endswith((b"\n", b" ")):
            self._write(" ")  # so that a code block or heading starts at its first character
            self.pending = False
        if tag in _HEADINGS and self.heading is None:
            self.heading = (self.pos, _HEADINGS[tag], [])
        if tag == "pre" or (tag == "code" and not self.pre):
            self.code_at.append((tag, self.pos))
        if tag == "pre":
            self.pre += 1
        elif tag in ("td", "th") and not self.tail.endswith(b"\n"):
            self.pending = True

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        names = [t for t, _ in self.code_at]
        if tag in names:
            k = len(names) - 1 - names[::-1].index(tag)
            start = self.code_at[k][1]
            del self.code_at[k:]
            if self.pos > start:
                self.codes.append(Block(start, self.pos, "code", tag, atomic=True))
        if self.heading is not None and _HEADINGS.get(tag) == self.heading[1]:
            self.end_heading()
        if tag in _PARA or tag in _LINE:
            self._breaks(2 if tag in _PARA else 1)

    def end_heading(self) -> None:
        if self.heading is not None:
            start, level, words = self.heading
            self.heads.append((start, level, " ".join("".join(words).split())))
            self.heading = None

    def handle_data(self, data: str) -> None:
        if self.skip or not data:
            return
        line = self.getpos()[0]
        at_start = not self.pos or self.tail.endswith(b"\n")
        if self.pre:
            if data.startswith("\n") and self.code_at and self.code_at[-1] == ("pre", self.pos):
                data, line = data[1:], line + 1  # the newline right after <pre> is not shown
            self.pending = False
        else:
            words = " ".join(data.split())
            if not words:
                self.pending = self.pending or not at_start
                return
            lead = data[:len(data) - len(data.lstrip())]
            line += lead.count("\n")
            if (lead or self.pending) and not at_start and not self.tail.endswith(b" "):
                words = " " + words
            data, self.pending = words, data[-1:].isspace()
        if not data:
            return
        if at_start:
            self.refs.append((self.pos, line))
        if self.heading is not None:
            self.heading[2].append(data)
        self._write(data)


def _decode(data: bytes) -> str:
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    m = re.search(rb"charset=[\"']?([A-Za-z0-9_\-]+)", data[:4096])
    if m:
        try:
            return data.decode(m.group(1).decode("ascii"), errors="replace")
        except LookupError:
            pass
    return data.decode("cp1252", errors="replace")


def extract_html(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Visible text of an HTML page with headings, code blocks and a line source map."""
    p = _Visible()
    p.feed(_decode(data))
    p.close()
    p.codes += [Block(a, p.pos, "code", tag, atomic=True) for tag, a in p.code_at if p.pos > a]
    p.end_heading()  # a code block or heading still open at the end of the page
    text = b"".join(p.parts).rstrip()
    n = len(text)
    refs = [(s, line) for s, line in p.refs if s < n]
    source_map = tuple(SourceRef(s, refs[i + 1][0] if i + 1 < len(refs) else n, {"line": line})
                       for i, (s, line) in enumerate(refs))
    blocks = nest_sections([h for h in p.heads if h[0] < n], n)
    blocks += [Block(b.start, min(b.end, n), b.kind, b.label, atomic=True)
               for b in p.codes if b.start < n]
    blocks.sort(key=lambda x: (x.start, -x.end, x.kind))
    return Document(kind="html", text=text, derived=True, blocks=tuple(blocks),
                    source_map=source_map)
