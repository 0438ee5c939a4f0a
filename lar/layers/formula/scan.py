"""Finding formulas in a unit's text: from the extractor's blocks, else with a scanner.

All scanners work on the unit's bytes decoded as Latin-1 (one character per byte), so every
offset they return is a byte offset into the unit text, whatever its encoding; LaTeX syntax is
ASCII. Formula content is decoded as UTF-8 for normalisation.

* LaTeX (``.tex``...): ``$..$``, ``$$..$$``, ``\\(..\\)``, ``\\[..\\]`` and the math environments
  (``equation``, ``align``, ``gather``, ``multline``, ``eqnarray``, ``displaymath``, ``math``,
  ``flalign``, ``alignat``, starred or not); ``%`` comments, ``\\verb``, verbatim-like
  environments (also those declared with ``\\lstnewenvironment``/``\\newminted`` in the unit),
  and escaped ``\\$`` are skipped (a formula inside a macro definition body counts).
* Markdown and other text: the same delimiters with pandoc's rules for ``$``: the opening ``$``
  is followed by a non-space, the closing one preceded by a non-space and not followed by a
  digit (so "$5 and $10" is no formula); fenced and inline code are skipped.
* reStructuredText: the ``:math:`..``` role and the ``.. math::`` directive.
* Jupyter notebooks whose text is the raw JSON (no notebook extractor): the JSON strings of each
  cell's ``source`` are decoded and scanned as Markdown; spans map back to the raw bytes.

A delimiter that never closes is counted in ``problems`` and skipped.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from lar.layers.formula.macros import Macro, parse_macros

MATH_ENVS = frozenset("equation align gather multline eqnarray displaymath math flalign alignat "
                      "dmath".split())
VERBATIM_ENVS = frozenset("verbatim Verbatim BVerbatim lstlisting minted comment alltt "
                          "filecontents listing".split())
LATEX_EXTS = (".tex", ".ltx", ".latex", ".sty", ".cls")
RST_EXTS = (".rst", ".rest")
_BLANK_LINE = re.compile(r"\n[ \t]*\r?\n")
_LATEX_RE = re.compile(
    r"(?P<esc>\\[\\$%{}])|(?P<comment>%[^\n]*)|(?P<verb>\\verb\*?(?P<vd>[^A-Za-z\s*]))"
    r"|(?P<begin>\\begin\s*\{(?P<env>[A-Za-z]+\*?)\})|(?P<dd>\$\$)|(?P<d>\$)|(?P<paren>\\\()"
    r"|(?P<brack>\\\[)")
_MD_RE = re.compile(
    r"(?P<fence>^[ \t]{0,3}(?P<fc>`{3,}|~{3,}))|(?P<code>`+)|(?P<esc>\\[\\$`])"
    r"|(?P<begin>\\begin\s*\{(?P<env>[A-Za-z]+\*?)\})|(?P<dd>\$\$)|(?P<d>\$)|(?P<paren>\\\()"
    r"|(?P<brack>\\\[)", re.M)
_VERB_DECL_RE = re.compile(r"\\(?:lstnewenvironment|newminted|DefineVerbatimEnvironment|"
                           r"newtcblisting)\s*\{([A-Za-z]+\*?)\}")
_RST_ROLE_RE = re.compile(r":math:`([^`]+)`")
_RST_DIRECTIVE_RE = re.compile(r"^(?P<ind>[ \t]*)\.\.[ \t]+math::[ \t]*(?P<arg>[^\n]*)$", re.M)
_JSON_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_JSON_SOURCE_RE = re.compile(r'"source"\s*:\s*(\[|")')


@dataclass(frozen=True, slots=True)
class FoundFormula:
    """One formula: byte span ``[start, end)`` with its delimiters, its label (``inline``,
    ``display`` or the environment name) and its math content (UTF-8 decoded)."""

    start: int
    end: int
    label: str
    content: str


@dataclass
class Found:
    formulas: list[FoundFormula] = field(default_factory=list)
    macros: dict[str, Macro] = field(default_factory=dict)
    source: str = "scanner"
    problems: int = 0


def utf8(s: str) -> str:
    """Latin-1-decoded bytes back to text."""
    return s.encode("latin-1").decode("utf-8", errors="replace")


def _escaped(text: str, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def _find_close(text: str, token: str, pos: int, ok: Callable[[int], bool] | None = None,
                paragraph: bool = True) -> int:
    """Index of the next unescaped ``token`` from ``pos`` (-1 if none, or a blank line first)."""
    limit = len(text)
    if paragraph:
        b = _BLANK_LINE.search(text, pos)
        limit = b.start() if b else len(text)
    i = text.find(token, pos, limit)
    while i >= 0:
        if not _escaped(text, i) and (ok is None or ok(i)):
            return i
        i = text.find(token, i + 1, limit)
    return -1


def _env_end(text: str, env: str, pos: int) -> re.Match | None:
    return re.compile(r"\\end\s*\{" + re.escape(env) + r"\}").search(text, pos)


class _Scan:
    def __init__(self, text: str, markdown: bool, verbatim: frozenset[str]):
        self.text, self.md, self.verbatim = text, markdown, verbatim
        self.out: list[tuple[int, int, int, int, str]] = []
        self.problems = 0

    def _inline_ok(self, i: int) -> bool:
        t = self.text
        return not t[i - 1].isspace() and not (i + 1 < len(t) and t[i + 1].isdigit())

    def run(self) -> None:
        t, pos = self.text, 0
        rx = _MD_RE if self.md else _LATEX_RE
        while True:
            m = rx.search(t, pos)
            if m is None:
                return
            handler = getattr(self, f"_on_{m.lastgroup}", None)
            pos = handler(m) if handler is not None else m.end()

    def _on_verb(self, m: re.Match) -> int:
        t, pos = self.text, m.end()
        line_end = t.find("\n", pos)
        close = t.find(m.group("vd"), pos, len(t) if line_end < 0 else line_end)
        return close + 1 if close >= 0 else pos

    def _on_fence(self, m: re.Match) -> int:
        t, fc = self.text, m.group("fc")
        line_end = t.find("\n", m.end())
        if line_end < 0:
            return len(t)
        fence = re.escape(fc[0]) + "{" + str(len(fc)) + ",}"
        closing = re.compile("^[ \t]{0,3}" + fence + "[ \t]*$", re.M)
        close = closing.search(t, line_end + 1)
        return close.end() if close else len(t)

    def _on_code(self, m: re.Match) -> int:
        close = re.compile(r"(?<!`)" + m.group("code") + r"(?!`)").search(self.text, m.end())
        return close.end() if close else m.end()

    def _on_begin(self, m: re.Match) -> int:
        env, pos = m.group("env"), m.end()
        base = env.rstrip("*")
        if base not in MATH_ENVS and env not in self.verbatim and base not in self.verbatim:
            return pos
        end = _env_end(self.text, env, pos)
        if end is None:
            self.problems += 1
            return pos
        if base in MATH_ENVS:
            self.out.append((m.start(), end.end(), pos, end.start(), env))
        return end.end()

    def _on_dd(self, m: re.Match) -> int:
        pos = m.end()
        close = _find_close(self.text, "$$", pos)
        if close < 0:
            self.problems += 1
            return pos
        self.out.append((m.start(), close + 2, pos, close, "display"))
        return close + 2

    def _on_d(self, m: re.Match) -> int:
        t, pos = self.text, m.end()
        if self.md and (pos >= len(t) or t[pos].isspace()):
            return pos  # "$ 5" is no formula in Markdown
        close = _find_close(t, "$", pos, self._inline_ok if self.md else None)
        if close < 0 or close == pos:
            if not self.md:
                self.problems += 1
            return pos
        self.out.append((m.start(), close + 1, pos, close, "inline"))
        return close + 1

    def _on_paren(self, m: re.Match) -> int:
        return self._bracketed(m, "\\)", "inline")

    def _on_brack(self, m: re.Match) -> int:
        return self._bracketed(m, "\\]", "display")

    def _bracketed(self, m: re.Match, token: str, label: str) -> int:
        pos = m.end()
        close = _find_close(self.text, token, pos, paragraph=label == "inline")
        if close < 0:
            self.problems += 1
            return pos
        self.out.append((m.start(), close + 2, pos, close, label))
        return close + 2


def scan_text(text: str, mode: str) -> tuple[list[tuple[int, int, int, int, str]], int]:
    """Formulas of ``text`` (Latin-1 decoded bytes) in ``mode`` ``latex``, ``markdown`` or
    ``rst``: ``[(start, end, content_start, content_end, label)], problems``."""
    if mode == "rst":
        return _scan_rst(text), 0
    verbatim = VERBATIM_ENVS | {m.group(1) for m in _VERB_DECL_RE.finditer(text)}
    sc = _Scan(text, mode != "latex", frozenset(verbatim))
    sc.run()
    return sc.out, sc.problems


def _scan_rst(text: str) -> list[tuple[int, int, int, int, str]]:
    out = [(m.start(), m.end(), m.start(1), m.end(1), "inline")
           for m in _RST_ROLE_RE.finditer(text)]
    for m in _RST_DIRECTIVE_RE.finditer(text):
        ind = len(m.group("ind").expandtabs())
        end = m.end()
        pos = end + 1
        while pos < len(text):
            nl = text.find("\n", pos)
            line_end = len(text) if nl < 0 else nl
            line = text[pos:line_end]
            if line.strip() and len(line) - len(line.lstrip()) <= ind:
                break
            if line.strip():
                end = line_end
            pos = line_end + 1
        out.append((m.start(), end, m.start("arg"), end, "display"))
    return sorted(out)


def rst_content(content: str) -> str:
    """The math of a ``.. math::`` directive: its argument and body without option lines."""
    return "\n".join(ln for ln in content.split("\n") if not re.match(r"\s*:[A-Za-z-]+:", ln))


def _json_string(text: str, i: int) -> tuple[list[tuple[str, int, int]], int]:
    """Decode the JSON string literal whose opening quote is ``text[i]``: characters (as
    Latin-1 bytes) with the raw span each comes from, and the index after the closing quote."""
    out: list[tuple[str, int, int]] = []
    j = i + 1
    while j < len(text):
        c = text[j]
        if c == '"':
            return out, j + 1
        if c != "\\":
            out.append((c, j, j + 1))
            j += 1
            continue
        e = text[j + 1:j + 2]
        if e == "u":
            code = int(text[j + 2:j + 6] or "3f", 16)
            width = 6
            if 0xD800 <= code < 0xDC00 and text[j + 6:j + 8] == "\\u":
                low = int(text[j + 8:j + 12] or "0", 16)
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                width = 12
            try:
                raw = chr(code).encode("utf-8").decode("latin-1")
            except (ValueError, UnicodeEncodeError):
                raw = "?"
            out.extend((b, j, j + width) for b in raw)
            j += width
        else:
            out.append((_JSON_ESCAPES.get(e, e), j, j + 2))
            j += 2
    return out, len(text)


def scan_notebook_json(text: str) -> tuple[list[tuple[int, int, str, str]], int]:
    """Formulas of a raw ``.ipynb`` (Latin-1 decoded): ``[(start, end, label, content)]``."""
    out: list[tuple[int, int, str, str]] = []
    problems = 0
    for m in _JSON_SOURCE_RE.finditer(text):
        chars: list[tuple[str, int, int]] = []
        pos = m.end() - 1
        if m.group(1) == '"':
            chars, _ = _json_string(text, pos)
        else:
            pos += 1
            while pos < len(text):
                while pos < len(text) and text[pos] in " \t\r\n,":
                    pos += 1
                if pos >= len(text) or text[pos] != '"':
                    break
                part, pos = _json_string(text, pos)
                chars.extend(part)
        decoded = "".join(c for c, _, _ in chars)
        found, bad = scan_text(decoded, "markdown")
        problems += bad
        for s, e, cs, ce, label in found:
            out.append((chars[s][1], chars[e - 1][2], label, utf8(decoded[cs:ce])))
    return out, problems


_DELIMS = (("$$", "$$", "display"), ("\\[", "\\]", "display"), ("\\(", "\\)", "inline"),
           ("$", "$", "inline"))
_RST_HEAD_RE = re.compile(r"\.\.[ \t]+math::")
_ENV_RE = re.compile(r"^\\begin\s*\{([A-Za-z]+\*?)\}(.*)\\end\s*\{\1\}$", re.S)


def strip_delimiters(s: str) -> tuple[str, str]:
    """``(content, label)`` of a formula written with its delimiters (``$..$``, ``\\[..\\]``,
    ``\\begin{env}..\\end{env}``, ``:math:`..```); text without delimiters is returned as is."""
    t = s.strip()
    m = _ENV_RE.match(t)
    if m:
        return m.group(2), m.group(1)
    for op, cl, label in _DELIMS:
        if len(t) >= len(op) + len(cl) and t.startswith(op) and t.endswith(cl) \
                and not _escaped(t, len(t) - len(cl)):
            return t[len(op):len(t) - len(cl)], label
    if t.startswith(":math:`") and t.endswith("`"):
        return t[7:-1], "inline"
    d = _RST_HEAD_RE.match(t)
    if d:
        return rst_content(t[d.end():]), "display"
    return s, ""


def is_math_block(block: Any) -> bool:
    """Whether an extractor ``Block`` is a formula or a math environment."""
    if block.kind == "formula":
        return True
    return block.kind == "environment" and str(block.label).rstrip("*") in MATH_ENVS


def mode_for(path: str, kind: str = "text") -> str:
    """``latex``, ``rst`` or ``markdown`` (everything else) for a unit at ``path``."""
    p = path.lower()
    if p.endswith(LATEX_EXTS) or kind == "latex":
        return "latex"
    if p.endswith(RST_EXTS) or kind == "rst":
        return "rst"
    return "markdown"


class _Spans:
    """Disjoint-ish byte ranges with an overlap test (bisect over starts)."""

    def __init__(self, spans: list[tuple[int, int]]):
        self.spans = sorted(spans)
        self.starts = [a for a, _ in self.spans]
        self.max_len = max((b - a for a, b in self.spans), default=0)

    def hits(self, s: int, e: int) -> bool:
        i = bisect.bisect_left(self.starts, e)  # spans starting before e
        while i > 0:
            a, b = self.spans[i - 1]
            if b > s and a < e:
                return True
            if a + self.max_len <= s:
                return False
            i -= 1
        return False


def find_formulas(text: bytes, path: str, blocks: tuple = (), kind: str = "text",
                  derived: bool = False) -> Found:
    """The formulas of one unit's ``text`` (the Document's), with the unit's macros.

    The extractor's formula and math-environment blocks come first; the scanner adds what they
    do not cover (e.g. ``\\(..\\)`` in Markdown), never inside code blocks or code cells."""
    l1 = text.decode("latin-1")
    mode = mode_for(path, kind)
    macros, _ = parse_macros(l1, latex_comments=mode == "latex", fix=utf8)
    found = Found(macros=macros)
    math_blocks = [b for b in blocks if is_math_block(b)]
    last_end = -1
    for b in sorted(math_blocks, key=lambda b: (b.start, -b.end)):
        if b.start < last_end:
            continue  # a formula inside a math environment already taken
        content, label = strip_delimiters(utf8(l1[b.start:b.end]))
        found.formulas.append(FoundFormula(b.start, b.end, b.label or label or "formula", content))
        last_end = b.end
    if path.lower().endswith(".ipynb") and not derived:
        got, found.problems = scan_notebook_json(l1)
        scanned = [FoundFormula(s, e, label, c) for s, e, label, c in got]
    else:
        spans, found.problems = scan_text(l1, mode)
        scanned = []
        for s, e, cs, ce, label in spans:
            content = utf8(l1[cs:ce])
            if mode == "rst" and label == "display":
                content = rst_content(content)
            scanned.append(FoundFormula(s, e, label, content))
    taken = _Spans([(f.start, f.end) for f in found.formulas]
                   + [(b.start, b.end) for b in blocks
                      if b.kind == "code" or (b.kind == "cell" and b.label == "code")])
    added = [f for f in scanned if not taken.hits(f.start, f.end)]
    if not math_blocks:
        raw_nb = path.lower().endswith(".ipynb") and not derived
        found.source = "notebook-json" if raw_nb else "scanner"
    else:
        found.source = "blocks+scanner" if added else "blocks"
    found.formulas = sorted(found.formulas + added, key=lambda f: (f.start, f.end))
    return found


__all__ = ["Found", "FoundFormula", "MATH_ENVS", "find_formulas", "is_math_block", "mode_for",
           "scan_notebook_json", "scan_text", "strip_delimiters"]
