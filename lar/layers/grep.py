"""``grep``: ripgrep over the current files, always current, and the engine's change detector.

Query forms (advertised in the status):
- a plain string: the literal phrase, and each of its words singly (lines with the phrase rank
  first, then lines matching more and rarer words); nothing is read as a regex;
- ``{"grep": "text"}``: that literal text only;
- ``{"grep": {"regex": "fo+|ba[rz]"}}``: a Rust-regex (ripgrep syntax);
- ``{"grep": {"literal": "x"} | {"any": ["a", "b"]}, "case": "smart"|"sensitive"|"insensitive"}``.
Case is smart by default (insensitive unless the pattern has an upper-case letter).
Spans are byte offsets of the matched line (without its newline); sub-spans are the matches.
The ripgrep output read before the deadline is ranked; a run cut short reports ``aborted``.

grep sees the files the building layers index: ripgrep reads every file as text (``--text``;
its own binary detection would drop a file whose first NUL byte lies past the scanner's 8 KiB
sniff) except those the scanner skipped as binary (``lar.store.binaryignore``), and a match
counts only in a file the scanner indexed (the stat check drops the rest); a file name may hold a newline (paths end at the NUL ``--null`` puts
after them). Formats whose units are extracted text (PDF) are left to the layers that read it.
"""
from __future__ import annotations

import asyncio
import itertools
import math
import os
import time
from collections import Counter, defaultdict
from typing import Any

from lar.core.errors import QueryError
from lar.core.layer import BaseLayer, Budget, ScopeView
from lar.core.scope import material, state_glob
from lar.store.binaryignore import ignore_path
from lar.store.extract import BINARY_EXTRACTABLE
from lar.store.rg import BASE_FLAGS, ignore_flags, rg_path
from lar.core.types import Hit, Span
from lar.layers.grep_lines import deadline_stop, file_runs, group_lines, row_end  # noqa: F401 (row_end: re-exported)
from lar.layers.grep_query import GrepQuery, parse_query
from lar.layers.grep_run import RgRun

MAX_OUTPUT_BYTES = 64 << 20
_WINDOW = 4096  # bytes read on each side of a match to find its line


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

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return frozenset()  # no options

    def default_query(self, query: str) -> GrepQuery:
        return parse_query(query, default_form=True)

    def command(self, q: GrepQuery, scope: ScopeView) -> list[str]:
        """ripgrep in its compact form: one line per match, ``path NUL line:offset:match``.
        (Measured: ``--json`` output costs lar 3-4 us of Python per matching line to decode;
        this form is parsed by one C-level regex over the whole buffer.)"""
        cmd = [rg_path(), *BASE_FLAGS, *ignore_flags(self.ctx.root), "--max-filesize",
               str(self.ctx.max_bytes), "--text", "--null", "--with-filename", "--line-number",
               "--byte-offset", "--only-matching", "--no-heading", "--color", "never"]
        cmd += {"smart": ["--smart-case"], "sensitive": ["--case-sensitive"],
                "insensitive": ["--ignore-case"]}[q.case]
        if not q.regex:
            cmd.append("--fixed-strings")
        # Include globs are applied to the hits, not given to rg: a positive --glob overrides
        # ripgrep's ignore rules (scope '**' would reach ignored files, hidden ones, lar's state).
        # Excluding globs only narrow, so they go to rg; lar's state folder is always excluded.
        for g in scope.scope.exclude:
            cmd += ["--glob", f"!{g}"]
        for ext in sorted(BINARY_EXTRACTABLE):  # their units are extracted text, not the bytes
            cmd += ["--iglob", f"!*{ext}"]
        state = state_glob(self.ctx.root, self.ctx.state_dir)
        if state:
            cmd += ["--glob", f"!{state}"]
        skips = ignore_path(self.ctx.state_dir)  # the files the scanner skipped as binary
        if skips.exists():
            cmd += ["--ignore-file", str(skips)]
        for p in q.patterns:
            cmd += ["-e", p]
        cmd.append("./")
        return cmd

    async def search(self, query, scope, budget: Budget, candidates=None) -> list[Hit]:
        q = parse_query(query)
        if scope.scope.hashes is not None and not scope.scope.hashes:
            budget.set_coverage(1.0)
            return []
        loop = asyncio.get_running_loop()
        # stop reading early enough to rank what was read before the caller's deadline
        reserve = min(0.05, max(0.003, 0.25 * budget.remaining()))
        stop_at = budget.deadline - reserve
        run = RgRun(self.command(q, scope), str(self.ctx.root), MAX_OUTPUT_BYTES)
        watchdog = loop.call_at(loop.time() + max(0.0, stop_at - time.monotonic()), run.kill)
        try:  # ripgrep and the ranking on a worker thread (lar.layers.grep_run)
            return await asyncio.to_thread(self._run_and_rank, run, q, scope, budget)
        except asyncio.CancelledError:
            run.kill()
            raise
        finally:
            watchdog.cancel()

    def _run_and_rank(self, run: RgRun, q: GrepQuery, scope: ScopeView, budget: Budget) -> list[Hit]:
        res = run.run()
        if res.capped:
            budget.mark_partial(f"stopped after {MAX_OUTPUT_BYTES >> 20} MiB of matches")
        if not res.killed and res.returncode == 2 and not res.out:
            err = res.stderr.decode(errors="replace").strip()
            if err:  # with no message: nothing matched and some path could not be read
                raise QueryError("grep", f"ripgrep refused the pattern(s) {list(q.patterns)!r}: {err}")
        if res.killed:
            budget.mark_partial()
        budget.coverage = None if res.killed else 1.0
        return self._rank(q, res.out, scope, budget)

    def _rank(self, q: GrepQuery, out: bytes, scope: ScopeView, budget: Budget) -> list[Hit]:
        """Score matching lines by the rarity of the query terms they contain (phrase first).

        Linear in rg's output and checked against the deadline every few thousand rows (a
        cut-short ranking marks the run partial). Ties, common for one-word queries, go
        round-robin over files with the most matching lines first, earlier lines first.
        """
        if not out:
            return []
        fold = q.case == "insensitive" or (
            q.case == "smart" and not any(c.isupper() for p in q.patterns for c in p))
        key_ids: dict[bytes, int] = {}
        key_names: list[str] = []

        def key_id(m: bytes) -> int:
            k = m.decode("utf-8", errors="replace")
            k = k.lower() if fold else k
            for i, name in enumerate(key_names):
                if name == k:
                    key_ids[m] = i
                    return i
            key_names.append(k)
            key_ids[m] = len(key_names) - 1
            return key_ids[m]

        # group rg's rows (one per match, consecutive per line) into lines (lar.layers.grep_lines)
        lines = group_lines(out, key_id, deadline_stop(budget.deadline))
        line_file, line_sig = lines.files, lines.sigs
        if lines.cut_short:
            budget.mark_partial()
        # document frequency in lines of each key, then a score per distinct signature
        sig_count = Counter(line_sig)
        df = defaultdict(int)
        for sig, c in sig_count.items():
            for k in (sig if isinstance(sig, frozenset) else (sig,)):
                df[k] += c
        n = len(line_sig)
        allowed = None
        if not q.regex:  # a match that is not one of the patterns cannot happen, but be safe
            pats = {(p.lower() if fold else p) for p in q.patterns}
            allowed = {i for i, name in enumerate(key_names) if name in pats}
        phrase = (q.phrase.lower() if fold else q.phrase) if q.phrase and len(q.patterns) > 1 else None

        def sig_score(sig) -> float:
            ks = sig if isinstance(sig, frozenset) else (sig,)
            if allowed:
                ks = [k for k in ks if k in allowed] or list(ks)
            return (sum(math.log(1.0 + n / df[k]) for k in ks)
                    + (10.0 if phrase is not None and any(key_names[k] == phrase for k in ks) else 0.0))

        score_of = {sig: sig_score(sig) for sig in sig_count}
        buckets: dict[float, Any] = defaultdict(list)
        if len(score_of) == 1:  # one score for every line (a one-word query): no loop a line
            buckets[next(iter(score_of.values()))] = range(n)
        else:
            for idx, sig in enumerate(line_sig):
                buckets[score_of[sig]].append(idx)
        per_file = Counter(line_file)

        def ordered():
            for score in sorted(buckets, reverse=True):
                by_file = file_runs(line_file, per_file) if len(buckets[score]) == n else None
                if by_file is None:
                    by_file = {}
                    for idx in buckets[score]:
                        by_file.setdefault(line_file[idx], []).append(idx)
                files = sorted(by_file, key=lambda f: (-per_file[f], f))
                depth = 0
                while files:
                    still = []
                    for f in files:
                        lst = by_file[f]
                        if depth < len(lst):
                            i = lst[depth]
                            yield (line_file[i], lines.matches(i), score)
                            still.append(f)
                    files = still
                    depth += 1

        return self._hits(q, ordered(), scope, budget)

    def _hits(self, q: GrepQuery, ordered, scope: ScopeView, budget: Budget) -> list[Hit]:
        """Turn the best lines into hits: stat-check (and re-hash) only the files they come
        from, in batches, read each file once, and verify rg's offsets against its bytes."""
        hits: list[Hit] = []
        state = state_glob(self.ctx.root, self.ctx.state_dir)
        batch_size = max(16, budget.pool * 2)
        files: dict[str, Any] = {}  # each file opened once for all its lines (closed below)
        try:
            self._hits_into(hits, q, ordered, scope, budget, state, files, batch_size)
        finally:
            for fh in files.values():
                fh.close()
        return hits

    def _hits_into(self, hits, q, ordered, scope, budget, state, files, batch_size) -> None:
        seen: set[tuple[str, int]] = set()
        current: dict[str, str | None] = {}
        while len(hits) < budget.pool:
            batch = list(itertools.islice(ordered, batch_size))
            if not batch:
                break
            # never stat or hash a path that may not be material (a second guard behind rg)
            todo = sorted({p for p in (_path_str(t[0]) for t in batch) if material(p, state)}
                          - current.keys())
            if todo:
                current.update(self.ctx.detect(todo) if self.ctx.detect else {})
            for raw_path, matches, score in batch:
                path = _path_str(raw_path)
                h = current.get(path)
                if h is None or not scope.scope.matches(path, h) or not material(path, state):
                    continue
                off0, m0 = matches[0]
                found = self._line_at(path, off0, m0, files)
                if found is None:
                    continue  # vanished, or changed after rg read it: offsets no longer hold
                start, end, line = found
                if (h, start) in seen:
                    continue  # identical files share a hash: one hit, several paths
                seen.add((h, start))
                subs = tuple((o, min(o + len(m), end)) for o, m in matches if o < end)
                hits.append(Hit.single(
                    self.name, Span(h, start, end), rank=len(hits) + 1, score=score,
                    score_kind="term-rarity", query=q.describe(), sub_spans=subs,
                    excerpt=line.decode("utf-8", errors="replace")))
                if len(hits) >= budget.pool:
                    break
                if time.monotonic() > budget.deadline:
                    budget.mark_partial()
                    break
            if time.monotonic() > budget.deadline:
                budget.mark_partial()
                break


    def _line_at(self, path: str, off: int, match: bytes,
                 files: dict[str, Any] | None = None) -> tuple[int, int, bytes] | None:
        """The line around byte ``off`` of ``path`` as (start, end, bytes), reading only a
        window of the file; None if the match is no longer at ``off`` (file changed). ``files``
        keeps the files opened (path -> open file; the caller closes them)."""
        try:
            fh = files.get(path) if files is not None else None
            if fh is None:
                fh = open(os.path.join(self.ctx.root, path), "rb")
                if files is None:
                    with fh:
                        return self._window(fh, off, match)
                files[path] = fh
            return self._window(fh, off, match)
        except OSError:
            return None

    @staticmethod
    def _window(fh, off: int, match: bytes) -> tuple[int, int, bytes] | None:
        lo = max(0, off - _WINDOW)
        fh.seek(lo)
        buf = fh.read(off - lo + len(match) + _WINDOW)
        i = off - lo
        start = buf.rfind(b"\n", 0, i) + 1
        end = buf.find(b"\n", i + len(match))
        if (start == 0 and lo > 0) or (end < 0 and len(buf) == off - lo + len(match) + _WINDOW):
            fh.seek(0)  # a line longer than the window: read the whole file
            buf, lo, i = fh.read(), 0, off
            start = buf.rfind(b"\n", 0, i) + 1
            end = buf.find(b"\n", i + len(match))
        if buf[i:i + len(match)] != match:
            return None
        end = len(buf) if end < 0 else end
        if end > start and buf[end - 1:end] == b"\r":
            end -= 1
        return lo + start, lo + end, buf[start:end]


def _path_str(raw: bytes) -> str:
    if raw.startswith(b"./"):
        raw = raw[2:]
    return raw.decode("utf-8", errors="surrogateescape")
