"""``names``: file paths, by glob or by fuzzy match (rapidfuzz). Always current (reads the file
index the scanner keeps). Granularity: file; a hit's span is the whole unit.

Query forms: a plain string is a glob if it has glob characters (``*?[``), else a fuzzy path
query; ``{"names": {"glob": "src/**/*.py"}}`` or ``{"names": {"fuzzy": "orchestratr"}}``.
"""
from __future__ import annotations

import asyncio
from typing import Any

from lar.core.errors import QueryError
from lar.core.layer import BaseLayer, Budget, ScopeView
from lar.core.scope import compile_globs
from lar.core.types import Hit, Span

MIN_FUZZY_SCORE = 60.0
# A plain-text query reaches every layer; only close path matches should count as evidence then.
MIN_DEFAULT_SCORE = 85.0


def parse_query(query: Any) -> tuple[str, str, float]:
    if isinstance(query, str):
        q = query.strip()
        if not q:
            raise QueryError("names", "empty query")
        return ("glob", q, 0.0) if any(c in q for c in "*?[") else ("fuzzy", q, MIN_FUZZY_SCORE)
    if isinstance(query, dict) and 1 <= len(query) <= 2:
        kind = "glob" if "glob" in query else "fuzzy" if "fuzzy" in query else None
        val = query.get(kind) if kind else None
        cutoff = query.get("min_score", MIN_FUZZY_SCORE)
        extra = set(query) - {"glob", "fuzzy", "min_score"}
        if (kind and isinstance(val, str) and val.strip() and not extra
                and isinstance(cutoff, (int, float)) and 0 <= cutoff <= 100):
            return kind, val.strip(), float(cutoff)
    raise QueryError("names", f"give a string, {{'glob': ...}} or {{'fuzzy': ..., 'min_score': 60}}; "
                              f"got {query!r}")


class NamesLayer(BaseLayer):
    name = "names"
    version = "1"
    roles = frozenset({"generate"})
    origin = "metadata"
    granularity = "file"
    query_format = "path glob (gitignore syntax) or fuzzy path text; {'glob': ...} / {'fuzzy': ...}"
    cost = "no index; matches the paths in the file index"
    cost_rank = 5

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def default_query(self, query: str) -> Any:
        kind, text, _ = parse_query(query)
        return {"glob": text} if kind == "glob" else {"fuzzy": text, "min_score": MIN_DEFAULT_SCORE}

    async def search(self, query, scope: ScopeView, budget: Budget, candidates=None) -> list[Hit]:
        kind, text, cutoff = parse_query(query)
        return await asyncio.to_thread(self._search, kind, text, cutoff, scope, budget)

    def _search(self, kind: str, text: str, cutoff: float, scope: ScopeView, budget: Budget) -> list[Hit]:
        units = scope.units()
        if kind == "glob":
            try:
                spec = compile_globs([text])
            except Exception as exc:
                raise QueryError("names", f"invalid glob {text!r}: {exc}") from None
            found = [(u, 100.0) for u in units if spec.match_file(u.path)]
            found.sort(key=lambda t: (t[0].path.count("/"), t[0].path))
            kind_desc = "glob"
        else:
            from rapidfuzz import fuzz, process, utils

            paths = [u.path for u in units]
            base = [p.rsplit("/", 1)[-1] for p in paths]
            qn = utils.default_process(text)
            by_path = process.extract(qn, paths, scorer=fuzz.WRatio, processor=utils.default_process,
                                      limit=None, score_cutoff=cutoff)
            by_base = process.extract(qn, base, scorer=fuzz.ratio, processor=utils.default_process,
                                      limit=None, score_cutoff=max(0.0, cutoff - 5.0))
            best: dict[int, float] = {}
            for _, score, i in by_path:
                best[i] = max(best.get(i, 0.0), score)
            for _, score, i in by_base:
                best[i] = max(best.get(i, 0.0), min(100.0, score + 5.0))  # file-name match weighs most
            found = sorted(((units[i], s) for i, s in best.items()), key=lambda t: (-t[1], t[0].path))
            kind_desc = "fuzzy"
        # always current: stat-check what we are about to return (the index may lag the folder)
        head = found[: budget.pool * 2]
        current = self.ctx.detect([u.path for u, _ in head]) if self.ctx.detect else {}
        hits, seen = [], set()
        for u, score in head:
            if self.ctx.detect:
                h = current.get(u.path)
                if h is None:
                    continue  # deleted or now skipped
                if h != u.hash:
                    rec = self.ctx.index.get(u.path)
                    u = type(u)(u.path, h, rec.size if rec else u.size, rec.mtime_ns if rec else 0)
            if u.hash in seen:
                continue  # identical files share a hash: one hit, several paths
            seen.add(u.hash)
            hits.append(Hit.single(self.name, Span(u.hash, 0, u.size), rank=len(hits) + 1,
                                   score=score, score_kind=f"path-{kind_desc} (0-100)",
                                   query={kind: text, "min_score": cutoff} if kind == "fuzzy" else {kind: text},
                                   excerpt=u.path))
            if len(hits) >= budget.pool or budget.expired():
                break
        budget.set_coverage(1.0)
        return hits
