"""``trigram``: SQLite FTS5 with the trigram tokenizer, built lazily per unit.

Query forms: a plain string or ``{"substring": "..."}`` finds that substring (case-insensitive,
at least 3 characters); ``{"regex": "..."}`` (Python ``re`` syntax, matched on bytes) is
prefiltered with the literal runs it requires, when it has some of at least 3 characters, and
then verified on each candidate unit. Hits are the matching lines, with the matches as
sub-spans. One FTS5 row per content hash; an upsert is delete + insert in one transaction.
"""
from __future__ import annotations

import asyncio
import re
import sqlite3
from typing import Any

from lar.core.building import BuildingLayer, SkipUnit
from lar.core.errors import QueryError
from lar.core.layer import Budget, ScopeView, Unit
from lar.core.sqlite_deadline import Interrupted, interrupt_at
from lar.core.types import Hit, Span

MAX_LINES_PER_UNIT = 50


def parse_query(query: Any) -> tuple[str, str]:
    if isinstance(query, str) and query.strip():
        return "substring", query
    if isinstance(query, dict) and len(query) == 1:
        (kind, val), = query.items()
        if kind in ("substring", "regex") and isinstance(val, str) and val:
            return kind, val
    raise QueryError("trigram", f"give a string, {{'substring': ...}} or {{'regex': ...}}; got {query!r}")


_ESCAPED_LITERAL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v"}


def required_literals(pattern: str) -> list[str]:
    """Literal runs every match of ``pattern`` must contain, of at least 3 characters
    (top-level concatenation only: a pattern with a top-level ``|`` requires none; groups,
    classes, escapes such as ``\\w`` and optional or repeated characters end a run)."""
    try:
        re.compile(pattern)
    except re.error:
        return []
    runs: list[str] = []
    cur: list[str] = []

    def cut() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    i, n, depth, in_class = 0, len(pattern), 0, False
    while i < n:
        ch = pattern[i]
        if in_class:  # inside [...]: skip to its end
            if ch == "\\":
                i += 1
            elif ch == "]":
                in_class = False
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if depth == 0:
                if not nxt.isalnum():
                    cur.append(nxt)
                elif nxt in _ESCAPED_LITERAL:
                    cur.append(_ESCAPED_LITERAL[nxt])
                else:  # \w, \d, \b, a back reference, \x41 ...: not a known literal
                    cut()
            i += 2
            continue
        if ch == "[":
            in_class = True
            if i + 1 < n and pattern[i + 1] == "]":
                i += 1  # a leading ] is a member of the class
            if depth == 0:
                cut()
        elif ch == "(":
            depth += 1
            if depth == 1:
                cut()
        elif ch == ")":
            depth -= 1
        elif depth > 0:
            pass
        elif ch == "|":
            return []  # either side may match: nothing is required
        elif ch in "*?{":  # the previous atom is optional or counted: it is not required here
            if cur:
                cur.pop()
            cut()
            if ch == "{":
                close = pattern.find("}", i)
                i = close if close != -1 else i
        elif ch == "+":  # the previous atom is required once, then may repeat
            cut()
        elif ch in ".^$":
            cut()
        else:
            cur.append(ch)
        i += 1
    cut()
    return [r for r in runs if len(r) >= 3]


def _fts_phrase(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _setup_fts(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(hash UNINDEXED, body, "
                 "tokenize='trigram')")


def _check_fts(conn: sqlite3.Connection) -> None:
    """FTS5's own check of its index (raises ``sqlite3.DatabaseError`` when it is damaged)."""
    conn.execute("INSERT INTO docs(docs, rank) VALUES ('integrity-check', 0)")


class TrigramLayer(BuildingLayer):
    name = "trigram"
    version = "2"  # 2: text after a NUL byte is indexed
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "line"
    query_format = ("substring (case-insensitive; indexed from 3 characters); {'regex': ...} in "
                    "Python re syntax")
    cost = "built lazily: one FTS5 trigram row per unit (~3x the text); query ~1 ms"
    cost_rank = 20

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def __init__(self, ctx):
        super().__init__(ctx)
        self.db_path = self.dir / "fts.sqlite"
        self.fts = self.sqlite_state(self.db_path, _setup_fts, "FTS5 index", extra_check=_check_fts)

    def _conn(self) -> sqlite3.Connection:
        return self.fts.conn()

    def index_unit(self, unit: Unit, doc) -> dict:
        if not doc.text:
            raise SkipUnit("no text")
        # FTS5 reads the body up to its first NUL: index NULs as spaces (the body only picks the
        # candidates; matches are found and verified on the unit's bytes)
        body = doc.text.decode("utf-8", errors="replace").replace("\0", " ")
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM docs WHERE hash=?", (unit.hash,))
            conn.execute("INSERT INTO docs(hash, body) VALUES (?, ?)", (unit.hash, body))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return {"bytes": len(doc.text)}

    def drop(self, hashes: set[str]) -> None:
        conn = self._conn()
        conn.executemany("DELETE FROM docs WHERE hash=?", [(h,) for h in hashes])

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        kind, text = parse_query(query)
        if kind == "regex":
            try:
                rx = re.compile(text.encode("utf-8"), re.IGNORECASE if text == text.lower() else 0)
            except re.error as exc:
                raise QueryError("trigram", f"invalid regex {text!r}: {exc}") from None
        else:
            rx = re.compile(re.escape(text.encode("utf-8")), re.IGNORECASE)
        return await asyncio.to_thread(self._search, kind, text, rx, scope, budget)

    def _search(self, kind, text, rx, scope: ScopeView, budget: Budget) -> list[Hit]:
        allowed = self.searchable(scope)
        budget.set_coverage(self.coverage(scope))
        if not allowed:
            return []
        if kind == "substring":
            lits = [text] if len(text) >= 3 else []  # shorter: no trigram to look up; verify all
        else:
            lits = required_literals(text)
        conn = self._conn()
        if lits:
            match = " AND ".join(_fts_phrase(l) for l in lits)
            try:
                with interrupt_at(conn, budget.expired):
                    rows = conn.execute("SELECT hash FROM docs WHERE docs MATCH ?", (match,)).fetchall()
            except Interrupted:  # the match did not finish by the deadline: nothing verified
                budget.mark_partial()
                budget.note("the trigram match was interrupted at the deadline")
                return []
            cand = [h for (h,) in rows if h in allowed]
        else:
            cand = sorted(allowed)  # nothing to prefilter on: verify every built unit
        scored = []
        for i, h in enumerate(cand):
            if budget.expired():
                budget.mark_partial()
                break
            try:
                data = self.ctx.reader.unit_text(h)
            except Exception:
                continue
            per_line: dict[int, list[tuple[int, int]]] = {}
            for m in rx.finditer(data):
                if m.end() == m.start():
                    continue
                ls = data.rfind(b"\n", 0, m.start()) + 1
                per_line.setdefault(ls, []).append((m.start(), m.end()))
                if len(per_line) > MAX_LINES_PER_UNIT:
                    break
            for ls, subs in per_line.items():
                le = data.find(b"\n", ls)
                le = len(data) if le < 0 else le
                scored.append((len(subs), len(per_line), h, ls, le, subs))
        scored.sort(key=lambda t: (-t[0], -t[1], t[2], t[3]))
        hits = []
        for rank, (n, _, h, ls, le, subs) in enumerate(scored[: budget.pool], start=1):
            hits.append(Hit.single(self.name, Span(h, ls, max(ls, le)), rank=rank, score=float(n),
                                   score_kind="matches on the line", query={kind: text},
                                   sub_spans=[(s, min(e, le)) for s, e in subs]))
        return hits
