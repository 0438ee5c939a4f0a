"""Lexical and structural layers on the Python stdlib: cold build time per layer, the cost of
the shared stat pass, and the time from editing one file until every lexical layer reflects it.

Run: .venv/bin/python benchmarks/bench_lexical.py [--out benchmarks/results/DATE-lexical]
The corpus is this interpreter's stdlib without site-packages, copied to a temp folder so files
can be edited safely. Results go to <out>.json and <out>.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

import lar

LEXICAL = ["grep", "trigram", "bm25", "symbols", "formula"]
EDIT_LAYERS = ["grep", "trigram", "bm25", "symbols"]  # formula does not read .py files


def copy_stdlib(dst: Path) -> Path:
    src = Path(sysconfig.get_paths()["stdlib"])
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("site-packages", "__pycache__"),
                    symlinks=True)
    return dst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=f"benchmarks/results/{dt.date.today()}-lexical")
    ap.add_argument("--edits", type=int, default=5)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="lar-bench-lex-"))
    corpus = copy_stdlib(tmp / "Lib")
    R: dict = {"date": str(dt.date.today()), "nproc": os.cpu_count(), "corpus": str(corpus)}
    t = time.perf_counter()
    eng = lar.open(corpus, state=tmp / "state")
    R["open_s"] = time.perf_counter() - t
    R["units"] = eng.status().units
    present = [n for n in LEXICAL if n in eng.layers]
    building = [n for n in present if not getattr(eng.layers[n], "always_current", True)]
    R["build"] = {}
    for name in building:
        t = time.perf_counter()
        rep = eng.build(timebox=3600, layers=[name])["layers"][name]
        R["build"][name] = {"seconds": round(time.perf_counter() - t, 3), **rep}
        print(f"cold build {name}: {R['build'][name]['seconds']} s {rep}", flush=True)
    # the shared stat pass (what every call with a building layer pays first)
    scans = []
    for _ in range(5):
        t = time.perf_counter()
        eng.index_now()
        scans.append(time.perf_counter() - t)
    R["stat_pass_s"] = {"median": statistics.median(scans), "max": max(scans)}
    # edit -> every lexical layer reflects it
    files = sorted(p for p in corpus.rglob("*.py") if p.stat().st_size > 2000)[: args.edits * 7: 7]
    rows = []
    for i, f in enumerate(files):
        token = f"lar_edit_probe_{i}_zq"
        t0 = time.perf_counter()
        with open(f, "a") as fh:
            fh.write(f"\n\ndef {token}():\n    return {i}\n")
        rel = f.relative_to(corpus).as_posix()
        per = {}
        for name in [n for n in present if n in EDIT_LAYERS]:
            q = {name: {"structural": f"def {token}($$$)"}} if name == "structural" else {name: token}
            t = time.perf_counter()
            res = eng.search(q, timebox=10, k=5)
            per[name] = {"found": any(rel in h.paths for h in res.hits),
                         "ms": round((time.perf_counter() - t) * 1000, 1),
                         "state": res.run(name).state.value}
        rows.append({"file": rel, "total_ms": round((time.perf_counter() - t0) * 1000, 1),
                     "layers": per})
        print(rows[-1], flush=True)
    R["edit_to_search"] = rows
    # the same in one call: every edit layer at once, each must contribute the edited file
    files1 = sorted(p for p in corpus.rglob("*.py") if p.stat().st_size > 2000)[3: 3 + args.edits * 7: 7]
    one = []
    names = [n for n in present if n in EDIT_LAYERS]
    for i, f in enumerate(files1):
        token = f"lar_edit_one_call_{i}_zq"
        t0 = time.perf_counter()
        with open(f, "a") as fh:
            fh.write(f"\n\ndef {token}():\n    return {i}\n")
        rel = f.relative_to(corpus).as_posix()
        res = eng.search({n: token for n in names}, timebox=10, k=20)
        ms = round((time.perf_counter() - t0) * 1000, 1)
        one.append({"file": rel, "ms": ms, "found": any(rel in h.paths for h in res.hits),
                    "contributed": {n: res.run(n).contributions for n in names},
                    "load": round(os.getloadavg()[0], 2)})
        print(one[-1], flush=True)
    R["edit_to_one_call"] = one
    R["edit_to_one_call_summary"] = {
        "ms_median": statistics.median(r["ms"] for r in one), "ms_max": max(r["ms"] for r in one),
        "all_layers_found": all(r["found"] and all(r["contributed"].values()) for r in one)}
    R["edit_to_search_summary"] = {
        "all_found": all(v["found"] for r in rows for v in r["layers"].values()),
        "per_layer_ms_median": {n: statistics.median(r["layers"][n]["ms"] for r in rows)
                                for n in present if n in EDIT_LAYERS},
        "total_ms_median": statistics.median(r["total_ms"] for r in rows),
    }
    eng.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(R, indent=2, default=str))
    L = [f"# Lexical layers on the stdlib — {R['date']}", "",
         f"{R['units']} units, {R['nproc']} CPUs; open (scan + hash) {R['open_s']:.2f} s; shared stat pass "
         f"median {R['stat_pass_s']['median'] * 1000:.0f} ms.", "",
         "| layer | cold build s | ok | skipped | failed |", "|---|---|---|---|---|"]
    for n, b in R["build"].items():
        L.append(f"| {n} | {b['seconds']} | {b.get('ok')} | {b.get('skipped')} | {b.get('failed')} |")
    L += ["", "Edit one file (append a function), then search each layer for the new name "
          "(each search includes the stat pass and inline indexing of the changed unit):", "",
          "| layer | median ms until found | all found |", "|---|---|---|"]
    for n in [n for n in present if n in EDIT_LAYERS]:
        L.append(f"| {n} | {R['edit_to_search_summary']['per_layer_ms_median'][n]} | "
                 f"{all(r['layers'][n]['found'] for r in rows)} |")
    L.append(f"\nFrom the write until all four layers have answered (one after another): median "
             f"{R['edit_to_search_summary']['total_ms_median']} ms.")
    o = R["edit_to_one_call_summary"]
    L.append(f"\nFrom the write until one call to all four layers has answered, each contributing the "
             f"edited file: median {o['ms_median']} ms, max {o['ms_max']} ms (all found: "
             f"{o['all_layers_found']}).")
    out.with_suffix(".md").write_text("\n".join(L) + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {out}.json and {out}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
