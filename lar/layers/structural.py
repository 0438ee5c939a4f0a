"""``structural``: ast-grep patterns over the current files, parsed at query time (always current).

Query forms (a plain free-text query is NOT a pattern: ``default_query`` returns None and the
layer returns nothing for it, at once):
- ``{"structural": "open($A, $$$)"}`` at the engine (the layer receives the pattern string);
- ``{"structural": {"pattern": "open($A, $$$)", "lang": "python"}}``; optional ``context`` +
  ``selector`` (ast-grep's contextual pattern: code that makes the pattern parse, and the node
  kind in it to match, e.g. for Go ``fmt.Println($$$A)``, which tree-sitter-go reads as a type
  conversion when alone) and ``strictness`` (cst, smart, ast, relaxed, signature).
Without ``lang`` each file's language comes from its extension and files without a known one
are not searched. With ``lang`` that grammar is used for the files of that language and for
files whose extension names no language (scripts without extension, unusual extensions; a
``.h`` file counts as C++ too); narrow the scope to choose files precisely.

Hits are the matched nodes as byte spans (ast-grep counts characters; they are converted to
byte offsets exactly, also after non-ASCII text or bytes that are not UTF-8), with the captured
metavariables (``$A``, ``$$$ARGS``; names starting with ``_`` capture nothing) and their spans
in the evidence details and as sub-spans. Files are searched in path order, files of 256 KiB
or more last: ast-grep holds the GIL while it parses, so those are parsed in a worker process
that is killed at the deadline (``lar.layers.kits.code.sgproc``; a 10 MB file takes ~10 s),
and the run says which file was cut off. The layer checks the budget between files, stops at the pool size, and reports coverage = files searched /
files of the language. Errors (``QueryError``, naming the pattern or language): an unknown
language; a pattern ast-grep refuses in every language searched (empty, several nodes, ...);
a pattern that matched nothing in a complete scan and whose top node does not parse in any of
the languages (``def (``). A pattern refused in some languages only skips those
(``run.details["pattern_skipped_languages"]``).
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Iterable

from lar.layers.kits.code.langs import (SG_CHECKED, SG_EXTENSIONS, SG_EXTRA_CLAIMS, SG_LANGUAGES, extension,
                          normalize_sg_language, sg_language)
from lar.layers.kits.code.sgmatch import raw_matches
from lar.layers.kits.code.sgproc import PROCESS_BYTES, DeadlineHit, match_in_process
from lar.core.errors import QueryError, require
from lar.core.layer import BaseLayer, Budget, ScopeView, Unit
from lar.core.types import Hit, Span

CAPTURE_CHARS = 200
# the worker parsing a large file is killed this long before the layer's deadline, so that the
# layer still returns what it found, with its reason, before the orchestrator cancels it
WORKER_SLACK = 0.05
_METAVAR = re.compile(r"(\$+)([A-Z_][A-Z0-9_]*)")
_SURROGATE = re.compile("[\udc80-\udcff]")


STRICTNESS = frozenset({"cst", "smart", "ast", "relaxed", "signature"})


@dataclass(frozen=True)
class PatternQuery:
    pattern: str
    lang: str | None = None
    context: str | None = None    # surrounding code that makes the pattern parse ...
    selector: str | None = None   # ... and the node kind in it that is the pattern
    strictness: str | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pattern": self.pattern}
        for key in ("lang", "context", "selector", "strictness"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    def source(self) -> str:
        """The code ast-grep parses as the pattern."""
        return self.context or self.pattern

    def sg_pattern(self) -> str | dict[str, str]:
        """The ``pattern=`` argument of ast-grep's ``find_all``."""
        if not (self.context or self.selector or self.strictness):
            return self.pattern
        out = {"context": self.source()}
        if self.selector:
            out["selector"] = self.selector
        if self.strictness:
            out["strictness"] = self.strictness
        return out

    def metavariables(self) -> tuple[list[str], list[str]]:
        """(single, multi) capturing metavariable names of the pattern."""
        single, multi = [], []
        for dollars, name in _METAVAR.findall(self.source()):
            if name.startswith("_"):
                continue
            (multi if len(dollars) == 3 else single).append(name)
        return list(dict.fromkeys(single)), list(dict.fromkeys(multi))


_KEYS = ("pattern", "lang", "context", "selector", "strictness")


def parse_query(query: Any) -> PatternQuery | None:
    """A pattern string or ``{"pattern": ..., "lang": ..., "context": ..., "selector": ...,
    "strictness": ...}`` (all but ``pattern`` optional); None (no pattern) gives None."""
    if query is None or isinstance(query, PatternQuery):
        return query
    if isinstance(query, str):
        query = {"pattern": query}
    if not isinstance(query, dict) or "pattern" not in query or set(query) - set(_KEYS):
        raise QueryError("structural", "give an ast-grep pattern: {'structural': 'open($A, $$$)'} "
                                       f"or {{'pattern': ..., 'lang': 'python'}}; got {query!r}")
    pattern = query["pattern"]
    if not isinstance(pattern, str) or not pattern.strip():
        raise QueryError("structural", f"the pattern must be a non-empty string, got {pattern!r}")
    for key in _KEYS[2:]:
        val = query.get(key)
        if val is not None and (not isinstance(val, str) or not val.strip()):
            raise QueryError("structural", f"{key!r} must be a non-empty string, got {val!r}")
    strictness = query.get("strictness")
    if strictness is not None and strictness not in STRICTNESS:
        raise QueryError("structural", f"strictness must be one of {sorted(STRICTNESS)}, "
                                       f"got {strictness!r}")
    if query.get("context") and not query.get("selector"):
        raise QueryError("structural", "'context' needs a 'selector' (the node kind to match)")
    lang = query.get("lang")
    if lang is not None:
        norm = normalize_sg_language(lang) if isinstance(lang, str) else None
        if norm is None:
            raise QueryError("structural", f"unknown language {lang!r} for pattern {pattern!r}; "
                                           f"known: {', '.join(sorted(SG_LANGUAGES))}")
        lang = norm
    return PatternQuery(pattern.strip(), lang, query.get("context"), query.get("selector"),
                        strictness)


def _error_text(exc: BaseException) -> str:
    lines = []
    for ln in str(exc).splitlines():
        if ln.strip().lower().startswith("stack backtrace"):
            break
        if ln.strip():
            lines.append(ln.strip())
    return " ".join(lines)[:300] or type(exc).__name__


def pattern_error(q: PatternQuery, lang: str) -> str | None:
    """Why ast-grep refuses the pattern for ``lang`` (None when it compiles)."""
    sg = require("ast_grep_py", "code")
    try:
        sg.SgRoot("", lang).root().find_all(pattern=q.sg_pattern())
    except Exception as exc:
        return _error_text(exc)
    except BaseException as exc:  # a Rust panic surfaces as pyo3's PanicException
        if type(exc).__name__ != "PanicException":
            raise
        return _error_text(exc)
    return None


def syntax_problem(q: PatternQuery, lang: str) -> str | None:
    """Why the pattern cannot be code of ``lang`` (None if it can, or if unsure).

    ast-grep compiles such patterns but they match only the same broken code: the node it
    matches with (the pattern's single top node, ignoring wrappers) is an ERROR node. Patterns
    with errors deeper inside may still match, so only this case counts; and only for
    languages whose metavariables parse as identifiers here (ast-grep does the same with µ).
    """
    if lang not in SG_CHECKED or q.selector:
        return None
    sg = require("ast_grep_py", "code")
    node = sg.SgRoot(q.source().replace("$", "µ"), lang).root()
    while True:
        named = [c for c in node.children() if c.is_named()]
        if len(named) == 1 and named[0].text().strip() == node.text().strip():
            node = named[0]
        else:
            break
    if node.kind() != "ERROR":
        return None
    return f"it does not parse as {lang} (syntax error at column {node.range().start.column + 1})"


def byte_offsets(text: str, positions: Iterable[int]) -> dict[int, int]:
    """Map character offsets of ``text`` (decoded with surrogateescape) to byte offsets."""
    out: dict[int, int] = {}
    c = b = 0
    for p in sorted(set(positions)):
        b += len(text[c:p].encode("utf-8", errors="surrogateescape"))
        c = p
        out[p] = b
    return out


class StructuralLayer(BaseLayer):
    name = "structural"
    version = "1"
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "match"
    always_current = True
    query_format = ("ast-grep pattern via {'structural': 'open($A, $$$)'} or {'structural': "
                    "{'pattern': ..., 'lang': 'python', 'context': ..., 'selector': ...}}; plain "
                    "text is not a pattern (no hits)")
    cost = "no index; parses each file of the pattern's language in scope at query time"
    cost_rank = 40
    contract_queries = {"timebox": {"pattern": "float($A)"}}

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def default_query(self, query: str) -> Any:
        return None  # free text is not a pattern

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        q = parse_query(query)
        if q is None:
            budget.set_coverage(1.0)
            return []
        return await asyncio.to_thread(self._search, q, scope, budget)

    def files(self, q: PatternQuery, scope: ScopeView) -> list[tuple[Unit, str]]:
        """The units the pattern applies to, with their language (one per hash, path order)."""
        from lar.store.extract import DERIVED_KINDS, kind_for

        out, seen = [], set()
        for u in sorted(scope.units(), key=lambda u: u.path):
            if u.hash in seen or kind_for(u.path) in DERIVED_KINDS:
                continue
            inferred = sg_language(u.path)
            if q.lang is None:
                lang = inferred
            else:
                ext = extension(u.path)
                claimed = ext in SG_EXTRA_CLAIMS.get(q.lang, ()) or ext not in SG_EXTENSIONS
                lang = q.lang if inferred == q.lang or claimed else None
            if lang is not None:
                seen.add(u.hash)
                out.append((u, lang))
        return out

    def _search(self, q: PatternQuery, scope: ScopeView, budget: Budget) -> list[Hit]:
        sg = require("ast_grep_py", "code")
        # large files last: each is parsed in a worker process that the deadline may cut off
        todo = sorted(self.files(q, scope), key=lambda t: t[0].size >= PROCESS_BYTES)
        if not todo:
            budget.set_coverage(1.0)
            return []
        errors = {lang: pattern_error(q, lang) for lang in {lang for _, lang in todo}}
        if all(errors.values()):
            why = "; ".join(f"{lang}: {msg}" for lang, msg in sorted(errors.items()))
            raise QueryError("structural", f"invalid ast-grep pattern {q.pattern!r} ({why})")
        if any(errors.values()):
            budget.detail("pattern_skipped_languages", sorted(l for l, m in errors.items() if m))
        broken = {lang: syntax_problem(q, lang) for lang, err in errors.items() if not err}
        single, multi = q.metavariables()
        hits: list[Hit] = []
        done = 0
        for u, lang in todo:
            if budget.expired():
                budget.mark_partial()
                break
            if len(hits) >= budget.pool:
                budget.mark_partial(f"stopped after {budget.pool} matches (the pool); "
                                    "narrow the scope or the pattern for the rest")
                break
            done += 1
            if errors[lang]:
                continue
            try:
                data = self.ctx.reader.unit_text(u.hash, u.path)
            except Exception:  # changed or vanished since the scan: nothing to match
                continue
            try:
                found = self._matches(sg, data, lang, q, single, multi,
                                      budget.deadline - WORKER_SLACK)
            except DeadlineHit:  # a large file's parse was cut off at the deadline
                done -= 1
                budget.mark_partial(f"parsing {u.path} ({len(data):,} bytes) did not finish "
                                    "within the timebox; a longer timebox searches it")
                break
            for span, subs, details in found:
                hits.append(Hit.single(
                    self.name, Span(u.hash, *span), rank=len(hits) + 1, score=1.0,
                    score_kind="structural match (ast-grep)", query=q.describe(),
                    sub_spans=subs, details=details))
            budget.offer(hits)
        budget.set_coverage(done / len(todo))
        if not hits and broken and all(broken.values()):
            why = "; ".join(f"{lang}: {msg}" for lang, msg in sorted(broken.items()))
            if done == len(todo):  # matched nothing anywhere: say why rather than return []
                raise QueryError("structural", f"invalid ast-grep pattern {q.pattern!r}: it "
                                               f"matched nothing and its code is broken ({why})")
            budget.detail("pattern_syntax", why)
        return hits[: budget.pool]

    @staticmethod
    def _matches(sg, data: bytes, lang: str, q: PatternQuery, single: list[str],
                 multi: list[str], deadline: float | None = None
                 ) -> list[tuple[tuple[int, int], list[tuple[int, int]], dict]]:
        """The matches in ``data``: (span, capture sub-spans, details), byte offsets. A text of
        at least ``PROCESS_BYTES`` is parsed in a worker process killed at ``deadline``
        (``DeadlineHit``): ast-grep holds the GIL while it parses."""
        try:
            text = data.decode("utf-8")
            sg_text = text
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="surrogateescape")
            sg_text = _SURROGATE.sub("\ufffd", text)  # same length: offsets stay aligned
        try:
            if deadline is not None and len(data) >= PROCESS_BYTES:
                found = match_in_process(sg_text, lang, q.sg_pattern(), single, multi, deadline)
            else:
                found = raw_matches(sg, sg_text, lang, q.sg_pattern(), single, multi)
        except DeadlineHit:
            raise
        except Exception as exc:
            raise QueryError("structural", f"ast-grep failed on pattern {q.pattern!r} "
                                           f"({lang}): {_error_text(exc)}") from None
        if not found:
            return []
        caps_of = [[c for v in m["caps"].values() for c in (v if isinstance(v, list) else [v])]
                   for m in found]
        pos = [p for m, cs in zip(found, caps_of) for r in [m["r"]] + [c["r"] for c in cs]
               for p in r]
        to_b = {p: p for p in pos} if len(text) == len(data) else byte_offsets(text, pos)

        def span(r) -> tuple[int, int]:
            return to_b[r[0]], to_b[r[1]]

        def describe(c) -> dict[str, Any]:
            t = c["t"]
            return {"text": t if len(t) <= CAPTURE_CHARS else t[: CAPTURE_CHARS - 1] + "…",
                    "span": list(span(c["r"]))}

        out = []
        for m in found:
            subs, details = [], {}
            for key, v in m["caps"].items():
                if isinstance(v, list):
                    details[key] = [describe(c) for c in v]
                    subs += [span(c["r"]) for c in v]
                else:
                    details[key] = describe(v)
                    subs.append(span(v["r"]))
            subs = sorted({s for s in subs if s[1] > s[0]})
            out.append((span(m["r"]), subs, {"lang": lang, "captures": details}))
        return out
