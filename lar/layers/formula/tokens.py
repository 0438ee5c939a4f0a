"""Raw LaTeX tokens: a command, an escaped symbol, a number, a parameter or one character, with
whitespace runs as ``" "`` and comments dropped (what macros and normalisation work on)."""
from __future__ import annotations

import re

from lar.layers.formula import tables as T

_TOKEN_RE = re.compile(
    r"(\\[A-Za-z@]+)[ \t]*\n?[ \t]*|(\\.)|(%[^\n]*)|(\s+)|(\d+(?:\.\d+)?)|(#\d)|(.)", re.S)


def tokenize(latex: str) -> list[str]:
    """Raw LaTeX tokens of ``latex`` (comments removed, whitespace runs as ``" "``)."""
    out: list[str] = []
    for m in _TOKEN_RE.finditer(latex):
        cmd, sym, comment, space, num, param, ch = m.groups()
        if cmd is not None:
            out.append(cmd)
        elif sym is not None:
            out.append(sym)
        elif comment is not None:
            continue
        elif space is not None:
            if out and out[-1] != " ":
                out.append(" ")
        elif num is not None:
            out.append(num)
        elif param is not None:
            out.append(param)
        else:
            mapped = T.UNICODE.get(ch)
            out.extend(mapped if mapped else (ch,))
    return out


__all__ = ["tokenize"]
