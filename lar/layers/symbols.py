"""``symbols``: tree-sitter definitions and call sites, built lazily per unit.

For each source file (Python, JavaScript, TypeScript/TSX, Go, Rust, Java, C, C++, chosen by
extension) the layer records every definition (kind, name, qualified name such as
``Class.method``, signature, docstring or leading comment block, byte span) and every call site
(callee name and span); see ``lar.layers.kits.code.treesitter``. Files in other languages are skipped with
the reason ``no grammar for .xyz`` (shown in the status); a file with syntax errors yields what
parsed.

Query forms:
- a plain string, or ``{"definition": "name"}``: definitions of that name; exact matches of the
  name or qualified name (``Engine.search``, or its tail) first, then case-insensitive ones,
  then fuzzy (rapidfuzz) matches of the (last) name, at least ``min_score`` (default 85) of
  100: names within that ratio of it (typos) or containing it;
- ``{"kind": "class", "name": "..."}``: the same, only definitions of that kind (``name`` may be
  left out to list them all);
- ``{"callers": "name"}``: the call sites of ``name`` (``os.path.join`` narrows to callees
  written that way); the hit is the call expression, the enclosing definition is in the
  evidence details.
Hits of definitions span the whole definition (decorators included). ``context_for`` adds the
innermost enclosing definition of any hit from any layer (for built units) as
``context["symbol"]``.
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from lar.core.building import BuildingLayer, SkipUnit
from lar.layers.kits.code.langs import FALLBACK_GRAMMAR, extension, symbol_language
from lar.layers.kits.code.symstore import SymbolStore, innermost
from lar.layers.kits.code.treesitter import extract
from lar.core.errors import QueryError
from lar.core.layer import Budget, ScopeView, Unit
from lar.core.types import Hit, Span

KINDS = frozenset({"function", "method", "constructor", "class", "struct", "union", "interface",
                   "trait", "enum", "type", "namespace", "module", "macro"})
MAX_BYTES = 4 * 1024 * 1024
MIN_FUZZY_SCORE = 85.0
EXACT, FOLDED = 100.0, 95.0
DETAIL_DOC_CHARS = 300
SCORE_KIND = "name match: 100 exact, 95 case-insensitive, else rapidfuzz WRatio (0-100)"


@dataclass(frozen=True)
class SymbolQuery:
    mode: str               # "definition" or "callers"
    name: str | None
    kind: str | None = None
    min_score: float = MIN_FUZZY_SCORE

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {self.mode: self.name} if self.name else {}
        if self.kind:
            out["kind"] = self.kind
        if self.mode == "definition" and self.name:
            out["min_score"] = self.min_score
        return out


def parse_query(query: Any) -> SymbolQuery:
    """Read a query of the symbols layer (see the module docstring) or raise QueryError."""
    def need_text(key: str, val: Any) -> str:
        if not isinstance(val, str) or not val.strip():
            raise QueryError("symbols", f"{key!r} takes a non-empty name, got {val!r}")
        return val.strip()

    if isinstance(query, SymbolQuery):
        return query
    if isinstance(query, str):
        return SymbolQuery("definition", need_text("query", query))
    if not isinstance(query, dict):
        raise QueryError("symbols", f"give a name or a dict, not {type(query).__name__}")
    extra = set(query) - {"definition", "name", "callers", "kind", "min_score"}
    modes = [k for k in ("definition", "name", "callers") if k in query]
    if extra or len(modes) > 1 or (not modes and "kind" not in query):
        raise QueryError("symbols", "give {'definition': name}, {'callers': name} or "
                                    f"{{'kind': ..., 'name': ...}} (optional 'min_score'); got {query!r}")
    kind = query.get("kind")
    if kind is not None and kind not in KINDS:
        raise QueryError("symbols", f"unknown kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")
    ms = query.get("min_score", MIN_FUZZY_SCORE)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 <= ms <= 100:
        raise QueryError("symbols", f"min_score must be a number in [0, 100], got {ms!r}")
    if modes and modes[0] == "callers":
        if kind is not None:
            raise QueryError("symbols", "'kind' filters definitions; it does not apply to 'callers'")
        return SymbolQuery("callers", need_text("callers", query["callers"]))
    name = need_text(modes[0], query[modes[0]]) if modes else None
    return SymbolQuery("definition", name, kind, float(ms))


def _dotted(name: str) -> str:
    return name.replace("::", ".").replace("->", ".")


class SymbolsLayer(BuildingLayer):
    name = "symbols"
    version = "1"
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "symbol"
    query_format = ("a symbol name (exact, then case-insensitive, then fuzzy; qualified names "
                    "like Class.method); {'definition': name}; {'callers': name}; "
                    "{'kind': 'class', 'name': ...}")
    cost = "built lazily: one tree-sitter parse per source file (~ms); query ~ms (SQLite)"
    cost_rank = 25
    contract_queries = {"timebox": "parse_deadline"}

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def __init__(self, ctx):
        super().__init__(ctx)
        self.store = SymbolStore(self.dir, self.build_version)
        self.adopt_sqlite(self.store.db)

    # -- building ---------------------------------------------------------------------------
    def build_one(self, unit: Unit) -> str:
        """Files without a grammar are skipped without reading (or extracting) them."""
        if symbol_language(unit.path) is None:
            self.manifest.mark(unit.hash, self.build_version, "skipped", _no_grammar(unit.path))
            return "skipped"
        return super().build_one(unit)

    def index_unit(self, unit: Unit, doc) -> dict[str, Any]:
        lang = symbol_language(unit.path)
        if lang is None:
            raise SkipUnit(_no_grammar(unit.path))
        data = doc.text or b""
        if len(data) > MAX_BYTES:
            raise SkipUnit(f"too large for symbols ({len(data)} bytes > {MAX_BYTES})")
        ex = extract(data, lang, FALLBACK_GRAMMAR.get(extension(unit.path)))
        self.store.write(unit.hash, ex)
        return {"lang": ex.lang, "defs": len(ex.defs), "calls": len(ex.calls), "errors": ex.errors}

    def drop(self, hashes: set[str]) -> None:
        self.store.drop(hashes)

    # -- searching --------------------------------------------------------------------------
    def default_query(self, query: str) -> Any:
        return query.strip()

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        q = parse_query(query)
        return await asyncio.to_thread(self._search, q, scope, budget)

    def _search(self, q: SymbolQuery, scope: ScopeView, budget: Budget) -> list[Hit]:
        units = self.applicable(scope)
        done = self.built()
        allowed = {u.hash for u in units if done.get(u.hash) == "ok"}
        budget.set_coverage(sum(1 for u in units if u.hash in done) / len(units) if units else 1.0)
        if not allowed:
            return []
        path_of: dict[str, str] = {}
        for u in sorted(units, key=lambda u: u.path):
            path_of.setdefault(u.hash, u.path)
        if q.mode == "callers":
            return self._callers(q, allowed, path_of, budget)
        return self._definitions(q, allowed, path_of, budget)

    def _definitions(self, q: SymbolQuery, allowed: set[str], path_of: dict[str, str],
                     budget: Budget) -> list[Hit]:
        st = self.store
        kind_sql, kind_arg = ("kind = ? AND ", [q.kind]) if q.kind else ("", [])
        scored: dict[tuple[str, int], tuple[float, tuple]] = {}

        def add(rows: list[tuple], score: float) -> None:
            for r in rows:
                key = (r[0], r[1])
                if r[0] in allowed and (q.kind is None or r[4] == q.kind) and key not in scored:
                    scored[key] = (score, r)

        if q.name is None:  # {"kind": ...} alone: every definition of that kind
            add(st.defs_where("kind = ?", [q.kind]), EXACT)
        else:
            name = _dotted(q.name)
            add(st.defs_where(f"{kind_sql}(name = ? OR qual = ?)", kind_arg + [name, name]), EXACT)
            if "." in name:  # the tail of a longer qualified name: Engine.search in pkg.Engine.search
                tail = "." + name
                add(st.defs_where(f"{kind_sql}name = ? AND substr(qual, -?) = ?",
                                  kind_arg + [name.rsplit(".", 1)[-1], len(tail), tail]), EXACT)
            if budget.expired():
                budget.mark_partial()  # exact matches only
            else:
                low = name.lower()
                add(st.defs_where(f"{kind_sql}(lname = ? OR lqual = ?)", kind_arg + [low, low]), FOLDED)
                if budget.expired():
                    budget.mark_partial()  # no fuzzy matches
                elif q.min_score < 100:
                    by_name = dict(self._fuzzy_names(name.rsplit(".", 1)[-1], q.min_score))
                    for r in st.defs_named(list(by_name)):
                        add([r], by_name[r[2]])
        order = sorted(scored.values(), key=lambda t: (-t[0], path_of.get(t[1][0], ""), t[1][5]))
        hits = []
        for score, r in order[: budget.pool]:
            h, _, name, qual, kind, s, e, line, last, sig, doc = r
            details = {"kind": kind, "name": name, "qualified": qual, "signature": sig,
                       "docstring": _trim(doc), "lines": [line, last]}
            hits.append(Hit.single(self.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                                   score_kind=SCORE_KIND, query=q.describe(), details=details,
                                   excerpt=sig))
        return hits

    def _fuzzy_names(self, name: str, min_score: float) -> list[tuple[str, float]]:
        """Names close to ``name``. Candidates are names within ``ratio`` of it (typos) and
        names containing it; they are scored with WRatio, or plain ratio when shorter than the
        query (so 'timebox' does not match a definition called 'box'). (WRatio over every
        name costs ~60 ms for the 43k names of the Python stdlib; this costs ~5 ms.)"""
        from rapidfuzz import fuzz, process, utils

        names, processed = self.store.distinct_names()
        qn = utils.default_process(name)
        if not qn:
            return []
        cand = {i for _, _, i in process.extract(qn, processed, scorer=fuzz.ratio, processor=None,
                                                 score_cutoff=min_score, limit=None)}
        if len(qn) >= 3:
            cand.update(i for i, cn in enumerate(processed) if qn in cn)
        scored = []
        for i in cand:
            cn = processed[i]
            score = fuzz.WRatio(qn, cn) if len(cn) >= len(qn) else fuzz.ratio(qn, cn)
            if score >= min_score and names[i] != name:
                scored.append((names[i], float(min(score, FOLDED - 1))))
        scored.sort(key=lambda t: (-t[1], t[0]))
        return scored[:200]

    def _callers(self, q: SymbolQuery, allowed: set[str], path_of: dict[str, str],
                 budget: Budget) -> list[Hit]:
        want = _dotted(q.name or "")
        last = want.rsplit(".", 1)[-1]
        rows = [r for r in self.store.calls_named(last) if r[0] in allowed]
        if "." in want:
            rows = [r for r in rows if _dotted(r[2]) == want or _dotted(r[2]).endswith("." + want)]
        by_file: dict[str, list[tuple]] = defaultdict(list)
        for r in rows:
            by_file[r[0]].append(r)
        files = sorted(by_file, key=lambda h: path_of.get(h, h))
        for h in files:
            by_file[h].sort(key=lambda r: r[3])
        ordered: list[tuple] = []
        depth = 0
        while len(ordered) < budget.pool and files:  # round-robin: the first call of each file first
            files = [h for h in files if depth < len(by_file[h])]
            for h in files:
                ordered.append(by_file[h][depth])
            depth += 1
        ordered = ordered[: budget.pool]
        encl_rows = self.store.defs_at((r[0], r[5]) for r in ordered if r[5] >= 0)
        hits = []
        for r in ordered:
            h, name, callee, s, e, encl = r
            d = encl_rows.get((h, encl))
            enclosing = ({"qualified": d[3], "kind": d[4], "signature": d[9], "lines": [d[7], d[8]]}
                         if d is not None else None)
            hits.append(Hit.single(self.name, Span(h, s, e), rank=len(hits) + 1, score=1.0,
                                   score_kind="call site", query=q.describe(),
                                   details={"callee": callee, "name": name, "enclosing": enclosing}))
        return hits

    # -- match-time context -----------------------------------------------------------------
    def context_for(self, h: str, span: Span, path: str | None) -> dict[str, Any]:
        """The innermost definition enclosing ``span`` (units built by this layer only)."""
        if path is not None and symbol_language(path) is None:
            return {}
        side = self.store.sidecar(h)
        if side is None:
            return {}
        d = innermost(side.get("defs", []), span.start, span.end)
        if d is None:
            return {}
        return {"symbol": {"name": d["name"], "qualified": d["qualified"], "kind": d["kind"],
                           "signature": d["signature"], "lines": list(d["lines"])}}


def _no_grammar(path: str) -> str:
    ext = extension(path)
    return f"no grammar for {ext}" if ext else f"no grammar for {path.rsplit('/', 1)[-1]!r} (no extension)"


def _trim(doc: str) -> str:
    doc = doc.strip()
    return doc if len(doc) <= DETAIL_DOC_CHARS else doc[: DETAIL_DOC_CHARS - 1] + "…"
