"""``formula``: find formulas by structure, as normalised LaTeX tokens (seed section 12).

Building (lazily, per unit): the unit's formulas are taken from the extractor's blocks
(``Block(kind="formula")`` and math environments) when the Document has them, else found by the
scanner of ``lar.layers.formula.scan`` (LaTeX, Markdown, reStructuredText, raw notebook JSON); each is
normalised by ``lar.layers.formula.normalize`` with the unit's own ``\\newcommand``/``\\def`` macros and
stored with its byte span in one SQLite table (``formulas.sqlite``; a unit is replaced in one
transaction, then its manifest row is written). When the unit's macros change a formula, its form
*as written* (macros left as commands) is stored too: a query copied from the source with the
paper's own macros (which the query side cannot expand) still matches exactly.

Query: a LaTeX string (plain string, the default form, with or without ``$``/``\\[``/
``\\begin{equation}`` delimiters) or ``{"formula": "...", "min_score": 0.3}``. It is normalised
the same way (no unit macros) and every stored formula of the built, in-scope units is scored
by ``lar.layers.formula.similarity`` (1.0 for an identical normalised sequence, else the mean of the
token-bigram Dice coefficient and the query's shape-trigram containment; the better of the two
stored forms counts). Hits are the formula
spans with a score of at least ``min_score``, best first; the evidence details carry the
normalised form of the matched formula and of the query.

Units: every text unit except source code, PDFs and HTML (``accepts``); units without formulas
are built with ``{"formulas": 0}``. The build version includes the extractor versions of the
formats it reads, so spans are rebuilt when an extractor changes the text they point into.
"""
from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from lar.core.building import BuildingLayer, SkipUnit
from lar.core.errors import QueryError
from lar.layers.formula.macros import strip_definitions
from lar.layers.formula.normalize import normalise
from lar.layers.formula.scan import find_formulas, strip_delimiters
from lar.layers.formula.similarity import Features, features, similarity
from lar.core.layer import Budget, ScopeView, Unit
from lar.core.types import Hit, Span

DEFAULT_MIN_SCORE = 0.3
MAX_FORMULAS_PER_UNIT = 20_000
SCORE_KIND = "normalised-token similarity 0-1"
EXTRACTOR_KINDS = ("latex", "markdown", "rst", "notebook")
CODE_EXTS = frozenset(
    ".py .pyi .pyx .js .mjs .cjs .ts .tsx .jsx .c .h .cc .cpp .cxx .hpp .hh .java .kt .kts .scala "
    ".go .rs .rb .php .pl .pm .sh .bash .zsh .fish .ps1 .bat .cmd .r .jl .m .mm .swift .cs .fs "
    ".lua .sql .css .scss .sass .less .vue .svelte .dart .hs .ml .mli .clj .ex .exs .erl .el "
    ".vim .mk .cmake .gradle .groovy .asm .s .f .f90 .for .pdf .html .htm .xhtml .svg .xml "
    ".lock .min.js .map .json .jsonl .yml .yaml .toml .ini .cfg .conf .env .csv .tsv .log .aux "
    ".patch .diff".split())
NON_DOC_NAMES = frozenset("makefile gnumakefile dockerfile containerfile jenkinsfile vagrantfile "
                          "rakefile gemfile procfile justfile".split())
_CACHE_LIMIT = 500_000  # formulas kept in memory; beyond it the cache is cleared and refilled


def accepts_path(path: str) -> bool:
    """Documents and other text: not source code, data/config formats, PDF/HTML, build files or
    dotfiles (``$`` there is rarely math)."""
    p = PurePosixPath(path.lower())
    if p.name.startswith(".") or p.name in NON_DOC_NAMES:
        return False
    suffixes = p.suffixes
    return not suffixes or ("".join(suffixes[-2:]) not in CODE_EXTS
                            and suffixes[-1] not in CODE_EXTS)


def parse_query(query: Any) -> tuple[str, float]:
    """``(latex, min_score)`` from a plain string or ``{"formula": str, "min_score": float}``."""
    text, min_score = None, DEFAULT_MIN_SCORE
    if isinstance(query, str):
        text = query
    elif isinstance(query, dict) and "formula" in query and set(query) <= {"formula", "min_score"}:
        text = query["formula"]
        ms = query.get("min_score", DEFAULT_MIN_SCORE)
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0.0 <= ms <= 1.0:
            raise QueryError("formula", f"min_score must be a number in [0, 1], got {ms!r}")
        min_score = float(ms)
    if not isinstance(text, str) or not text.strip():
        raise QueryError("formula", "give a LaTeX formula as a string or {'formula': '...', "
                                    f"'min_score': 0.3}}; got {query!r}")
    return text, min_score


def query_features(latex: str) -> Features:
    """Normalise a query formula (delimiters stripped, no unit macros) into scoring features."""
    content, _ = strip_delimiters(latex)
    norm = normalise(strip_definitions(content))
    if not norm.tokens:
        raise QueryError("formula", f"{latex!r} has no math tokens after normalisation "
                                    "(only formatting, spacing or comments)")
    return features(norm.tokens)


@dataclass(frozen=True, slots=True)
class _Stored:
    """One stored formula in memory: span, label, features of both normalised forms."""

    start: int
    end: int
    label: str
    norm: Features
    written: Features | None  # the form without the unit's macros, when it differs


def _setup_formulas(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS formulas(hash TEXT NOT NULL, "
                 "start INTEGER NOT NULL, end INTEGER NOT NULL, label TEXT NOT NULL, "
                 "norm TEXT NOT NULL, "
                 "written TEXT NOT NULL DEFAULT '')")
    conn.execute("CREATE INDEX IF NOT EXISTS formulas_hash ON formulas(hash)")


class FormulaLayer(BuildingLayer):
    name = "formula"
    version = "1"
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "formula"
    query_format = ("LaTeX formula (plain string, delimiters optional) or {'formula': ..., "
                    "'min_score': 0.3}; variables and formatting are normalised away")
    cost = "built lazily: formulas per unit normalised into SQLite; query scans stored formulas"
    cost_rank = 30
    contract_queries = {"timebox": "\\frac{x}{y}"}  # the contract corpus's paper.tex has one

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def __init__(self, ctx):
        super().__init__(ctx)
        self.db_path = self.dir / "formulas.sqlite"
        self._cache: dict[str, list[_Stored]] = {}
        self._cache_n = 0
        self._cache_lock = threading.Lock()
        self.formula_db = self.sqlite_state(self.db_path, _setup_formulas, "formula store")

    def _conn(self) -> sqlite3.Connection:
        return self.formula_db.conn()

    # -- building ---------------------------------------------------------------------------
    @property
    def build_version(self) -> str:
        """Layer and chunker version plus the extractor versions whose text spans point into."""
        from lar.store.extract import extractor_version

        parts = []
        for kind in EXTRACTOR_KINDS:
            try:
                parts.append(extractor_version(kind))
            except Exception:  # an extractor module that does not import: treated as absent
                parts.append("0")
        return f"{self.version}+c{self.chunker_version}+x{'.'.join(parts)}"

    def accepts(self, unit: Unit) -> bool:
        return accepts_path(unit.path)

    def index_unit(self, unit: Unit, doc) -> dict:
        if not doc.text:
            raise SkipUnit("no text")
        found = find_formulas(doc.text, unit.path, tuple(doc.blocks), doc.kind, doc.derived)
        rows, unbalanced, truncated, empty = [], 0, 0, 0
        for f in found.formulas[:MAX_FORMULAS_PER_UNIT]:
            content = strip_definitions(f.content)
            norm = normalise(content, found.macros)
            if not norm.tokens:
                empty += 1
                continue
            unbalanced += norm.unbalanced > 0
            truncated += norm.truncated
            written = normalise(content).text if found.macros else norm.text
            rows.append((unit.hash, f.start, f.end, f.label, norm.text,
                         "" if written == norm.text else written))
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM formulas WHERE hash=?", (unit.hash,))
            conn.executemany("INSERT INTO formulas(hash, start, end, label, norm, written) "
                             "VALUES (?,?,?,?,?,?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        with self._cache_lock:
            self._forget_cached(unit.hash)
        info = {"formulas": len(rows), "source": found.source, "macros": len(found.macros)}
        for key, n in (("unclosed_delimiters", found.problems), ("unbalanced_braces", unbalanced),
                       ("truncated", truncated), ("empty", empty),
                       ("over_limit", max(0, len(found.formulas) - MAX_FORMULAS_PER_UNIT))):
            if n:
                info[key] = n
        return info

    def drop(self, hashes: set[str]) -> None:
        conn = self._conn()
        conn.executemany("DELETE FROM formulas WHERE hash=?", [(h,) for h in hashes])
        with self._cache_lock:
            for h in hashes:
                self._forget_cached(h)

    def _forget_cached(self, h: str) -> None:
        old = self._cache.pop(h, None)
        if old:
            self._cache_n -= len(old)

    # -- searching --------------------------------------------------------------------------
    def _load(self, hashes: list[str]) -> None:
        """Read the stored formulas of ``hashes`` not cached yet (one query per 500 hashes)."""
        with self._cache_lock:
            missing = [h for h in hashes if h not in self._cache]
        if not missing:
            return
        got: dict[str, list[tuple[int, int, str, str, str]]] = {h: [] for h in missing}
        conn = self._conn()
        for i in range(0, len(missing), 500):
            chunk = missing[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for h, s, e, label, norm, written in conn.execute(
                    f"SELECT hash, start, end, label, norm, written FROM formulas "
                    f"WHERE hash IN ({marks}) ORDER BY hash, start", chunk):
                got[h].append((s, e, label, norm, written))
        with self._cache_lock:
            if self._cache_n > _CACHE_LIMIT:
                self._cache.clear()
                self._cache_n = 0
            for h, rows in got.items():
                self._cache[h] = [_Stored(s, e, label, features(norm.split(" ")),
                                          features(written.split(" ")) if written else None)
                                  for s, e, label, norm, written in rows]
                self._cache_n += len(rows)

    def formulas(self, h: str) -> list[tuple[int, int, str, str]]:
        """The stored formulas of unit ``h``: ``[(start, end, label, normalised text)]``."""
        self._load([h])
        with self._cache_lock:
            return [(f.start, f.end, f.label, " ".join(f.norm.tokens))
                    for f in self._cache.get(h, [])]

    def default_query(self, query: str) -> Any:
        """Plain text reaches this layer only when it looks like math (a backslash command,
        ^, _, =, braces or $); prose is not a formula query, and the report says so."""
        return query if any(c in query for c in "\\^_={}$") else None

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        if query is None:  # plain prose (see default_query): nothing to look for
            budget.set_coverage(self.coverage(scope))
            return []
        text, min_score = parse_query(query)
        q = query_features(text)
        return await asyncio.to_thread(self._search, text, q, min_score, scope, budget)

    def _search(self, text: str, q: Features, min_score: float, scope: ScopeView,
                budget: Budget) -> list[Hit]:
        allowed = sorted(self.searchable(scope))
        budget.set_coverage(self.coverage(scope))
        scored: list[tuple[float, str, _Stored, Features, float, float]] = []
        for i in range(0, len(allowed), 64):
            if budget.expired():
                budget.mark_partial()
                break
            batch = allowed[i:i + 64]
            self._load(batch)
            with self._cache_lock:
                entries = [(h, self._cache.get(h, [])) for h in batch]
            for h, rows in entries:
                for f in rows:
                    best = (*similarity(q, f.norm), f.norm)
                    if f.written is not None and best[0] < 1.0:
                        alt = (*similarity(q, f.written), f.written)
                        best = alt if alt[0] > best[0] else best
                    if best[0] >= min_score:
                        scored.append((best[0], h, f, best[3], best[1], best[2]))
        scored.sort(key=lambda t: (-t[0], t[1], t[2].start))
        query_norm = " ".join(q.tokens)
        hits = []
        for rank, (score, h, f, form, dice, cover) in enumerate(scored[: budget.pool], start=1):
            details = {"normalised": " ".join(form.tokens), "query_normalised": query_norm,
                       "label": f.label, "match": "exact" if score == 1.0 else "similar",
                       "form": "as written" if form is f.written else "macros expanded",
                       "dice": round(dice, 4), "cover": round(cover, 4)}
            hits.append(Hit.single(self.name, Span(h, f.start, f.end), rank=rank,
                                   score=round(score, 6),
                                   score_kind=SCORE_KIND, query={"formula": text},
                                   details=details))
        return hits
