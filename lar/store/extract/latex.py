"""LaTeX structure over the raw bytes: sections, atomic environments, formulas and includes.

The document text is the file itself (``derived=False``), so every block is a byte range of the
file. Structure is read from a *masked* copy of the bytes in which comments, verbatim bodies,
``\\verb``, URLs, ``\\iffalse`` regions and everything after ``\\end{document}`` are blanked
(same length, newlines kept), so offsets never shift. Only the body (from ``\\begin{document}``
when there is one) is scanned for sections, environments and formulas; the preamble only
contributes declarations and includes. Atomic environments: ``ATOMIC_ENVS`` (math, theorem-like,
proof, algorithm, verbatim), those declared by ``\\newtheorem`` & co. in the file or a file it
includes, ``\\newenvironment`` wrappers of atomic ones, and theorem-like names (``openproblem``,
``thm``) that are usually declared in another file.

Section levels follow LaTeX's own numbering: part -1, chapter 0, section 1, subsection 2,
subsubsection 3, paragraph 4, subparagraph 5. Unbalanced input never raises: well formed
pieces are kept and ``Document.notes`` says what was not.
"""
from __future__ import annotations

import posixpath
import re
from typing import Callable, Optional

from lar.store.extract.document import Block, Document

VERSION = "1"
Resolver = Optional[Callable[[str], Optional[bytes]]]

SECTION_LEVELS: dict[bytes, int] = {b"part": -1, b"chapter": 0, b"section": 1, b"subsection": 2,
                                    b"subsubsection": 3, b"paragraph": 4, b"subparagraph": 5}
# environments (without a trailing ``*``) that a chunker must never split
ATOMIC_ENVS: frozenset[str] = frozenset({
    "equation", "align", "alignat", "flalign", "gather", "multline", "eqnarray", "displaymath",
    "math", "dmath", "theorem", "lemma", "proposition", "corollary", "definition", "remark",
    "example", "proof", "conjecture", "claim", "fact", "observation", "axiom", "algorithm",
    "algorithmic", "algorithm2e", "verbatim", "Verbatim", "BVerbatim", "LVerbatim",
    "lstlisting", "minted",
})
# names that are theorem-like wherever they were declared (often in another file: the preamble
# of the main file): the usual words, as a suffix too (``maintheorem``, ``openproblem``), and
# the usual abbreviations
_THEOREM_LIKE = re.compile(
    r"[A-Za-z]*(?:theorem|lemma|proposition|corollary|definition|conjecture|problem|example|"
    r"remark|claim|observation|assumption|hypothesis|construction|exercise|axiom|notation|"
    r"question|proof)s?|thm|lem|lma|prop|cor|coro|defn|defi|dfn|rem|rmk|conj|exmp|exa|obs|prf"
    r"|clm", re.I)
_VERBATIM = rb"verbatim\*?|Verbatim\*?|BVerbatim|LVerbatim|lstlisting|minted|comment"
_MASK_RE = re.compile(rb"\\begin\s*\{(" + _VERBATIM + rb")\}|\\verb\*?([^A-Za-z*\s])"
                      rb"|\\(?:url|href)\s*\{|\\iffalse(?![A-Za-z@])|\\end\s*\{document\}|\\[\s\S]|%")
_FI_RE = re.compile(rb"\\fi(?![A-Za-z@])")
_ENV_RE = re.compile(rb"\\(begin|end)\s*\{([^{}\n]{1,80})\}")
_SEC_RE = re.compile(rb"\\(part|chapter|section|subsection|subsubsection|paragraph|subparagraph)"
                     rb"(?![A-Za-z@])\s*(\*)?\s*(?:\[[^\]\n]*\]\s*)?\{")
_DEFINING = re.compile(rb"(?:\\(?:re)?newcommand\*?|\\providecommand\*?|\\def|\\let\s*\\[A-Za-z@]+"
                       rb"\s*=?)\s*\{?\s*$")
_INC_RE = re.compile(rb"\\(input|include|subfile)(?![A-Za-z@])"
                     rb"(?:\s*\{([^{}\n]*)\}|[ \t]+([^\s{}%\\]+))")
_IMPORT_RE = re.compile(rb"\\(import|subimport|inputfrom|subinputfrom|includefrom|subincludefrom)"
                        rb"\*?\s*\{([^{}\n]*)\}\s*\{([^{}\n]*)\}")
_THM_RE = re.compile(rb"\\(?:newtheorem|renewtheorem|spnewtheorem|declaretheorem|newmdtheoremenv"
                     rb"|newtcbtheorem)\*?\s*(?:\[[^\]]*\]\s*)?\{([^{}\s]+)\}")
_WRAP_RE = re.compile(rb"\\(?:re)?newenvironment\*?\s*\{([^{}\s]+)\}\s*(?:\[[^\]]*\]\s*)*"
                      rb"\{\s*\\begin\s*\{([^{}]+)\}")
_MATH_TOK = re.compile(rb"\\[()\[\]]|\\[\s\S]|\$\$|\$|[{}]|\n(?=[ \t\r]*\n)")
_DOC_BEGIN = re.compile(rb"\\begin\s*\{document\}")
_DOC_END = re.compile(rb"\\end\s*\{document\}")
_BLANK = bytes(10 if i == 10 else 32 for i in range(256))
_MAX_NOTES = 20


def line_of(buf: bytes | bytearray, pos: int) -> int:
    """1-based line number of byte ``pos``."""
    return buf.count(b"\n", 0, pos) + 1


def escaped(buf: bytes | bytearray, i: int) -> bool:
    """True when the backslash at ``i`` is itself escaped (an odd run of backslashes before it)."""
    n = 0
    while i - n - 1 >= 0 and buf[i - n - 1] == 0x5C:
        n += 1
    return n % 2 == 1


def blank_out(out: bytearray, a: int, b: int) -> None:
    """Replace ``out[a:b]`` by spaces, keeping newlines (offsets and lines stay put)."""
    if b > a:
        out[a:b] = bytes(out[a:b]).translate(_BLANK)


def mask(text: bytes, notes: list[str]) -> bytearray:
    """Copy of ``text`` with comments, verbatim bodies, ``\\verb``, URLs, ``\\iffalse`` regions and
    everything after ``\\end{document}`` replaced by spaces (newlines kept)."""
    out = bytearray(text)
    n, pos = len(text), 0
    while (m := _MASK_RE.search(text, pos)) is not None:
        tok, a = m.group(0), m.start()
        pos = m.end()
        if tok == b"%":
            eol = text.find(b"\n", a)
            pos = n if eol < 0 else eol
            blank_out(out, a, pos)
        elif m.group(1) is not None:
            end = re.compile(rb"\\end\s*\{" + re.escape(m.group(1)) + rb"\}").search(text, pos)
            stop = n if end is None else end.start()
            if end is None:
                notes.append(f"unclosed \\begin{{{m.group(1).decode()}}} at line {line_of(text, a)}")
            blank_out(out, pos, stop)
            pos = stop
        elif m.group(2) is not None or tok.startswith((b"\\url", b"\\href")):
            d = m.group(2) or b""  # \verb delimiters are blanked too, URL braces stay
            close, eol = text.find(d or b"}", pos), text.find(b"\n", pos)
            if close >= 0 and (eol < 0 or close < eol):
                blank_out(out, pos - len(d), close + len(d))
                pos = close + len(d)
        elif tok.startswith(b"\\iffalse"):
            fi = _FI_RE.search(text, pos)
            if fi is not None:
                blank_out(out, pos, fi.start())
                pos = fi.end()
        elif tok.startswith(b"\\end"):
            blank_out(out, pos, n)
            pos = n
    return out


def find_formulas(buf: bytes | bytearray, lo: int, hi: int, notes: list[str], *,
                  brackets: bool = True, pandoc: bool = False) -> list[Block]:
    """Formula blocks for ``$..$``, ``$$..$$`` and (``brackets``) ``\\(..\\)``, ``\\[..\\]`` in
    ``buf[lo:hi]`` (already masked). Escaped ``\\$`` is no delimiter; a formula cannot span a blank
    line (TeX forbids a paragraph break in math), so an unclosed one is dropped with a note and
    scanning resynchronises. ``$`` inside braces opened within a formula (``\\text{$x$}``) nests.
    ``pandoc`` applies Pandoc's rule for inline ``$`` (no space after the opening, none before
    the closing, no digit right after it) so that prices like $5 are not math."""
    blocks: list[Block] = []
    mode: bytes | None = None
    open_at = depth = open_depth = 0

    def close(end: int, label: str) -> None:
        blocks.append(Block(open_at, end, "formula", label, atomic=True))

    def unclosed(where: int) -> None:
        notes.append(f"unclosed math {mode.decode()} at line {line_of(buf, open_at)}"
                     f" (dropped at line {line_of(buf, where)})")

    for m in _MATH_TOK.finditer(buf, lo, hi):
        t, i = m.group(0), m.start()
        if t == b"{":
            depth += 1
        elif t == b"}":
            depth -= 1
        elif t == b"\n":
            if mode is not None:
                unclosed(i)
                mode = None
        elif mode is None:
            if t == b"$" and pandoc and (i + 1 >= hi or buf[i + 1] in b" \t\r\n"):
                continue
            if t in (b"$", b"$$") or (brackets and t in (b"\\(", b"\\[")):
                mode, open_at, open_depth = t, i, depth
        elif mode == b"$" and t in (b"$", b"$$"):
            if depth > open_depth:
                continue
            if pandoc and (buf[i - 1] in b" \t\r\n" or (i + 1 < hi and 0x30 <= buf[i + 1] <= 0x39)):
                continue
            close(i + 1, "inline")
            mode = None
            if t == b"$$":  # ``$a$$b$``: the second dollar opens the next formula
                mode, open_at, open_depth = b"$", i + 1, depth
        elif (mode == b"$$" and t == b"$$" and depth <= open_depth) \
                or (mode == b"\\[" and t == b"\\]"):
            close(m.end(), "display")
            mode = None
        elif mode == b"\\(" and t == b"\\)":
            close(m.end(), "inline")
            mode = None
    if mode is not None:
        unclosed(hi)
    return blocks


def _brace_arg(buf: bytes | bytearray, open_pos: int, limit: int = 4000) -> int:
    """Index just past the ``}`` matching the ``{`` at ``open_pos``, or -1."""
    depth, i, stop = 0, open_pos, min(len(buf), open_pos + limit)
    while i < stop:
        c = buf[i]
        if c == 0x5C:
            i += 2
            continue
        if c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _label(raw: bytes) -> str:
    return " ".join(raw.decode("utf-8", errors="replace").split())


def _include_candidates(path: str, name: str, here_only: bool) -> list[str]:
    """Paths to try for an included ``name``: the including file's folder first, then (as TeX
    resolves from the main file's folder) each folder above it; ``.tex`` added when missing."""
    name = name.strip().strip('"').strip()
    names = [name + ".tex"] if not posixpath.splitext(name)[1] else [name, name + ".tex"]
    folders, d = [], posixpath.dirname(path)
    while True:
        folders.append(d)
        if d in ("", "/") or here_only:
            break
        d = posixpath.dirname(d)
    out: list[str] = []
    for folder in folders:
        for nm in names:
            rel = posixpath.normpath(posixpath.join(folder, nm))
            if rel not in out:
                out.append(rel)
    return out


def _includes(path: str, buf: bytes | bytearray, resolve: Resolver
              ) -> tuple[list[Block], list[bytes]]:
    """Include blocks (level 1 when ``resolve`` found the file) and the included files' bytes."""
    found: list[tuple[int, int, str, bool]] = []
    for m in _INC_RE.finditer(buf):
        if not escaped(buf, m.start()):
            name = (m.group(2) if m.group(2) is not None else m.group(3)).decode("utf-8", "replace")
            found.append((m.start(), m.end(), name, False))
    for m in _IMPORT_RE.finditer(buf):
        if not escaped(buf, m.start()):
            name = posixpath.join(m.group(2).decode("utf-8", "replace").strip(),
                                  m.group(3).decode("utf-8", "replace").strip())
            found.append((m.start(), m.end(), name, m.group(1).startswith(b"sub")))
    blocks, datas = [], []
    for start, end, name, here_only in found:
        if not name.strip() or "#" in name:
            continue
        cands = _include_candidates(path, name, here_only)
        label, hit = cands[0], False
        for rel in cands if resolve is not None else ():
            try:
                data = resolve(rel)
            except Exception:
                data = None
            if data is not None:
                label, hit = rel, True
                datas.append(data)
                break
        blocks.append(Block(start, end, "include", label, level=1 if hit else 0))
    return blocks, datas


def theorem_names(buf: bytes | bytearray) -> set[str]:
    """Environment names declared with ``\\newtheorem`` (and thmtools/mdframed/tcolorbox kin)."""
    return {m.group(1).decode("utf-8", "replace") for m in _THM_RE.finditer(buf)
            if not escaped(buf, m.start())}


def is_atomic_env(name: str, known: set[str] | frozenset[str] = ATOMIC_ENVS) -> bool:
    """Whether environment ``name`` (a trailing ``*`` ignored) must never be split: a known or
    declared name, or a theorem-like one by ``_THEOREM_LIKE``."""
    base = name.rstrip("*")
    return base in known or _THEOREM_LIKE.fullmatch(base) is not None


def wrapper_names(buf: bytes | bytearray, atomic: set[str]) -> set[str]:
    """Environments defined by ``\\newenvironment{x}{\\begin{y}...}`` around an atomic ``y``."""
    return {m.group(1).decode("utf-8", "replace") for m in _WRAP_RE.finditer(buf)
            if is_atomic_env(m.group(2).decode("utf-8", "replace").strip(), atomic)}


def _environments(buf: bytes | bytearray, lo: int, hi: int, atomic: set[str],
                  notes: list[str]) -> list[Block]:
    blocks: list[Block] = []
    stack: list[tuple[str, int]] = []
    for m in _ENV_RE.finditer(buf, lo, hi):
        if escaped(buf, m.start()):
            continue
        name = m.group(2).decode("utf-8", "replace").strip()
        if m.group(1) == b"begin":
            stack.append((name, m.start()))
            continue
        if not any(n == name for n, _ in stack):
            notes.append(f"stray \\end{{{name}}} at line {line_of(buf, m.start())}")
            continue
        while stack[-1][0] != name:
            lost, at = stack.pop()
            notes.append(f"unclosed \\begin{{{lost}}} at line {line_of(buf, at)}")
        _, start = stack.pop()
        blocks.append(Block(start, m.end(), "environment", name,
                            atomic=is_atomic_env(name, atomic)))
    for lost, at in stack:
        notes.append(f"unclosed \\begin{{{lost}}} at line {line_of(buf, at)}")
    return blocks


def _sections(buf: bytes | bytearray, lo: int, hi: int, end: int) -> list[Block]:
    heads: list[tuple[int, int, str]] = []
    for m in _SEC_RE.finditer(buf, lo, hi):
        a = m.start()
        if escaped(buf, a) or _DEFINING.search(bytes(buf[max(0, a - 60):a])):
            continue
        close = _brace_arg(buf, m.end() - 1)
        if close < 0:
            continue
        heads.append((a, SECTION_LEVELS[m.group(1)], _label(bytes(buf[m.end():close - 1]))))
    return nest_sections(heads, end)


def nest_sections(heads: list[tuple[int, int, str]], end: int) -> list[Block]:
    """Section blocks from ``(start, level, title)``: each ends at the next heading of the same
    or a higher level (a lower or equal number), else at ``end``."""
    return [Block(a, next((b for b, lv, _ in heads[k + 1:] if lv <= level), end), "section",
                  title, level=level) for k, (a, level, title) in enumerate(heads)]


def extract_latex(path: str, data: bytes, resolve: Resolver = None) -> Document:
    """Structure of a LaTeX file; see the module docstring."""
    notes: list[str] = []
    buf = mask(data, notes)
    n = len(data)
    inc_blocks, included = _includes(path, buf, resolve)
    atomic = set(ATOMIC_ENVS) | theorem_names(buf)
    for other in included:
        atomic |= theorem_names(mask(other, []))
    atomic |= wrapper_names(buf, atomic)
    blocks: list[Block] = list(inc_blocks)
    if not path.lower().endswith((".sty", ".cls")):
        begin = _DOC_BEGIN.search(buf)
        lo = begin.start() if begin is not None and not escaped(buf, begin.start()) else 0
        end_doc = _DOC_END.search(buf, lo)
        sec_end = end_doc.start() if end_doc is not None else n
        blocks += _environments(buf, lo, n, atomic, notes)
        blocks += find_formulas(buf, lo, n, notes)
        blocks += _sections(buf, lo, n, sec_end)
    blocks.sort(key=lambda b: (b.start, -b.end, b.kind))
    if len(notes) > _MAX_NOTES:
        notes = notes[:_MAX_NOTES] + [f"... and {len(notes) - _MAX_NOTES} more"]
    return Document(kind="latex", text=data, derived=False, blocks=tuple(blocks),
                    notes=tuple(notes))
