#!/usr/bin/env python
"""Spine benchmark: index, anytime search, grep-vs-ripgrep and edit-to-search on the Python stdlib.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_spine.py [--out benchmarks/results/DATE-spine]

Corpus: the ``Lib/`` of the interpreter running it (``sysconfig.get_paths()["stdlib"]``), copied
without ``site-packages`` and ``__pycache__`` into a temp folder (so files can be edited safely);
the lar state dir is another temp folder. Sections:

1. cold index (``lar.open`` on a fresh state: rg --files + hash every file) and warm re-scan
   (``eng.index_now()`` with nothing changed: the stat pass);
2. N queries at timebox 100 ms with the default layers (first result, elapsed, overshoot, aborts);
3. grep layer vs the equivalent raw ``rg --json`` command, interleaved, R repetitions
   (+ a cProfile of 10 grep-only calls when lar/raw > 1.3x, or with --profile);
4. edit-to-search: append a unique token to a file, time until a search returns that file
   (grep only, then all layers), and check the hit's hash is the new content's hash;
5. racy same-size edit: two same-size writes inside one mtime tick around a change-detector
   pass; checks whether the index (and the hit) keep the stale hash.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as _dt
import io
import json
import logging
import os
import platform
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import lar
from lar.layers.grep import GrepLayer
from lar.store.rg import rg_path
from lar.store import content_hash
from lar.store.scanner import list_files

SEED = 20261129
_DEF_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(", re.M)
_COMMENT_RE = re.compile(r"^[ \t]*#+[ \t]*(\S.*)$", re.M)
_DOC_RE = re.compile(r'^[ \t]*[rRuU]?"""[ \t]*(\S[^\n]*)$', re.M)
_WORD = re.compile(r"^[A-Za-z]{3,}$")
_STOP = frozenset("the and for that this with from are was not you can but has have its into "
                  "will all any one may been use used also then than when which what".split())


# -- helpers ------------------------------------------------------------------------------------
def pct(values, p):
    """Nearest-rank-with-interpolation percentile (p in 0..100); None for no values."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo), 3)


def ms(x, nd=1):
    return None if x is None else round(x * 1000.0, nd)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def copy_stdlib(src: Path, dst: Path) -> None:
    def ignore(dirpath, names):
        out = {n for n in names if n == "__pycache__"}
        if Path(dirpath).resolve() == src.resolve() and "site-packages" in names:
            out.add("site-packages")
        return out

    shutil.copytree(src, dst, ignore=ignore, symlinks=True)


def corpus_size(root: Path) -> tuple[int, int]:
    n = b = 0
    for dp, dns, fns in os.walk(root):
        for f in fns:
            p = os.path.join(dp, f)
            if not os.path.islink(p):
                n += 1
                b += os.path.getsize(p)
    return n, b


def rg_version() -> str:
    out = subprocess.run([rg_path(), "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "?"


def machine_facts() -> dict:
    return {
        "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "sched_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "python_full": sys.version,
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "rg": rg_version(),
        "rg_path": rg_path(),
        "lar_version": lar.__version__,
    }


# -- queries ------------------------------------------------------------------------------------
def make_queries(root: Path, n_ident: int, n_phrase: int, seed: int) -> list[dict]:
    idents: set[str] = set()
    phrases: set[str] = set()
    for rel in sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")):
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for m in _DEF_RE.finditer(text):
            name = m.group(1)
            if len(name) >= 6 and not name.startswith("__") and not name.startswith("test"):
                idents.add(name)
        for rx in (_COMMENT_RE, _DOC_RE):
            for m in rx.finditer(text):
                line = m.group(1)
                words = line.split()
                for i in range(len(words)):
                    for size in (2, 3):
                        win = words[i:i + size]
                        if len(win) < size or not all(_WORD.match(w) for w in win):
                            continue
                        if sum(w.lower() not in _STOP for w in win) < 2:
                            continue
                        ph = " ".join(win)
                        if ph in line:  # literally present (single spaces)
                            phrases.add(ph)
    rnd = random.Random(seed)
    ident_q = rnd.sample(sorted(idents), n_ident)
    phrase_q = rnd.sample(sorted(phrases), n_phrase)
    out = [{"q": q, "kind": "identifier"} for q in ident_q] + [{"q": q, "kind": "phrase"} for q in phrase_q]
    # interleave kinds so any drift over the run hits both equally
    out.sort(key=lambda d: rnd.random())
    return out


# -- sections -----------------------------------------------------------------------------------
def section_index(corpus: Path, state: Path, warm_reps: int):
    t0 = time.perf_counter()
    eng = lar.open(corpus, state=state)
    cold = time.perf_counter() - t0
    scan = dict(eng._last_scan)
    units, distinct = eng.index.counts()
    live = eng.index.live()
    unit_bytes = sum(r.size for r in live)
    # listing alone (rg --files), to split the warm re-scan into listing vs stat pass
    lists = []
    for _ in range(warm_reps):
        t = time.perf_counter()
        list_files(eng.root, eng.scanner.exclude)
        lists.append(time.perf_counter() - t)
    warm, warm_reports = [], []
    for _ in range(warm_reps):
        t = time.perf_counter()
        rep = eng.index_now()
        warm.append(time.perf_counter() - t)
        warm_reports.append(rep)
    out = {
        "cold_open_s": round(cold, 4),
        "cold_scan_report": scan,
        "units": units,
        "distinct_hashes": distinct,
        "unit_bytes": unit_bytes,
        "skipped": scan.get("skipped"),
        "skipped_reasons": dict(Counter(r[1].split(" (")[0] for r in eng.index.skipped())),
        "warm_rescan_s": {"median": round(median(warm), 4), "min": round(min(warm), 4),
                          "max": round(max(warm), 4), "reps": warm_reps},
        "warm_rescan_changed": sum(r["added"] + r["changed"] + r["deleted"] for r in warm_reports),
        "rg_files_listing_s": {"median": round(median(lists), 4), "min": round(min(lists), 4)},
        "stat_pass_s_est": round(median(warm) - median(lists), 4),
    }
    return eng, out


def section_timebox(eng, queries, timebox: float, k: int):
    # one warm-up call (starts the loop thread); not counted
    w = eng.search("warm up query", timebox=timebox, k=k)
    rows = []
    aborted = Counter()
    states = defaultdict(Counter)
    for item in queries:
        t = time.perf_counter()
        res = eng.search(item["q"], timebox=timebox, k=k)
        wall = time.perf_counter() - t
        runs = {r.name: {"state": r.state.value, "elapsed_ms": ms(r.elapsed, 2), "n": r.contributions,
                         "reason": r.reason} for r in res.runs}
        for r in res.runs:
            states[r.name][r.state.value] += 1
            if r.state.value == "aborted":
                aborted[r.name] += 1
        rows.append({"q": item["q"], "kind": item["kind"], "elapsed_ms": ms(res.elapsed, 2),
                     "wall_ms": ms(wall, 2), "first_result_ms": ms(res.first_result, 2),
                     "overshoot_ms": ms(res.elapsed - res.timebox, 2), "hits": len(res.hits),
                     "runs": runs})
    el = [r["elapsed_ms"] for r in rows]
    fr = [r["first_result_ms"] for r in rows]
    ov = [r["overshoot_ms"] for r in rows]
    wl = [r["wall_ms"] for r in rows]
    summary = {
        "timebox_ms": timebox * 1000, "k": k, "queries": len(rows),
        "warmup_elapsed_ms": ms(w.elapsed, 2),
        "first_result_ms": {"p50": pct(fr, 50), "p95": pct(fr, 95),
                            "none": sum(x is None for x in fr)},
        "elapsed_ms": {"p50": pct(el, 50), "p95": pct(el, 95), "max": max(el)},
        "wall_ms": {"p50": pct(wl, 50), "p95": pct(wl, 95), "max": max(wl)},
        "overshoot_ms": {"p50": pct(ov, 50), "p99": pct(ov, 99), "max": max(ov),
                         "over_5ms": sum(x > 5 for x in ov), "over_20ms": sum(x > 20 for x in ov)},
        "aborted_calls_per_layer": {n: aborted.get(n, 0) for n in states},
        "states_per_layer": {n: dict(c) for n, c in states.items()},
    }
    return summary, rows


def raw_command(layer: GrepLayer, eng, q: str) -> list[str]:
    """The baseline: raw ``rg --json`` with exactly the patterns lar's grep layer runs."""
    gq = layer.default_query(q)
    cmd = [rg_path(), "--json", "--no-config", "--no-require-git", "--no-messages",
           "--max-filesize", str(eng.max_bytes), "--smart-case", "--fixed-strings"]
    for p in gq.patterns:
        cmd += ["-e", p]
    return cmd + ["./"]


def lar_mode_command(layer: GrepLayer, eng, q: str) -> list[str]:
    """rg exactly as lar's layer runs it (compact --only-matching output), for lar's own overhead."""
    return layer.command(layer.default_query(q), eng.scope_view())


def run_raw(cmd, cwd) -> tuple[float, int, int]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    out = proc.stdout
    n = out.count(b'\n{"type":"match"') + (1 if out.startswith(b'{"type":"match"') else 0)
    return dt, n, len(out)


def run_lar_grep(eng, q):
    t = time.perf_counter()
    res = eng.search(q, layers=["grep"], timebox=10)
    wall = time.perf_counter() - t
    r = res.run("grep")
    return {"grep_s": r.elapsed, "call_s": res.elapsed, "wall_s": wall, "state": r.state.value,
            "reason": r.reason, "pool": res.pool.get("grep", 0)}


def section_grep_vs_rg(eng, queries, reps: int):
    layer = eng.layers["grep"]
    corpus = str(eng.root)
    per_query = []
    for qi, item in enumerate(queries):
        q = item["q"]
        cmd = raw_command(layer, eng, q)
        cmd_lar_mode = lar_mode_command(layer, eng, q)
        raw_t, lar_g, lar_c, lar_w, mode_t = [], [], [], [], []
        states, reasons = set(), set()
        nmatch = out_bytes = 0
        for rep in range(reps):
            order = ("raw", "lar") if (qi + rep) % 2 == 0 else ("lar", "raw")
            for which in order:
                if which == "raw":
                    dt, nmatch, out_bytes = run_raw(cmd, corpus)
                    raw_t.append(dt)
                    mode_t.append(run_raw(cmd_lar_mode, corpus)[0])
                else:
                    r = run_lar_grep(eng, q)
                    lar_g.append(r["grep_s"])
                    lar_c.append(r["call_s"])
                    lar_w.append(r["wall_s"])
                    states.add(r["state"])
                    if r["reason"]:
                        reasons.add(r["reason"])
        raw_m, g_m, c_m, w_m = median(raw_t), median(lar_g), median(lar_c), median(lar_w)
        per_query.append({
            "q": q, "kind": item["kind"], "patterns": cmd[cmd.index("--fixed-strings") + 1:-1][1::2],
            "raw_match_lines": nmatch, "raw_json_bytes": out_bytes,
            "raw_ms": ms(raw_m, 2), "raw_lar_mode_ms": ms(median(mode_t), 2),
            "lar_grep_ms": ms(g_m, 2), "lar_call_ms": ms(c_m, 2),
            "lar_wall_ms": ms(w_m, 2),
            "ratio_grep": round(g_m / raw_m, 3), "ratio_call": round(c_m / raw_m, 3),
            "lar_states": sorted(states), "lar_reasons": sorted(reasons),
        })
    rg = [p["ratio_grep"] for p in per_query]
    rc = [p["ratio_call"] for p in per_query]
    sum_raw = sum(p["raw_ms"] for p in per_query)
    summary = {
        "reps": reps, "queries": len(per_query),
        "raw_lar_mode_ms": {"p50": pct([p["raw_lar_mode_ms"] for p in per_query], 50),
                            "sum": round(sum(p["raw_lar_mode_ms"] for p in per_query), 1)},
        "raw_ms": {"p50": pct([p["raw_ms"] for p in per_query], 50),
                   "p95": pct([p["raw_ms"] for p in per_query], 95), "sum": round(sum_raw, 1)},
        "lar_grep_ms": {"p50": pct([p["lar_grep_ms"] for p in per_query], 50),
                        "p95": pct([p["lar_grep_ms"] for p in per_query], 95),
                        "sum": round(sum(p["lar_grep_ms"] for p in per_query), 1)},
        "lar_call_ms": {"p50": pct([p["lar_call_ms"] for p in per_query], 50),
                        "p95": pct([p["lar_call_ms"] for p in per_query], 95),
                        "sum": round(sum(p["lar_call_ms"] for p in per_query), 1)},
        "ratio_grep": {"median_of_ratios": round(median(rg), 3), "p95": round(pct(rg, 95), 3),
                       "max": max(rg),
                       "ratio_of_sums": round(sum(p["lar_grep_ms"] for p in per_query) / sum_raw, 3)},
        "ratio_call": {"median_of_ratios": round(median(rc), 3), "p95": round(pct(rc, 95), 3),
                       "max": max(rc),
                       "ratio_of_sums": round(sum(p["lar_call_ms"] for p in per_query) / sum_raw, 3)},
        "by_output_size": _split_by_output(per_query, 1000),
        "lar_truncated_queries": [p["q"] for p in per_query if "aborted" in p["lar_states"]],
        "goal_ratio": 1.3,
    }
    return summary, per_query


def _split_by_output(per_query, threshold):
    out = {}
    for name, grp in ((f"match_lines<{threshold}", [p for p in per_query if p["raw_match_lines"] < threshold]),
                      (f"match_lines>={threshold}", [p for p in per_query if p["raw_match_lines"] >= threshold])):
        if not grp:
            continue
        out[name] = {
            "queries": len(grp),
            "median_ratio_call": round(median([p["ratio_call"] for p in grp]), 3),
            "ratio_of_sums_call": round(sum(p["lar_call_ms"] for p in grp) / sum(p["raw_ms"] for p in grp), 3),
            "median_ratio_grep": round(median([p["ratio_grep"] for p in grp]), 3),
        }
    return out


def findings(R) -> list[str]:
    """Data-driven notes for the md."""
    notes = []
    rows = R.get("timebox_rows", [])
    lost = [r for r in rows if r["runs"].get("grep", {}).get("reason") == "timebox ended before it finished"]
    if lost:
        notes.append(
            f"{len(lost)}/{len(rows)} timebox calls: grep was cancelled by the orchestrator "
            f"(reason 'timebox ended before it finished') and returned 0 hits although it had been "
            f"reading matches for ~{R['timebox']['timebox_ms']:.0f} ms (queries: "
            + ", ".join(f"`{r['q']}`" for r in lost) + ").")
    late = [r for r in rows if r["runs"].get("grep", {}).get("elapsed_ms", 0) > R["timebox"]["timebox_ms"]]
    if late:
        notes.append(
            f"{len(late)}/{len(rows)} timebox calls: the grep run itself ended after the deadline "
            f"(max grep elapsed {max(r['runs']['grep']['elapsed_ms'] for r in late)} ms); overshoot "
            "comes from work grep does after its own deadline (kill + wait + _rank, incl. ctx.detect "
            "over every matched path), which is synchronous and cannot be cancelled.")
    split = R.get("grep_vs_rg", {}).get("by_output_size", {})
    if split:
        notes.append("grep vs raw rg by output size: " + "; ".join(
            f"{k}: {v['queries']} queries, median ratio {v['median_ratio_call']}, ratio of sums "
            f"{v['ratio_of_sums_call']}" for k, v in split.items()) + ".")
    pr = R.get("profile")
    if pr:
        sel = pr["selected"]
        tot = sel.get("total (run_until_complete)", {}).get("cum_s") or 1
        parts = [(k, v["cum_s"]) for k, v in sel.items() if k != "total (run_until_complete)"]
        notes.append("Profile shares of the profiled total (cumulative, overlapping): " + ", ".join(
            f"{k} {100 * c / tot:.0f}%" for k, c in sorted(parts, key=lambda t: -t[1])) + ".")
    return notes


def section_profile(eng, queries, n: int):
    """cProfile of n grep-only calls. eng.search runs on lar's loop thread (invisible to a
    main-thread profiler), so the same coroutine (eng.asearch) runs here on a main-thread loop."""
    loop = asyncio.new_event_loop()
    # also a coarse manual breakdown: time in ctx.detect and in the engine's _enrich
    acc = defaultdict(float)
    orig_detect = eng.ctx.detect
    orig_enrich = eng._enrich

    def timed_detect(paths, *a, **kw):
        t = time.perf_counter()
        try:
            return orig_detect(paths, *a, **kw)
        finally:
            acc["detect_s"] += time.perf_counter() - t
            acc["detect_paths"] += len(paths)

    def timed_enrich(*a, **kw):
        t = time.perf_counter()
        try:
            return orig_enrich(*a, **kw)
        finally:
            acc["enrich_s"] += time.perf_counter() - t

    eng.ctx.detect = timed_detect
    eng._enrich = timed_enrich
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    grep_total = 0.0
    try:
        for item in queries[:n]:
            prof.enable()
            res = loop.run_until_complete(eng.asearch(item["q"], layers=["grep"], timebox=10))
            prof.disable()
            grep_total += res.run("grep").elapsed
    finally:
        eng.ctx.detect = orig_detect
        del eng._enrich  # back to the class method
        loop.close()
    wall = time.perf_counter() - t0
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("cumulative").print_stats(28)
    cum = s.getvalue()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(18)
    tot = s.getvalue()

    # selected functions' cumulative time
    picks = {}
    for (fn, line, name), (cc, nc, tt, ct, callers) in st.stats.items():
        key = None
        if name == "loads" and fn.endswith("json/__init__.py"):
            key = "json.loads"
        elif name == "_rank" and fn.endswith("grep.py"):
            key = "GrepLayer._rank (incl. detect)"
        elif name == "_detect" and fn.endswith("engine.py"):
            key = "Engine._detect (change detector)"
        elif name == "refresh" and fn.endswith("scanner.py"):
            key = "Scanner.refresh (stat + index lookups)"
        elif name == "_enrich" and fn.endswith("engine.py"):
            key = "Engine._enrich"
        elif name == "wait_for" and fn.endswith("tasks.py"):
            key = "asyncio.wait_for (per line)"
        elif name == "readline" and fn.endswith("streams.py"):
            key = "StreamReader.readline"
        elif name == "search" and fn.endswith("grep.py"):
            key = "GrepLayer.search"
        elif name == "get" and fn.endswith("fileindex.py"):
            key = "FileIndex.get (sqlite)"
        elif name == "_text_or_bytes" and fn.endswith("grep.py"):
            key = "grep._text_or_bytes"
        elif name == "run_until_complete":
            key = "total (run_until_complete)"
        if key:
            picks[key] = {"cum_s": round(ct, 4), "tot_s": round(tt, 4), "calls": nc}
    return {
        "calls": n, "wall_s": round(wall, 3), "grep_run_elapsed_sum_s": round(grep_total, 3),
        "note": "under cProfile (inflates Python-heavy parts); main-thread loop running eng.asearch",
        "manual": {k: round(v, 4) if k.endswith("_s") else int(v) for k, v in acc.items()},
        "selected": picks, "top_cumulative": cum, "top_tottime": tot,
    }


def _find_hit(res, rel):
    for h in res.hits:
        if rel in h.paths:
            return h
    return None


def section_edit(eng, corpus: Path, n: int, seed: int):
    rnd = random.Random(seed + 1)
    candidates = sorted(r.path for r in eng.index.live()
                        if r.path.endswith(".py") and "/" not in r.path and r.size < 200_000)
    files = rnd.sample(candidates, n)
    rows = []
    for i, rel in enumerate(files):
        path = corpus / rel
        row = {"file": rel}
        for mode, layers in (("grep", ["grep"]), ("all", None)):
            token = f"lar_edit_probe_{i}_{mode}_{rnd.getrandbits(32):08x}"
            data = path.read_bytes()
            sep = b"" if data.endswith(b"\n") or not data else b"\n"
            t0 = time.perf_counter()
            with open(path, "ab") as fh:
                fh.write(sep + f"# {token}\n".encode())
            attempts, hit, res = 0, None, None
            while hit is None and attempts < 20:
                attempts += 1
                res = eng.search(token, layers=layers, timebox=1)
                hit = _find_hit(res, rel)
            dt = time.perf_counter() - t0
            new = path.read_bytes()
            row[mode] = {
                "token": token, "ms": ms(dt, 2), "attempts": attempts, "found": hit is not None,
                "hash_ok": hit is not None and hit.hash == content_hash(new),
                "excerpt_ok": hit is not None and token in hit.excerpt,
                "signals": list(hit.signals) if hit else [],
                "call_elapsed_ms": ms(res.elapsed, 2) if res else None,
            }
        rows.append(row)
    return {
        "files": n,
        "grep_ms_median": median([r["grep"]["ms"] for r in rows]),
        "all_ms_median": median([r["all"]["ms"] for r in rows]),
        "grep_ms_max": max(r["grep"]["ms"] for r in rows),
        "all_ms_max": max(r["all"]["ms"] for r in rows),
        "all_found_first_try": all(r[m]["attempts"] == 1 and r[m]["found"] for r in rows for m in ("grep", "all")),
        "all_hash_ok": all(r[m]["hash_ok"] for r in rows for m in ("grep", "all")),
    }, rows


def section_racy(eng, corpus: Path, n: int, seed: int):
    """Same-size rewrite that keeps the mtime the change detector recorded.

    ``natural``: write A, search A (grep: detect + cache), write B (same size) at once.
    On filesystems with fine-grained (or multigrain, Linux >= 6.13) timestamps the mtimes differ.
    ``coarse``: the same, then ``os.utime`` puts back A's mtime, as a coarse-timestamp filesystem
    (FAT 2 s, older kernels' jiffy ticks, some network filesystems) or an mtime-preserving tool
    (``cp -p``, ``rsync -t``, ``tar x``) would leave it.
    """
    rnd = random.Random(seed + 2)
    candidates = sorted(r.path for r in eng.index.live()
                        if r.path.endswith(".py") and "/" not in r.path and r.size < 100_000)
    rows = []
    for i in range(n):
        for mode in ("natural", "coarse"):
            rel = rnd.choice(candidates)
            path = corpus / rel
            orig = path.read_bytes()
            base = orig if orig.endswith(b"\n") else orig + b"\n"
            a = f"lar_racy_{i:02d}_A_{rnd.getrandbits(32):08x}"
            b = f"lar_racy_{i:02d}_B_{rnd.getrandbits(32):08x}"
            c1 = base + f"# {a}\n".encode()
            c2 = base + f"# {b}\n".encode()
            path.write_bytes(c1)
            st1 = os.stat(path)
            res_a0 = eng.search(a, layers=["grep"], timebox=1)  # indexes (and caches) content A
            path.write_bytes(c2)
            if mode == "coarse":
                os.utime(path, ns=(st1.st_atime_ns, st1.st_mtime_ns))
            st2 = os.stat(path)
            res = eng.search(b, layers=["grep"], timebox=1)
            hit = _find_hit(res, rel)
            rec = eng.index.get(rel)
            eng.index_now()
            rec_after_scan = eng.index.get(rel)
            res_a = eng.search(a, layers=["grep"], timebox=1)  # A is gone from the file
            fetched = None
            if hit is not None:
                try:
                    fetched = eng.fetch(hit.id).text
                except Exception as exc:  # noqa: BLE001 - report, not crash
                    fetched = f"{type(exc).__name__}: {exc}"
            rows.append({
                "mode": mode, "file": rel, "same_mtime": st1.st_mtime_ns == st2.st_mtime_ns,
                "search_A_found_file_before": _find_hit(res_a0, rel) is not None,
                "fetch_text_has_B": fetched is not None and b in fetched,
                "fetch_text_has_A": fetched is not None and a in fetched,
                "found": hit is not None,
                "hit_hash_is_new": hit is not None and hit.hash == content_hash(c2),
                "hit_hash_is_old": hit is not None and hit.hash == content_hash(c1),
                "hit_excerpt_has_B": hit is not None and b in hit.excerpt,
                "index_stale": rec.hash != content_hash(c2),
                "index_stale_after_full_scan": rec_after_scan.hash != content_hash(c2),
                "search_A_still_finds_file": _find_hit(res_a, rel) is not None,
            })
            path.write_bytes(orig)  # restore (size differs, so the index picks it up)
            eng.ctx.detect([rel])
    out = {"trials_per_mode": n}
    for mode in ("natural", "coarse"):
        rs = [r for r in rows if r["mode"] == mode]
        out[mode] = {
            "same_mtime": sum(r["same_mtime"] for r in rs),
            "index_stale": sum(r["index_stale"] for r in rs),
            "index_stale_after_full_scan": sum(r["index_stale_after_full_scan"] for r in rs),
            "search_B_found_file": sum(r["found"] for r in rs),
            "hit_hash_is_old": sum(r["hit_hash_is_old"] for r in rs),
            "hit_hash_is_new": sum(r["hit_hash_is_new"] for r in rs),
            "fetch_of_B_hit_returns_A_text": sum(r["fetch_text_has_A"] for r in rs),
            "search_A_after_finds_file": sum(r["search_A_still_finds_file"] for r in rs),
        }
    return out, rows


# -- report -------------------------------------------------------------------------------------
def write_md(path: Path, R: dict) -> None:
    f, ix, tb, gv, ed = R["machine"], R["index"], R["timebox"], R["grep_vs_rg"], R["edit_to_search"]
    L = []
    L.append(f"# lar spine benchmark — {f['date'][:10]}\n")
    L.append(f"Machine: {f['nproc']} CPUs, Python {f['python']} ({f['platform']}), {f['rg']}. "
             f"Corpus: stdlib `{R['corpus']['source']}` without site-packages/__pycache__, "
             f"{R['corpus']['files']} files, {R['corpus']['bytes'] / 1e6:.1f} MB, copied to a temp dir "
             f"(page cache warm). Total run {R['total_s']:.0f} s.\n")
    L.append("## 1. Index\n")
    L.append("| metric | value |\n|---|---|")
    L.append(f"| cold `lar.open` (list + hash all) | {ix['cold_open_s'] * 1000:.0f} ms |")
    L.append(f"| units / distinct hashes | {ix['units']} / {ix['distinct_hashes']} |")
    L.append(f"| unit bytes | {ix['unit_bytes'] / 1e6:.1f} MB (hashed {ix['cold_scan_report'].get('hashed_bytes', 0) / 1e6:.1f} MB) |")
    L.append(f"| skipped | {ix['skipped']} {ix['skipped_reasons']} |")
    L.append(f"| warm re-scan `index_now()` (median of {ix['warm_rescan_s']['reps']}) | {ix['warm_rescan_s']['median'] * 1000:.0f} ms |")
    L.append(f"| of which `rg --files` listing | {ix['rg_files_listing_s']['median'] * 1000:.0f} ms |")
    L.append(f"| stat pass + index compare (estimate) | {ix['stat_pass_s_est'] * 1000:.0f} ms |\n")
    L.append(f"## 2. {tb['queries']} queries, timebox {tb['timebox_ms']:.0f} ms, default layers, k={tb['k']}\n")
    L.append("| metric | p50 | p95/p99 | max |\n|---|---|---|---|")
    L.append(f"| first result (ms) | {tb['first_result_ms']['p50']} | p95 {tb['first_result_ms']['p95']} | none: {tb['first_result_ms']['none']} |")
    L.append(f"| elapsed (ms) | {tb['elapsed_ms']['p50']} | p95 {tb['elapsed_ms']['p95']} | {tb['elapsed_ms']['max']} |")
    L.append(f"| overshoot elapsed−timebox (ms) | {tb['overshoot_ms']['p50']} | p99 {tb['overshoot_ms']['p99']} | {tb['overshoot_ms']['max']} |")
    L.append(f"\nCalls with the layer aborted: {tb['aborted_calls_per_layer']}; states: {tb['states_per_layer']}. "
             f"Overshoot > 5 ms: {tb['overshoot_ms']['over_5ms']}, > 20 ms: {tb['overshoot_ms']['over_20ms']}.\n")
    L.append(f"## 3. grep layer vs raw `rg --json` ({gv['queries']} queries × {gv['reps']} reps, interleaved, medians)\n")
    L.append("| | p50 ms | p95 ms | sum ms | median ratio | ratio of sums |\n|---|---|---|---|---|---|")
    L.append(f"| raw rg (subprocess.run, capture) | {gv['raw_ms']['p50']} | {gv['raw_ms']['p95']} | {gv['raw_ms']['sum']} | | |")
    L.append(f"| raw rg in lar's compact mode (--only-matching) | {gv['raw_lar_mode_ms']['p50']} | | {gv['raw_lar_mode_ms']['sum']} | | |")
    L.append(f"| lar `run('grep').elapsed` | {gv['lar_grep_ms']['p50']} | {gv['lar_grep_ms']['p95']} | {gv['lar_grep_ms']['sum']} | {gv['ratio_grep']['median_of_ratios']} | {gv['ratio_grep']['ratio_of_sums']} |")
    L.append(f"| lar whole call `res.elapsed` | {gv['lar_call_ms']['p50']} | {gv['lar_call_ms']['p95']} | {gv['lar_call_ms']['sum']} | {gv['ratio_call']['median_of_ratios']} | {gv['ratio_call']['ratio_of_sums']} |")
    for name, v in gv.get("by_output_size", {}).items():
        L.append(f"| … only queries with {name} ({v['queries']}) | | | | {v['median_ratio_call']} | {v['ratio_of_sums_call']} |")
    L.append(f"\nGoal ≤ {gv['goal_ratio']}x. Queries where lar truncated/aborted: {gv['lar_truncated_queries'] or 'none'}.\n")
    worst = sorted(R["grep_vs_rg_rows"], key=lambda p: -p["ratio_call"])[:8]
    L.append("Worst per-query ratios (call):\n")
    L.append("| query | match lines | raw ms | lar grep ms | lar call ms | ratio call |\n|---|---|---|---|---|---|")
    for p in worst:
        L.append(f"| `{p['q']}` | {p['raw_match_lines']} | {p['raw_ms']} | {p['lar_grep_ms']} | {p['lar_call_ms']} | {p['ratio_call']} |")
    big = sorted(R["grep_vs_rg_rows"], key=lambda p: -p["raw_match_lines"])[:5]
    L.append("\nLargest outputs:\n")
    L.append("| query | match lines | JSON MB | raw ms | lar call ms | ratio call |\n|---|---|---|---|---|---|")
    for p in big:
        L.append(f"| `{p['q']}` | {p['raw_match_lines']} | {p['raw_json_bytes'] / 1e6:.1f} | {p['raw_ms']} | {p['lar_call_ms']} | {p['ratio_call']} |")
    if R.get("profile"):
        pr = R["profile"]
        L.append(f"\n### Profile ({pr['calls']} grep-only calls, cProfile; {pr['note']})\n")
        L.append(f"Manual timers (no profiler on them, same calls): {pr['manual']}\n")
        L.append("| function | cumulative s | own s | calls |\n|---|---|---|---|")
        for k2, v in sorted(pr["selected"].items(), key=lambda kv: -kv[1]["cum_s"]):
            L.append(f"| {k2} | {v['cum_s']} | {v['tot_s']} | {v['calls']} |")
        L.append("\nTop by own time:\n\n```\n" + _trim_pstats(pr["top_tottime"]) + "\n```\n")
        L.append("Top by cumulative time:\n\n```\n" + _trim_pstats(pr["top_cumulative"]) + "\n```\n")
    L.append(f"## 4. Edit-to-search ({ed['files']} files)\n")
    L.append("| mode | median ms | max ms |\n|---|---|---|")
    L.append(f"| append token → grep-only search returns the file | {ed['grep_ms_median']} | {ed['grep_ms_max']} |")
    L.append(f"| append token → all-layers search returns the file | {ed['all_ms_median']} | {ed['all_ms_max']} |")
    L.append(f"\nFound on the first search every time: {ed['all_found_first_try']}; hit hash == "
             f"content_hash(new bytes) every time: {ed['all_hash_ok']}.\n")
    if R.get("racy"):
        ra = R["racy"]
        L.append("## 5. Racy same-size edit (write A; search A; same-size write B; search B; fetch the B hit)\n")
        L.append("`natural`: B written right away (this fs has fine-grained/multigrain mtimes). "
                 "`coarse`: B's mtime set back to A's (coarse-timestamp fs or mtime-preserving tool).\n")
        L.append("| mode | trials | same mtime | index stale | stale after full index_now() | search B finds file | hit hash old | hit hash new | fetch(B hit) shows A's text |\n|---|---|---|---|---|---|---|---|---|")
        for mode in ("natural", "coarse"):
            m = ra[mode]
            L.append(f"| {mode} | {ra['trials_per_mode']} | {m['same_mtime']} | {m['index_stale']} | "
                     f"{m['index_stale_after_full_scan']} | {m['search_B_found_file']} | {m['hit_hash_is_old']} | {m['hit_hash_is_new']} | {m['fetch_of_B_hit_returns_A_text']} |")
        L.append("")
    if R.get("notes"):
        L.append("## Findings (computed from this run)\n")
        for n in R["notes"]:
            L.append(f"- {n}")
    path.write_text("\n".join(L) + "\n")


def _trim_pstats(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip().startswith("ncalls")), 0)
    return "\n".join(l.rstrip() for l in lines[start:] if l.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    today = _dt.date.today().isoformat()
    ap.add_argument("--out", default=f"benchmarks/results/{today}-spine",
                    help="output path without extension (.json and .md are written)")
    ap.add_argument("--stdlib", default=None, help="corpus source (default: this Python's stdlib)")
    ap.add_argument("--idents", type=int, default=25)
    ap.add_argument("--phrases", type=int, default=25)
    ap.add_argument("--timebox", type=float, default=0.1)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warm-reps", type=int, default=5)
    ap.add_argument("--edits", type=int, default=5)
    ap.add_argument("--racy", type=int, default=10, help="racy same-size edit trials (0: skip)")
    ap.add_argument("--profile", action="store_true", help="profile even if the ratio is within goal")
    ap.add_argument("--profile-calls", type=int, default=10)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--keep", action="store_true", help="keep the temp corpus and state dirs")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    asyncio_log: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record):
            asyncio_log.append(f"{record.levelname}: {record.getMessage()}")

    logging.getLogger("asyncio").addHandler(_Collect(logging.WARNING))
    src = Path(args.stdlib or sysconfig.get_paths()["stdlib"])
    tmp = Path(tempfile.mkdtemp(prefix="lar-bench-spine-"))
    corpus, state = tmp / "corpus", tmp / "state"
    R: dict = {"benchmark": "spine", "machine": machine_facts(), "args": vars(args), "notes": []}
    try:
        print(f"copying {src} -> {corpus} ...", flush=True)
        t = time.perf_counter()
        copy_stdlib(src, corpus)
        nfiles, nbytes = corpus_size(corpus)
        R["corpus"] = {"source": str(src), "files": nfiles, "bytes": nbytes,
                       "copy_s": round(time.perf_counter() - t, 2)}
        print(f"  {nfiles} files, {nbytes / 1e6:.1f} MB", flush=True)

        print("1. index ...", flush=True)
        eng, R["index"] = section_index(corpus, state, args.warm_reps)
        print(f"  {json.dumps(R['index'])}", flush=True)

        queries = make_queries(corpus, args.idents, args.phrases, args.seed)
        R["queries"] = queries

        print("2. timebox ...", flush=True)
        R["timebox"], R["timebox_rows"] = section_timebox(eng, queries, args.timebox, args.k)
        print(f"  {json.dumps(R['timebox'])}", flush=True)

        print("3. grep vs rg ...", flush=True)
        R["grep_vs_rg"], R["grep_vs_rg_rows"] = section_grep_vs_rg(eng, queries, args.reps)
        print(f"  {json.dumps(R['grep_vs_rg'])}", flush=True)
        worse = (R["grep_vs_rg"]["ratio_call"]["median_of_ratios"] > 1.3
                 or R["grep_vs_rg"]["ratio_call"]["ratio_of_sums"] > 1.3)
        if worse or args.profile:
            print("   profiling ...", flush=True)
            # the queries with the most output show the per-line costs best; take a mix
            rows = sorted(R["grep_vs_rg_rows"], key=lambda p: -p["ratio_call"])
            chosen = [{"q": p["q"]} for p in rows[: args.profile_calls]]
            R["profile"] = section_profile(eng, chosen, len(chosen))
            R["profile"]["queries"] = [c["q"] for c in chosen]
            print(f"  {json.dumps(R['profile']['selected'])}", flush=True)

        print("4. edit-to-search ...", flush=True)
        R["edit_to_search"], R["edit_rows"] = section_edit(eng, corpus, args.edits, args.seed)
        print(f"  {json.dumps(R['edit_to_search'])}", flush=True)

        if args.racy:
            print("5. racy same-size edit ...", flush=True)
            R["racy"], R["racy_rows"] = section_racy(eng, corpus, args.racy, args.seed)
            print(f"  {json.dumps(R['racy'])}", flush=True)

        eng.close()
        R["asyncio_log"] = asyncio_log
        R["notes"] = findings(R)
        if asyncio_log:
            R["notes"].append(f"asyncio logged {len(asyncio_log)} warning(s) during the run, e.g. "
                              f"`{asyncio_log[0]}`.")
        R["total_s"] = round(time.perf_counter() - t_start, 1)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(R, indent=1, default=str) + "\n")
        write_md(out.with_suffix(".md"), R)
        print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')} ({R['total_s']} s)")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
