"""Macro definitions of one unit: ``\\newcommand``, ``\\renewcommand``, ``\\providecommand``,
``\\DeclareRobustCommand``, ``\\DeclareMathOperator``, ``\\def`` (undelimited ``#1#2..``
parameters only) and ``\\let``.

``parse_macros(text)`` returns the macros by name and the character ranges of their definitions
(so a scanner can skip a ``$`` inside a definition body). Offsets are indices into ``text``;
callers that need byte offsets pass bytes decoded as Latin-1, where they coincide. Later
definitions win, as in TeX. Anything malformed is skipped, never raised.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from lar.layers.formula.tokens import tokenize as raw_tokens

MAX_BODY_CHARS = 20_000

_DEF_RE = re.compile(r"\\(newcommand|renewcommand|providecommand|DeclareRobustCommand|"
                     r"DeclareMathOperator|def|gdef|edef|xdef|let)(?![A-Za-z])\*?")
_NAME_RE = re.compile(r"\s*(?:\{\s*(\\(?:[A-Za-z@]+|.))\s*\}|(\\(?:[A-Za-z@]+|.)))")
_OPT_RE = re.compile(r"\s*\[([^\]]*)\]")
_PARAMS_RE = re.compile(r"((?:#\d)*)\s*\{")
_UNEXPANDABLE = frozenset(
    "\\@ifnextchar \\futurelet \\expandafter \\csname \\ifx \\if \\ifdim \\ifnum \\else "
    "\\fi \\@ifstar \\afterassignment \\begingroup \\endgroup \\aftergroup".split())
_COMMENT_RE = re.compile(r"(?<!\\)((?:\\\\)*)%[^\n]*")
_LET_RE = re.compile(r"\s*(\\[A-Za-z@]+)\s*=?\s*(\\(?:[A-Za-z@]+|.)|[^\s\\])")


@dataclass(frozen=True, slots=True)
class Macro:
    """A macro: ``\\name`` with ``nargs`` arguments; ``default`` (raw tokens) when the first
    argument is optional; ``body`` as raw tokens with ``#1``.. placeholders."""

    name: str
    nargs: int
    default: tuple[str, ...] | None
    body: tuple[str, ...]


def _same(s: str) -> str:
    return s


def read_group(text: str, i: int, limit: int = MAX_BODY_CHARS) -> tuple[str, int] | None:
    """The content of the balanced ``{...}`` starting at ``text[i]`` and the index after it."""
    if i >= len(text) or text[i] != "{":
        return None
    depth, j, end = 0, i, min(len(text), i + limit)
    while j < end:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j], j + 1
        j += 1
    return None


def mask_comments(text: str) -> str:
    """``text`` with LaTeX ``%`` comments blanked out (same length, so offsets still hold)."""
    def blank(m: re.Match) -> str:
        return m.group(1) + " " * (len(m.group(0)) - len(m.group(1)))

    return _COMMENT_RE.sub(blank, text)


def _parse_one(text: str, m: re.Match, fix: Callable[[str], str]) -> tuple[Macro, int] | None:
    def tokenize(s: str) -> list[str]:
        return raw_tokens(fix(s))

    kind, pos = m.group(1), m.end()
    if kind == "let":
        lm = _LET_RE.match(text, pos)
        if not lm:
            return None
        return Macro(lm.group(1), 0, None, (lm.group(2),)), lm.end()
    nm = _NAME_RE.match(text, pos)
    if not nm:
        return None
    name = nm.group(1) or nm.group(2)
    pos = nm.end()
    nargs, default = 0, None
    if kind.endswith("def"):
        pm = _PARAMS_RE.match(text, pos)
        if not pm:
            return None  # delimited parameters (\def\a#1.{..}) are not supported
        nargs = len(pm.group(1)) // 2
        pos = pm.end() - 1
    elif kind == "DeclareMathOperator":
        pass
    else:
        om = _OPT_RE.match(text, pos)
        if om:
            try:
                nargs = int(om.group(1).strip())
            except ValueError:
                return None
            pos = om.end()
            dm = _OPT_RE.match(text, pos)
            if dm:
                default = tuple(tokenize(dm.group(1)))
                pos = dm.end()
    while pos < len(text) and text[pos].isspace():
        pos += 1
    grp = read_group(text, pos)
    if grp is None:
        return None
    body_text, end = grp
    if kind == "DeclareMathOperator":
        body = ("\\operatorname", "{", *tokenize(body_text), "}")
    else:
        body = tuple(tokenize(body_text))
    return Macro(name, max(0, min(nargs, 9)), default, body), end


def parse_macros(text: str, *, latex_comments: bool = True, fix: Callable[[str], str] | None = None,
                 ) -> tuple[dict[str, Macro], list[tuple[int, int]]]:
    """All macro definitions in ``text``: ``({name: Macro}, [(start, end) of each definition])``.

    ``latex_comments``: blank ``%`` comments first (LaTeX sources); ``fix`` turns a body's text
    into real text before it is tokenised (e.g. Latin-1-decoded bytes back to UTF-8)."""
    if "\\" not in text:
        return {}, []
    src = mask_comments(text) if latex_comments else text
    macros: dict[str, Macro] = {}
    spans: list[tuple[int, int]] = []
    for m in _DEF_RE.finditer(src):
        if spans and m.start() < spans[-1][1]:
            continue  # inside the body of the previous definition
        try:
            got = _parse_one(src, m, fix or _same)
        except (ValueError, IndexError):
            got = None
        if got is None:
            continue
        macro, end = got
        spans.append((m.start(), end))
        if macro.name in macro.body or _UNEXPANDABLE & set(macro.body):
            macros.pop(macro.name, None)  # recursive or control flow: kept as an opaque command
            continue
        macros[macro.name] = macro
    return macros, spans


def strip_definitions(text: str) -> str:
    """``text`` without the macro definitions in it (``$\\newcommand{\\R}{..}$`` in Markdown)."""
    if "\\" not in text:
        return text
    _, spans = parse_macros(text, latex_comments=False)
    for start, end in reversed(spans):
        text = text[:start] + " " + text[end:]
    return text


__all__ = ["Macro", "mask_comments", "parse_macros", "read_group", "strip_definitions"]
