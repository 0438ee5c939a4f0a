"""The grep layer's query forms: a plain string (the phrase, then its words), ``{"regex": ...}``,
``{"literal": ...}`` or ``{"any": [...]}``, each with an optional ``case``; read into a frozen
:class:`GrepQuery` (the patterns ripgrep gets and how)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lar.core.errors import QueryError

_WORD_RE = re.compile(r"[\w][\w.\-]*[\w]|[\w]", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be by for from has have how in is it of on or that the this to was what "
    "when where which who why with does do did can not no".split()
)

@dataclass(frozen=True)
class GrepQuery:
    patterns: tuple[str, ...]
    regex: bool = False
    phrase: str | None = None
    case: str = "smart"

    def describe(self) -> dict[str, Any]:
        return {"patterns": list(self.patterns), "regex": self.regex, "case": self.case}


def query_words(text: str) -> list[str]:
    seen, out = set(), []
    for w in _WORD_RE.findall(text):
        lw = w.lower()
        if len(w) < 3 or lw in _STOP or lw in seen:
            continue
        seen.add(lw)
        out.append(w)
    return out


def parse_query(query: Any, *, default_form: bool = False) -> GrepQuery:
    if isinstance(query, GrepQuery):
        return query
    if isinstance(query, str):
        text = query.strip()
        if not text:
            raise QueryError("grep", "empty query; give some text or {'regex': ...}")
        if default_form:
            words = [w for w in query_words(text) if w != text]
            return GrepQuery(patterns=(text, *words), phrase=text)
        return GrepQuery(patterns=(text,), phrase=text)
    if isinstance(query, dict):
        case = query.get("case", "smart")
        if case not in ("smart", "sensitive", "insensitive"):
            raise QueryError("grep", f"case must be smart, sensitive or insensitive, got {case!r}")
        keys = {"regex", "literal", "any"} & set(query)
        unknown = set(query) - {"regex", "literal", "any", "case"}
        if len(keys) != 1 or unknown:
            raise QueryError(
                "grep", f"give exactly one of 'regex', 'literal', 'any' (and optionally 'case'); got {sorted(query)}")
        key = keys.pop()
        val = query[key]
        if key == "any":
            if not isinstance(val, (list, tuple)) or not val or not all(isinstance(v, str) and v for v in val):
                raise QueryError("grep", "'any' takes a non-empty list of non-empty strings")
            return GrepQuery(patterns=tuple(val), case=case)
        if not isinstance(val, str) or not val:
            raise QueryError("grep", f"{key!r} takes a non-empty string")
        return GrepQuery(patterns=(val,), regex=key == "regex", phrase=None if key == "regex" else val, case=case)
    raise QueryError("grep", f"cannot read a query of type {type(query).__name__}; give a string or a dict")
