"""Signatures and docstrings of tree-sitter definition nodes (used by ``lar.layers.kits.code.treesitter``).

The signature is the definition's text from its start (``export``/``template`` included,
decorators not) up to its body, whitespace collapsed. The docstring is Python's docstring, or
else the block of comments right above the definition (no blank line between; Rust attributes
and decorators may sit between), with comment markers removed.
"""
from __future__ import annotations

import ast
import inspect
import re

from lar.layers.kits.code import langs as L

SIGNATURE_CHARS = 300
DOC_CHARS = 4000
_WS = re.compile(r"\s+")


def text_of(node, data: bytes) -> str:
    """The source text of ``node``."""
    return data[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


def collapse(text: str, limit: int) -> str:
    """``text`` with whitespace runs as single spaces, cut to ``limit`` characters."""
    text = _WS.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_row(node) -> int:
    """0-based row of the last character of ``node`` (not the row after a final newline)."""
    row, col = node.end_point
    return row - 1 if col == 0 and row > node.start_point[0] else row


def signature(node, anchor, data: bytes, lang: str) -> str:
    """The definition's text up to its body (the whole text, cut at ``{``, when it has none)."""
    start = node.start_byte if anchor.type == "decorated_definition" else anchor.start_byte
    holder = node
    if node.type == "variable_declarator" and node.child_by_field_name("value") is not None:
        holder = node.child_by_field_name("value")
    body = holder.child_by_field_name("body")
    if body is not None and body.start_byte > start:
        end = start
        for c in holder.children:
            if c.start_byte >= body.start_byte:
                break
            if c.type not in L.COMMENTS:
                end = c.end_byte
        raw = data[start:end]
    else:
        raw = data[start:anchor.end_byte]
        if lang != "python" and b"{" in raw:
            raw = raw[: raw.index(b"{")]
    return collapse(raw.decode("utf-8", errors="replace"), SIGNATURE_CHARS)


def _python_docstring(node, data: bytes) -> str:
    body = node.child_by_field_name("body")
    if body is None:
        return ""
    first = next((c for c in body.named_children if c.type not in L.COMMENTS), None)
    if first is not None and first.type == "expression_statement" and first.named_child_count == 1:
        first = first.named_children[0]
    if first is None or first.type not in ("string", "concatenated_string"):
        return ""
    raw = text_of(first, data)
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = raw.strip("\"'rRuUbB")
    if not isinstance(value, str):
        return ""
    return inspect.cleandoc(value)[:DOC_CHARS]


def _clean_comment(parts: list[str]) -> str:
    lines: list[str] = []
    for p in parts:
        if p.startswith("/*"):
            body = p[2:-2] if p.endswith("*/") else p[2:]
            body = body.lstrip("*!")
            for ln in body.splitlines():
                ln = ln.strip()
                if ln.startswith("*"):
                    ln = ln[1:]
                lines.append(ln.rstrip())
        else:
            for ln in p.splitlines():
                ln = ln.strip()
                for marker in ("///", "//!", "//", "#"):
                    if ln.startswith(marker):
                        ln = ln[len(marker):]
                        break
                lines.append(ln.rstrip())
    return inspect.cleandoc("\n".join(lines)).strip()[:DOC_CHARS]


def _leading_comments(anchor, data: bytes) -> str:
    """The block of comments right above ``anchor`` (no blank line between), markers removed."""
    parts: list[str] = []
    cur, top = anchor, anchor.start_point[0]
    while True:
        prev = cur.prev_named_sibling
        if prev is None or last_row(prev) < top - 1:
            break
        if prev.type in L.ATTRIBUTES:
            cur, top = prev, prev.start_point[0]
            continue
        if prev.type not in L.COMMENTS:
            break
        before = prev.prev_sibling
        if before is not None and last_row(before) == prev.start_point[0] \
                and before.type not in L.COMMENTS:
            break  # a trailing comment of the code before it
        parts.append(text_of(prev, data))
        cur, top = prev, prev.start_point[0]
    parts.reverse()
    return _clean_comment(parts) if parts else ""


def docstring(node, anchor, data: bytes, lang: str) -> str:
    """Python's docstring of ``node``, else the comment block above ``anchor`` ('' if none)."""
    if lang == "python":
        doc = _python_docstring(node, data)
        if doc:
            return doc
    return _leading_comments(anchor, data)
