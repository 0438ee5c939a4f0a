"""``grep``: ripgrep over the current files, always current, and the engine's change detector.

Query forms (advertised in the status):
- a plain string: the literal phrase, and each of its words singly (lines with the phrase rank
  first, then lines matching more and rarer words); nothing is read as a regex;
- ``{"grep": "text"}``: that literal text only;
- ``{"grep": {"regex": "fo+|ba[rz]"}}``: a Rust-regex (ripgrep syntax);
- ``{"grep": {"literal": "x"} | {"any": ["a", "b"]}, "case": "smart"|"sensitive"|"insensitive"}``.
Case is smart by default (insensitive unless the pattern has an upper-case letter).
Spans are byte offsets of the matched line (without its newline); sub-spans are the matches.
"""
from __future__ import annotations

import asyncio
import base64
import json
import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..errors import QueryError
from ..layer import BaseLayer, Budget, ScopeView
from ..rg import BASE_FLAGS, ignore_flags, rg_path
from ..types import Hit, Span

_WORD_RE = re.compile(r"[\w][\w.\-]*[\w]|[\w]", re.UNICODE)
_STOP = frozenset(
    "a an and are as at be by for from has have how in is it of on or that the this to was what "
    "when where which who why with does do did can not no".split()
)
MAX_MATCH_LINES = 50_000
_MATCH_PREFIX = b'{"type":"match"'


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


def _text_or_bytes(obj: dict) -> bytes:
    if "text" in obj:
        return obj["text"].encode("utf-8")
    return base64.b64decode(obj["bytes"])


def _path_of(obj: dict) -> str:
    raw = _text_or_bytes(obj)
    if raw.startswith(b"./"):
        raw = raw[2:]
    return raw.decode("utf-8", errors="surrogateescape")


class GrepLayer(BaseLayer):
    name = "grep"
    version = "1"
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "line"
    query_format = ("literal text (phrase first, then its words); {'regex': ...} for a ripgrep "
                    "regex; {'any': [...]}; case smart by default")
    cost = "no index; one ripgrep pass over the scope"
    cost_rank = 10

    def default_query(self, query: str) -> GrepQuery:
        return parse_query(query, default_form=True)

    def command(self, q: GrepQuery, scope: ScopeView) -> list[str]:
        cmd = [rg_path(), "--json", *BASE_FLAGS, *ignore_flags(self.ctx.root),
               "--max-filesize", str(self.ctx.max_bytes), "--max-columns", "0"]
        cmd += {"smart": ["--smart-case"], "sensitive": ["--case-sensitive"],
                "insensitive": ["--ignore-case"]}[q.case]
        if not q.regex:
            cmd.append("--fixed-strings")
        for g in scope.scope.include:
            cmd += ["--glob", g]
        for g in scope.scope.exclude:
            cmd += ["--glob", f"!{g}"]
        for p in q.patterns:
            cmd += ["-e", p]
        cmd.append("./")
        return cmd

    async def search(self, query, scope, budget: Budget, candidates=None) -> list[Hit]:
        q = parse_query(query)
        if scope.scope.hashes is not None and not scope.scope.hashes:
            budget.set_coverage(1.0)
            return []
        cmd = self.command(q, scope)
        proc = await asyncio.create_subprocess_exec(
            *cmd, cwd=str(self.ctx.root), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, limit=1 << 24)
        matches: list[tuple[str, int, bytes, list[tuple[int, int, bytes]]]] = []
        partial = False
        try:
            while True:
                remaining = budget.deadline - time.monotonic()
                if remaining <= 0 or budget.cancel.is_set():
                    partial = True
                    break
                try:
                    line = await asyncio.wait_for(proc.stdout.readline(), timeout=remaining)
                except asyncio.TimeoutError:
                    partial = True
                    break
                if not line:
                    break
                if not line.startswith(_MATCH_PREFIX):
                    continue
                data = json.loads(line)["data"]
                text = _text_or_bytes(data["lines"])
                subs = [(m["start"], m["end"], _text_or_bytes(m["match"])) for m in data["submatches"]]
                matches.append((_path_of(data["path"]), data["absolute_offset"], text, subs))
                if len(matches) >= MAX_MATCH_LINES:
                    partial = True
                    budget.notes["truncated"] = f"stopped after {MAX_MATCH_LINES} matching lines"
                    break
        finally:
            if proc.returncode is None:
                if partial:
                    proc.kill()
                    await proc.wait()
                else:
                    await proc.wait()
        if not partial and proc.returncode == 2:
            err = (await proc.stderr.read()).decode(errors="replace").strip()
            if not matches:
                raise QueryError("grep", f"ripgrep refused the pattern(s) {list(q.patterns)!r}: {err}")
        budget.notes["partial"] = partial
        budget.coverage = None if partial else 1.0
        return self._rank(q, matches, scope, budget)

    def _rank(self, q: GrepQuery, matches, scope: ScopeView, budget: Budget) -> list[Hit]:
        if not matches:
            return []
        paths = sorted({m[0] for m in matches})
        current = self.ctx.detect(paths) if self.ctx.detect else {}
        fold = q.case == "insensitive" or (q.case == "smart" and not any(c.isupper() for p in q.patterns for c in p))
        # document frequency (in lines) of each pattern, for rarity weights
        def key_of(b: bytes) -> str:
            s = b.decode("utf-8", errors="replace")
            return s.lower() if fold else s

        pattern_keys = {key_of(p.encode()) for p in q.patterns} if not q.regex else set()
        df: dict[str, int] = defaultdict(int)
        per_line = []
        for path, off, text, subs in matches:
            keys = {key_of(m[2]) for m in subs}
            if pattern_keys:
                keys = {k for k in keys if k in pattern_keys} or keys
            for k in keys:
                df[k] += 1
            per_line.append(keys)
        n = len(matches)
        phrase_key = key_of(q.phrase.encode()) if q.phrase else None
        scored = []
        for (path, off, text, subs), keys in zip(matches, per_line):
            h = current.get(path) if self.ctx.detect else None
            if h is None or not scope.scope.matches(path, h):
                continue
            score = sum(math.log(1.0 + n / df[k]) for k in keys)
            if phrase_key is not None and phrase_key in keys and len(q.patterns) > 1:
                score += 10.0
            body = text[:-1] if text.endswith(b"\n") else text
            if body.endswith(b"\r"):
                body = body[:-1]
            scored.append((-score, path, off, body, subs, h, score))
        # ties (e.g. every line of a one-word query): files with more matching lines first (a
        # topicality hint), then earlier lines, then path; never plain alphabetical order
        per_file: dict[str, int] = defaultdict(int)
        for _, path, *_rest in scored:
            per_file[path] += 1
        scored.sort(key=lambda t: (t[0], -per_file[t[1]], t[2], t[1]))
        hits, seen = [], set()
        for _, path, off, body, subs, h, score in scored:
            if (h, off) in seen:
                continue  # identical files share a hash: one hit, several paths
            seen.add((h, off))
            if len(hits) >= budget.pool:
                break
            rank = len(hits) + 1
            span = Span(h, off, off + len(body))
            sub_spans = tuple((off + s, off + min(e, len(body))) for s, e, _ in subs if s < len(body))
            hit = Hit.single(self.name, span, rank=rank, score=score, score_kind="term-rarity",
                             query=q.describe(), sub_spans=sub_spans,
                             excerpt=body.decode("utf-8", errors="replace"))
            hits.append(hit)
        if hits and budget.first_hit_at is None:
            budget.first_hit_at = time.monotonic()
        return hits


Layer = GrepLayer
