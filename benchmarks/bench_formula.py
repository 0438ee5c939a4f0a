#!/usr/bin/env python
"""Formula layer benchmark on the paper corpus: formulas per paper, build time, and retrieval of
display formulas whose variables were renamed.

Plain script (not collected by pytest)::

    .venv/bin/python benchmarks/bench_formula.py [--corpus DIR] [--out benchmarks/results/DATE-formula]

The corpus (default ``/work/shared/corpora/papers``) is read in place, never copied; the lar state
goes to a temp folder. Sections:

1. build: every unit the layer accepts is built one by one (``build_one``, extraction included,
   cold caches); per paper (top-level folder): units, formulas (inline / display), macros, build
   time; plus skipped/failed units and the unclosed-delimiter / unbalanced-brace counts.
2. retrieval: ``--n`` display formulas (not inline, >= 5 normalised tokens, at least one Latin
   single-letter variable) drawn with a fixed seed. Each is turned into queries and searched with
   the layer (budget 5 s, pool 100); the rank of the original span gives hit@1 and MRR:

   * ``renamed``: every Latin letter the normaliser would treat as a variable is mapped by a
     random permutation (lower to lower, upper to upper; command names, ``\\text``/``\\mathrm``/
     ``\\label``... arguments untouched);
   * ``renamed+format``: the same plus formatting noise (``\\frac`` -> ``\\dfrac``, single-character
     scripts braced, ``\\,`` after ``=``, a leading ``\\displaystyle``);
   * ``rhs``: the renamed right-hand side after the first ``=`` only (a fragment; formulas
     without ``=`` are left out).

   Ties: "hit@1" is strict (the original is ranked first); "top tie" counts queries whose
   original has the top score but shares it with other formulas (identical formulas elsewhere).
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import lar
from lar.layers.formula.scan import strip_delimiters
from lar.core.layer import Budget
from lar.layers.formula.layer import FormulaLayer
from lar.core.registry import registered_layers

SEED = 20261129
_PROTECT = re.compile(
    r"\\(?:text[a-z]*|math(?:rm|bb|cal|frak|scr|sf|tt|it|up|bbm|ds)|operatorname\*?|label|tag\*?"
    r"|begin|end|ref|eqref|cite[a-z]*|mbox|hbox|emph|color|hspace|vspace)\s*\{[^{}]*\}"
    r"|\{\\(?:rm|it|sf|tt|cal)\b[^{}]*\}|\\[A-Za-z@]+|\\.|%[^\n]*")
_LETTERS = re.compile(r"[A-Za-z]")


def rename_variables(latex: str, rng: random.Random) -> str:
    """``latex`` with its variable letters permuted (a derangement per case where possible)."""
    lower = list("abcdefghijklmnopqrstuvwxyz")
    upper = [c.upper() for c in lower]
    mapping: dict[str, str] = {}
    for alphabet in (lower, upper):
        perm = alphabet[:]
        while any(a == b for a, b in zip(alphabet, perm)):
            rng.shuffle(perm)
        mapping.update(zip(alphabet, perm))
    out, pos = [], 0
    for m in _PROTECT.finditer(latex):
        out.append(_LETTERS.sub(lambda x: mapping[x.group(0)], latex[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_LETTERS.sub(lambda x: mapping[x.group(0)], latex[pos:]))
    return "".join(out)


def add_format_noise(latex: str) -> str:
    s = re.sub(r"\\frac(?![A-Za-z])", r"\\dfrac", latex)
    s = re.sub(r"([_^])([A-Za-z0-9])", r"\1{\2}", s)
    s = re.sub(r"(?<![<>!\\])=", r"= \\,", s)
    return "\\displaystyle " + s


def rhs(latex: str) -> str | None:
    depth = 0
    for i, c in enumerate(latex):
        depth += c == "{"
        depth -= c == "}"
        if c == "=" and depth == 0 and latex[i - 1:i] not in ("<", ">", "!", "\\"):
            tail = latex[i + 1:].strip()
            return tail if len(tail) >= 5 else None
    return None


def pct(xs: list[float], p: float) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def build(eng, layer) -> dict:
    view = eng.scope_view()
    units = layer.applicable(view)
    per_paper: dict[str, dict] = defaultdict(lambda: {"units": 0, "formulas": 0, "inline": 0,
                                                      "display": 0, "macros": 0, "build_ms": 0.0,
                                                      "unbalanced_braces": 0,
                                                      "unclosed_delimiters": 0})
    states: dict[str, int] = defaultdict(int)
    t_all = time.perf_counter()
    seen: set[str] = set()
    for u in sorted(units, key=lambda u: u.path):
        paper = u.path.split("/", 1)[0] if "/" in u.path else "(root)"
        p = per_paper[paper]
        p["units"] += 1
        if u.hash in seen:
            continue
        seen.add(u.hash)
        t0 = time.perf_counter()
        state = layer.build_one(u)
        p["build_ms"] += (time.perf_counter() - t0) * 1000
        states[state] += 1
        entry = layer.manifest.entry(u.hash) or {}
        info = entry.get("info", {})
        p["macros"] += info.get("macros", 0)
        p["unbalanced_braces"] += info.get("unbalanced_braces", 0)
        p["unclosed_delimiters"] += info.get("unclosed_delimiters", 0)
        for _, _, label, _ in layer.formulas(u.hash):
            p["formulas"] += 1
            p["inline" if label == "inline" else "display"] += 1
    total_s = time.perf_counter() - t_all
    for p in per_paper.values():
        p["build_ms"] = round(p["build_ms"], 1)
    skipped = [{"path": eng.reader.path_of(h), "state": st, "reason": r}
               for h, st, r in layer.manifest.skipped(layer.build_version)]
    return {"units": len(units), "distinct_units": len(seen), "states": dict(states),
            "build_s": round(total_s, 3), "per_paper": dict(sorted(per_paper.items())),
            "skipped_or_failed": skipped,
            "formulas": sum(p["formulas"] for p in per_paper.values()),
            "display": sum(p["display"] for p in per_paper.values())}


def retrieval(eng, layer, n: int, seed: int) -> dict:
    view = eng.scope_view()
    pool = []
    for h in sorted(layer.searchable(view)):
        path = eng.reader.path_of(h) or ""
        for s, e, label, norm in layer.formulas(h):
            toks = norm.split(" ")
            if label != "inline" and len(toks) >= 5 and any(re.fullmatch(r"V\d+", t) for t in toks):
                pool.append((h, s, e, label, path))
    rng = random.Random(seed)
    chosen = rng.sample(pool, min(n, len(pool)))
    variants: dict[str, list[dict]] = {"renamed": [], "renamed+format": [], "rhs": []}
    for h, s, e, label, path in chosen:
        raw = eng.reader.unit_text(h, path)[s:e].decode("utf-8", errors="replace")
        content, _ = strip_delimiters(raw)
        renamed = rename_variables(content, rng)
        queries = {"renamed": renamed, "renamed+format": add_format_noise(renamed),
                   "rhs": rhs(renamed)}
        for name, q in queries.items():
            if not q:
                continue
            t0 = time.perf_counter()
            hits = asyncio.run(layer.search(q, view, Budget.seconds(5.0, pool=100)))
            ms = (time.perf_counter() - t0) * 1000
            rank = next((i for i, hit in enumerate(hits, 1)
                         if hit.hash == h and hit.span.start == s), None)
            top = hits[0].evidence["formula"].score if hits else None
            own = next((hit.evidence["formula"].score for hit in hits
                        if hit.hash == h and hit.span.start == s), None)
            tie = sum(1 for hit in hits if hit.evidence["formula"].score == top) if hits else 0
            variants[name].append({"path": path, "span": [s, e], "label": label,
                                   "query": q[:300], "rank": rank, "score": own,
                                   "top_score": top, "tied_at_top": tie, "ms": round(ms, 2)})
    summary = {}
    for name, rows in variants.items():
        if not rows:
            continue
        ranks = [r["rank"] for r in rows]
        summary[name] = {
            "n": len(rows),
            "hit@1": round(sum(r == 1 for r in ranks) / len(rows), 3),
            "hit@10": round(sum(r is not None and r <= 10 for r in ranks) / len(rows), 3),
            "mrr": round(sum(1 / r for r in ranks if r) / len(rows), 3),
            "top_tie": sum(1 for r in rows if r["rank"] != 1 and r["score"] is not None
                           and r["score"] == r["top_score"]),
            "not_found": sum(r is None for r in ranks),
            "ms_p50": round(statistics.median(r["ms"] for r in rows), 2),
            "ms_max": round(max(r["ms"] for r in rows), 2),
        }
    return {"pool": len(pool), "summary": summary, "queries": variants}


def markdown(res: dict) -> str:
    b, r = res["build"], res["retrieval"]
    lines = [f"# lar formula layer benchmark — {res['date']}", "",
             f"Machine: {res['machine']}. Corpus: `{res['corpus']}` (read in place), "
             f"{b['units']} units accepted by the layer ({b['distinct_units']} distinct). "
             f"Seed {res['seed']}.", "", "## 1. Build (cold: extraction + scan + normalise + SQLite)", "",
             f"Total {b['build_s']} s for {b['distinct_units']} distinct units; states "
             f"{b['states']}; {b['formulas']} formulas ({b['display']} display).", "",
             "| paper | units | formulas | inline | display | macros | unbalanced | unclosed | build ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for paper, p in b["per_paper"].items():
        lines.append(f"| {paper} | {p['units']} | {p['formulas']} | {p['inline']} | {p['display']} | "
                     f"{p['macros']} | {p['unbalanced_braces']} | {p['unclosed_delimiters']} | "
                     f"{p['build_ms']} |")
    if b["skipped_or_failed"]:
        lines += ["", "Skipped or failed: " + "; ".join(
            f"{x['path']} ({x['state']}: {x['reason']})" for x in b["skipped_or_failed"])]
    lines += ["", f"## 2. Retrieval: {res['n']} random display formulas (pool {r['pool']})", "",
              "| variant | n | hit@1 | hit@10 | MRR | top tie (not rank 1) | not found | p50 ms | max ms |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name, s in r["summary"].items():
        lines.append(f"| {name} | {s['n']} | {s['hit@1']} | {s['hit@10']} | {s['mrr']} | "
                     f"{s['top_tie']} | {s['not_found']} | {s['ms_p50']} | {s['ms_max']} |")
    misses = [(name, q) for name, rows in r["queries"].items() for q in rows if q["rank"] != 1]
    if misses:
        lines += ["", "Queries whose original was not ranked first:", ""]
        for name, q in misses:
            lines.append(f"- {name}: `{q['path']}` {q['span']} rank {q['rank']}, score "
                         f"{q['score']} (top {q['top_score']}, {q['tied_at_top']} at top): "
                         f"`{q['query'][:120]}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="/work/shared/corpora/papers")
    ap.add_argument("--out", default=f"benchmarks/results/{_dt.date(2026, 11, 29)}-formula")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args(argv)
    if "formula" not in registered_layers():
        lar.register_layer(FormulaLayer)
    with tempfile.TemporaryDirectory(prefix="lar-bench-formula-") as tmp:
        eng = lar.open(args.corpus, state=Path(tmp) / "state")
        try:
            layer = eng.layers["formula"]
            res = {"date": str(_dt.date.today()), "corpus": args.corpus, "seed": args.seed,
                   "n": args.n, "layer_version": layer.build_version,
                   "machine": f"{platform.python_implementation()} {platform.python_version()}, "
                              f"{platform.platform()}",
                   "build": build(eng, layer)}
            res["retrieval"] = retrieval(eng, layer, args.n, args.seed)
        finally:
            eng.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
