"""Definitions and call sites of one source file, read with tree-sitter.

``extract(data, lang)`` parses the bytes with the ``tree-sitter-language-pack`` grammar named
``lang`` and runs that language's query (``lar.layers.kits.code.langs.QUERIES``). It returns every
definition (kind, name, qualified name such as ``Class.method``, signature up to the body,
docstring or leading comment block, byte span including decorators/export/template wrappers,
1-based lines, enclosing definition) and every call site (callee name, callee text, byte span
of the call expression, enclosing definition). A file with syntax errors still yields what
parsed. tree-sitter is imported lazily (``lar[code]``); parsers are kept per thread.
"""
from __future__ import annotations

import bisect
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from lar.core.errors import require
from lar.layers.kits.code import langs as L
from lar.layers.kits.code.docs import collapse, docstring, last_row, signature, text_of

CALLEE_CHARS = 120
_IDENT = re.compile(r"[\w$~]+", re.UNICODE)
_GENERICS = (re.compile(r"<[^<>]*>"), re.compile(r"\[[^\[\]]*\]"))

_queries: dict[str, Any] = {}
_query_lock = threading.Lock()
_local = threading.local()


@dataclass
class Definition:
    kind: str
    name: str
    qualified: str
    signature: str
    doc: str
    start: int
    end: int
    lines: tuple[int, int]
    parent: int = -1  # index of the enclosing definition in the same file, -1 at top level


@dataclass
class CallSite:
    name: str      # the called name (last identifier of the callee): ``join`` for os.path.join
    callee: str    # the callee expression as written (whitespace collapsed, capped)
    start: int     # span of the whole call expression
    end: int
    enclosing: int = -1  # index of the innermost enclosing definition, -1 at top level


@dataclass
class Extraction:
    lang: str
    defs: list[Definition] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    errors: bool = False

    def to_json(self) -> dict[str, Any]:
        """Compact JSON form (calls as lists ``[name, callee, start, end, enclosing]``)."""
        return {"lang": self.lang, "errors": self.errors,
                "defs": [{"kind": d.kind, "name": d.name, "qualified": d.qualified,
                          "signature": d.signature, "doc": d.doc, "start": d.start, "end": d.end,
                          "lines": list(d.lines), "parent": d.parent} for d in self.defs],
                "calls": [[c.name, c.callee, c.start, c.end, c.enclosing] for c in self.calls]}


@dataclass
class _Entry:
    node: Any
    anchor: Any
    kind: str
    name: str
    qualifier: str
    emit: bool
    parent: int = -1
    qualified: str = ""


def _query(lang: str):
    with _query_lock:
        q = _queries.get(lang)
        if q is None:
            ts = require("tree_sitter", "code")
            pack = require("tree_sitter_language_pack", "code")
            q = _queries[lang] = ts.Query(pack.get_language(lang), L.QUERIES[lang])
        return q


def _parser(lang: str):
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    p = parsers.get(lang)
    if p is None:
        pack = require("tree_sitter_language_pack", "code")
        p = parsers[lang] = pack.get_parser(lang)
    return p


def parse(data: bytes, lang: str, fallback: str | None = None):
    """Parse ``data``; when it has errors and ``fallback`` parses it cleanly, use that grammar.
    Returns (tree, grammar used)."""
    tree = _parser(lang).parse(data)
    if fallback and tree.root_node.has_error:
        alt = _parser(fallback).parse(data)
        if not alt.root_node.has_error:
            return alt, fallback
    return tree, lang


def extract(data: bytes, lang: str, fallback: str | None = None) -> Extraction:
    """Definitions and call sites of ``data`` (source bytes) in grammar ``lang``."""
    ts = require("tree_sitter", "code")
    tree, lang = parse(data, lang, fallback)
    root = tree.root_node
    caps = ts.QueryCursor(_query(lang)).captures(root)
    entries: list[_Entry] = []
    seen: set[tuple[int, int, str]] = set()
    for cap, nodes in caps.items():
        if not cap.startswith(("def.", "scope.")):
            continue
        emit, kind = cap.startswith("def."), cap.split(".", 1)[1]
        for node in nodes:
            key = (node.start_byte, node.end_byte, node.type)
            if key in seen:
                continue
            seen.add(key)
            named = _name(node, data, lang)
            if named is None:
                continue
            entries.append(_Entry(node, _anchor(node), _refine_kind(node, kind), named[0],
                                  named[1], emit))
    _nest(entries, lang)
    out = Extraction(lang=lang, errors=bool(root.has_error))
    index_of: dict[int, int] = {}
    for i, e in enumerate(entries):
        if not e.emit:
            continue
        p = e.parent
        while p >= 0 and not entries[p].emit:
            p = entries[p].parent
        index_of[i] = len(out.defs)
        a = e.anchor
        out.defs.append(Definition(
            kind=e.kind, name=e.name, qualified=e.qualified,
            signature=signature(e.node, a, data, lang), doc=docstring(e.node, a, data, lang),
            start=a.start_byte, end=a.end_byte, lines=(a.start_point[0] + 1, last_row(a) + 1),
            parent=index_of.get(p, -1)))
    out.calls = _calls(caps.get("call", []), data, out.defs)
    return out


# -- names and nesting ----------------------------------------------------------------------
def _strip_generics(text: str) -> str:
    for rx in _GENERICS:
        prev = None
        while prev != text:
            prev, text = text, rx.sub("", text)
    return text.strip().lstrip("*&").strip()


def _split_qualified(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in _strip_generics(text).split("::") if p.strip()]
    if not parts:
        return text.strip(), ""
    return parts[-1], ".".join(parts[:-1])


def _name(node, data: bytes, lang: str) -> tuple[str, str] | None:
    """(name, explicit qualifier) of a definition node, or None for anonymous ones."""
    t = node.type
    if t == "impl_item":
        ty = node.child_by_field_name("type")
        return (_split_qualified(text_of(ty, data))[0], "") if ty is not None else None
    n = node.child_by_field_name("name")
    if n is not None:
        name = text_of(n, data).strip()
        qualifier = ""
        if t == "method_declaration" and lang == "go":
            recv = node.child_by_field_name("receiver")
            types = [c.child_by_field_name("type") for c in (recv.named_children if recv else [])]
            types = [x for x in types if x is not None]
            if types:
                qualifier = _strip_generics(text_of(types[0], data))
        if "::" in name:
            name, q2 = _split_qualified(name)
            qualifier = ".".join(x for x in (qualifier, q2) if x)
        return (name, qualifier) if name else None
    d = node.child_by_field_name("declarator")
    while d is not None and d.type in L.DECLARATORS:
        d = d.child_by_field_name("declarator")
    if d is not None and t == "function_definition":
        name, qualifier = _split_qualified(text_of(d, data))
        return (name, qualifier) if name else None
    p = node.parent
    if p is not None and p.type == "type_definition":  # typedef struct { ... } name_t;
        decl = p.child_by_field_name("declarator")
        if decl is not None:
            return text_of(decl, data).strip(), ""
    return None


def _refine_kind(node, kind: str) -> str:
    if node.type == "type_spec":
        ty = node.child_by_field_name("type")
        if ty is not None and ty.type == "struct_type":
            return "struct"
        if ty is not None and ty.type == "interface_type":
            return "interface"
    return kind


def _anchor(node):
    """The outermost node that wraps only this definition (decorators, export, template)."""
    a = node
    while True:
        p = a.parent
        if p is None:
            return a
        if p.type in L.WRAPPERS:
            if p.type == "type_definition" and p.child_by_field_name("type") != a:
                return a
            a = p
        elif p.type in L.SINGLE_WRAPPERS and p.named_child_count == 1:
            a = p
        else:
            return a


def _nest(entries: list[_Entry], lang: str) -> None:
    """Sort by position, give each entry its enclosing entry, kind 'method' and qualified name."""
    entries.sort(key=lambda e: (e.anchor.start_byte, -e.anchor.end_byte))
    namespaces = {e.name for e in entries if e.kind in ("namespace", "module")}
    stack: list[int] = []
    for i, e in enumerate(entries):
        s, t = e.anchor.start_byte, e.anchor.end_byte
        while stack and not (entries[stack[-1]].anchor.end_byte >= t
                             and entries[stack[-1]].anchor.start_byte <= s):
            stack.pop()
        e.parent = stack[-1] if stack else -1
        parent = entries[e.parent] if e.parent >= 0 else None
        if e.kind == "function":
            if parent is not None and parent.kind in L.CLASS_LIKE:
                e.kind = "method"
            elif e.qualifier and lang == "cpp" and e.qualifier.rsplit(".", 1)[-1] not in namespaces:
                e.kind = "method"  # void Shape::area() { ... } outside the class body
        prefix = parent.qualified + "." if parent is not None else ""
        e.qualified = prefix + (e.qualifier + "." if e.qualifier else "") + e.name
        stack.append(i)


# -- call sites -----------------------------------------------------------------------------
def _last_name(node, data: bytes) -> str | None:
    for _ in range(16):
        f = L.MEMBER_FIELD.get(node.type)
        nxt = node.child_by_field_name(f) if f else None
        if nxt is None:
            break
        node = nxt
    names = [m for m in _IDENT.findall(text_of(node, data)) if not m[0].isdigit()]
    return names[-1] if names else None


def _calls(nodes, data: bytes, defs: list[Definition]) -> list[CallSite]:
    starts = [d.start for d in defs]
    out: list[CallSite] = []
    for n in nodes:
        fname = L.CALLEE_FIELD.get(n.type)
        callee = n.child_by_field_name(fname) if fname else None
        if callee is None:
            continue
        name = _last_name(callee, data)
        if not name:
            continue
        text = collapse(text_of(callee, data), CALLEE_CHARS)
        if n.type == "method_invocation":
            obj = n.child_by_field_name("object")
            text = collapse(text_of(obj, data) + "." + name, CALLEE_CHARS) if obj is not None else name
        elif n.type == "macro_invocation":
            text += "!"
        s, e = n.start_byte, n.end_byte
        # innermost definition containing the call: the last one starting before it, or an
        # ancestor of that one
        i = bisect.bisect_right(starts, s) - 1
        while i >= 0 and not (defs[i].start <= s and e <= defs[i].end):
            i = defs[i].parent
        out.append(CallSite(name, text, s, e, i))
    out.sort(key=lambda c: (c.start, c.end))
    return out
