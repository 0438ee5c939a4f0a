"""The first hour on a fresh folder: how many searches until every default layer covers it, and
the quality of each search on the way (nDCG@10 on a judged set).

A BEIR corpus is written as one ``<doc id>.txt`` per document (title, blank line, text) into a
temporary folder (every judged document plus a seeded sample of the others, as
``beir_subset.py``), a fresh engine opens it, and judged queries are searched one after the other
at the default timebox with the default layers, ``--think`` seconds apart (a person reading the
results). Each search records every building layer's coverage (from its run, else the status)
and its nDCG@10 (documents in hit order, first occurrence; binary gains from the qrels), each
layer's run (state, hits, seconds) and how many of the top 10 hits each layer found.

``--mode spare``: a plain library engine (searches build in their spare time, when the code
supports it); ``--mode background``: the engine builds in the background as well (the MCP
server and ``%lar open PATH``); ``--mode none``: neither (what main did before). The run stops
when every building layer has coverage 1, or at ``--max-searches`` / ``--max-minutes``.

    python benchmarks/bench_first_hour.py --docs 2000 --mode spare --out benchmarks/results/x.json

``--progress FILE`` appends each search's row as it ends (a JSON line; the first line gives the
units per layer), so a run cut short by a time cap keeps what it measured.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path("/work/shared/benchmarks/scifact-train")  # the judged split (read, never copied)


def read_beir(src: Path, docs: int, seed: int, queries: int):
    qrels: dict[str, dict[str, int]] = {}
    for f in sorted((src / "qrels").glob("*.tsv")):
        for line in f.read_text(encoding="utf-8").splitlines():
            p = line.split("\t")
            if len(p) >= 3 and p[0] != "query-id" and int(p[2]) > 0:
                qrels.setdefault(p[0], {})[p[1]] = int(p[2])
    corpus = [json.loads(line) for line in (src / "corpus.jsonl").read_text("utf-8").splitlines()]
    qs = {}
    for line in (src / "queries.jsonl").read_text("utf-8").splitlines():
        q = json.loads(line)
        if q["_id"] in qrels:
            qs[q["_id"]] = q["text"]
    rng = random.Random(seed)
    qids = sorted(qs)
    rng.shuffle(qids)
    qids = qids[:queries]
    judged = {d for q in qids for d in qrels[q]}  # the chosen queries' documents are all there
    others = sorted({d["_id"] for d in corpus} - judged)
    keep = judged | set(rng.sample(others, max(0, min(len(others), docs - len(judged)))))
    return [d for d in corpus if d["_id"] in keep], [(q, qs[q]) for q in qids], qrels


def ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rel.values(), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def top_signals(hits) -> dict[str, int]:
    """How many of the top hits each layer found (a hit found by two layers counts for both)."""
    out: dict[str, int] = {}
    for h in hits:
        for s in h.signals:
            out[s] = out.get(s, 0) + 1
    return dict(sorted(out.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(SRC))
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=40, help="judged queries, cycled")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timebox", type=float, default=None, help="default: lar's default timebox")
    ap.add_argument("--mode", choices=["none", "spare", "background"], default="spare")
    ap.add_argument("--think", type=float, default=0.0, help="seconds between searches")
    ap.add_argument("--max-searches", type=int, default=200)
    ap.add_argument("--max-minutes", type=float, default=10.0)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=None)
    ap.add_argument("--progress", default=None,
                    help="JSON lines file: a header, then one line per search as it ends (survives a kill)")
    a = ap.parse_args(argv)

    import lar
    from lar.core.request import DEFAULT_TIMEBOX

    timebox = a.timebox or DEFAULT_TIMEBOX
    corpus, queries, qrels = read_beir(Path(a.src), a.docs, a.seed, a.queries)
    work = Path(tempfile.mkdtemp(prefix="lar-first-hour-"))
    root = work / "corpus"
    root.mkdir()
    for d in corpus:
        (root / f"{d['_id']}.txt").write_text(f"{d.get('title', '')}\n\n{d.get('text', '')}\n", "utf-8")
    kw = {}
    params = inspect.signature(lar.Engine.__init__).parameters
    if "spare_build" in params:
        kw["spare_build"] = a.mode != "none"
    if "background" in params:
        kw["background"] = a.mode == "background"
    elif a.mode == "background":
        kw = {}
    t_open = time.monotonic()
    eng = lar.open(root, state=work / "state", **kw)
    if a.mode == "background" and "background" not in params:
        eng.start_background_build()
    opened_s = time.monotonic() - t_open
    building = [n for n, l in eng.layers.items() if not l.always_current]
    units0 = {s.name: s.units for s in eng.status().layers if s.name in building}
    progress = open(a.progress, "w", encoding="utf-8") if a.progress else None  # noqa: SIM115
    if progress:
        progress.write(json.dumps({"header": True, "docs": len(corpus), "mode": a.mode, "timebox": timebox,
                                   "think_s": a.think, "open_s": round(opened_s, 2), "units": units0,
                                   "load": os.getloadavg()}) + "\n")
        progress.flush()
    t0 = time.monotonic()
    rows = []
    try:
        for i in range(a.max_searches):
            qid, text = queries[i % len(queries)]
            res = eng.search(text, timebox=timebox)
            cov = {}
            status = None
            for n in building:
                try:
                    r = res.run(n)
                except KeyError:
                    r = None
                if r is not None and r.coverage is not None:
                    cov[n] = r.coverage
                else:
                    status = status or {s.name: s.coverage for s in eng.status().layers}
                    cov[n] = status[n]
            ranked = list(dict.fromkeys(Path(h.path).stem for h in res.hits if h.path))
            rows.append({"search": i + 1, "at_s": round(time.monotonic() - t0, 2), "qid": qid,
                         "elapsed_s": round(res.elapsed, 4), "ndcg10": round(ndcg10(ranked, qrels[qid]), 4),
                         "coverage": {n: round(c, 4) for n, c in cov.items()},
                         "ran": [r.name for r in res.runs if r.state.value in ("ran", "aborted")],
                         "runs": {r.name: [r.state.value, r.contributions, round(r.elapsed, 3)]
                                  for r in res.runs if r.state.value != "skipped"},
                         "top10_signals": top_signals(res.hits[:10])})
            if progress:
                progress.write(json.dumps({**rows[-1], "load": os.getloadavg()[0]}) + "\n")
                progress.flush()
            line = " ".join(f"{n}={c:.2f}" for n, c in cov.items())
            print(f"{i + 1:>3} {rows[-1]['at_s']:>7.1f}s ndcg={rows[-1]['ndcg10']:.3f} {line}", flush=True)
            # the layers that can cover the folder: every building layer that applies to it
            if all(c >= 1.0 for c in cov.values()):
                break
            if time.monotonic() - t0 > 60 * a.max_minutes:
                break
            if a.think:
                time.sleep(a.think)
        final = {s.name: {"coverage": round(s.coverage, 4), "units": s.units, "built": s.built_units}
                 for s in eng.status().layers if s.name in building}
    finally:
        eng.close()
        if progress:
            progress.close()
    done_at = next((r["search"] for r in rows if all(c >= 1.0 for c in r["coverage"].values())), None)
    per_layer = {n: next((r["search"] for r in rows if r["coverage"].get(n, 0) >= 1.0), None)
                 for n in building}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(lar.__file__).parent).stdout.strip()
    out = {"label": a.label, "mode": a.mode, "docs": len(corpus), "queries": len(queries),
           "timebox": timebox, "think_s": a.think, "open_s": round(opened_s, 2),
           "searches": len(rows), "all_covered_at_search": done_at,
           "layer_covered_at_search": per_layer, "final": final,
           "mean_ndcg10_first5": round(sum(r["ndcg10"] for r in rows[:5]) / max(1, len(rows[:5])), 4),
           "mean_ndcg10_last5": round(sum(r["ndcg10"] for r in rows[-5:]) / max(1, len(rows[-5:])), 4),
           "wall_s": round(time.monotonic() - t0, 1), "lar": lar.__file__, "commit": commit,
           "load": os.getloadavg(), "rows": rows}
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
