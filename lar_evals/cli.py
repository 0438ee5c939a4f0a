"""``python -m lar_evals`` (also ``lar eval ...``): the evaluation harness's command line.

Subcommands:

* ``beir DIR --split NAME [options]``: score routes, fusion policies and the default search on a
  BEIR folder (:func:`lar_evals.run.run_beir`); prints a short table and writes the JSON summary
  (``--out``, default ``evals-<dataset>-<split>.json``) and TREC run files (``--runs-dir``,
  default ``<out>-runs/``).
* ``generate`` and ``report``: provided by ``lar_evals.generate_cli`` and ``lar_evals.report`` (each with
  ``add_arguments(parser)`` and ``run(args) -> int``), imported only when that subcommand runs;
  a checkout without them says so and the rest of the command line still works.

Errors print one line, ``evals: error: ...``, and exit with status 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from lar.core.errors import LarError
from lar.apps.cli_args import csv_list, duration  # the same argument parsing as the lar command
from lar_evals.io import write_json

# subcommand -> (module, one-line help); imported lazily
PLUGGED = {
    "generate": ("lar_evals.generate_cli", "generate evaluation sets (rare-term, paraphrase, ...)"),
    "report": ("lar_evals.report", "render a report from one or more JSON summaries"),
    "fit": ("lar_evals.fit", "fit the adaptive fusion model on recorded route lists, held-out scores"),
}


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def _config(value: str) -> dict[str, Any]:
    """Engine config as a JSON object, or the path of a JSON file holding one."""
    text = value
    if not value.lstrip().startswith("{"):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except OSError as exc:
            raise argparse.ArgumentTypeError(
                f"--config: not a JSON object nor a readable file: {exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--config is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise argparse.ArgumentTypeError("--config must be a JSON object of engine settings")
    return obj


def add_beir_arguments(b: argparse.ArgumentParser) -> None:
    from lar_evals.run import DEFAULT_FUSION, DEFAULT_METRICS

    b.add_argument("dir", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    b.add_argument("--split", required=True, help="qrels split name, e.g. test")
    b.add_argument("--routes", type=csv_list, default=None, help="comma-separated layers (default: all)")
    b.add_argument("--fusion", type=csv_list, default=list(DEFAULT_FUSION), help="policies to fuse offline")
    b.add_argument("--rrf-c", type=float, default=60.0, help="RRF constant (default 60)")
    b.add_argument("--k", type=_positive, default=100, help="hits per list (default 100)")
    b.add_argument("--timebox", type=duration, default=5.0, help="per search, e.g. 5s, 200ms")
    b.add_argument("--build-timebox", type=duration, default=600.0, help="for building layers")
    b.add_argument("--metrics", type=csv_list, default=list(DEFAULT_METRICS), help="ranx metric names")
    b.add_argument("--max-queries", type=_positive, default=None, help="seeded sample of queries")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--anytime", type=csv_list, default=None,
                   help="timeboxes for the anytime curve, e.g. 0.025,0.1,1")
    b.add_argument("--anytime-queries", type=_positive, default=None,
                   help="score the anytime curve on a seeded sample of this many of the queries")
    b.add_argument("--anytime-stages", action="store_true",
                   help="also the curve of each cumulative cascade stage (lexical, +static, +dense, +late, "
                        "+rerank): what each stage adds")
    b.add_argument("--attribution-k", type=_positive, default=10, help="depth of miss attribution (10)")
    b.add_argument("--state", default=None, help="lar state dir (default: <corpus folder>/.lar)")
    b.add_argument("--config", type=_config, default=None, help="engine config: JSON object or file")
    b.add_argument("--cache-dir", default=None, help="where corpora are written (default: lar cache/evals)")
    b.add_argument("--ext", default="auto", help="file extension of the documents: auto, .txt, .py, ...")
    b.add_argument("--out", default=None, help="JSON summary (default: evals-<dataset>-<split>.json)")
    b.add_argument("--runs-dir", default=None, help="TREC run files (default: <out>-runs/)")
    b.add_argument("--checkpoint", default=None,
                   help="JSONL file each finished query is appended to; rerun with the same file and "
                        "settings to resume after a stop (finished queries are not searched again)")
    b.add_argument("--stat-test", choices=("student", "fisher"), default="student",
                   help="paired test: student (t-test) or fisher (randomisation), both ranx's")
    b.add_argument("--correction", choices=("holm", "bonferroni", "fdr_bh", "none"), default="holm",
                   help="multiple-comparison correction within each metric's family (default holm)")
    b.add_argument("--compare", type=csv_list, default=None, metavar="A/B,...",
                   help="the comparisons to test, e.g. adaptive/best,rrf/route-unique (best: the "
                        "best route); default: rrf/route-unique and every policy and default vs best")
    b.add_argument("--per-query", default=None, metavar="FILE",
                   help="per-query table (.tsv, .csv, .parquet; default <runs dir>/per-query.tsv)")
    b.add_argument("--anchors", type=csv_list, default=None, metavar="NAMES",
                   help="published BM25 anchors run on the same documents and queries: bm25s, "
                        "tantivy, pyserini (when installed); compare with --compare bm25/anchor:bm25s")
    b.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    b.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def build_parser(load: str | None = None) -> argparse.ArgumentParser:
    """The parser; the plugged subcommand named by ``load`` gets its real arguments (the others
    are listed with their help only, so that listing them imports nothing)."""
    p = argparse.ArgumentParser(prog="python -m lar_evals", description="lar evaluation harness")
    sub = p.add_subparsers(dest="cmd", required=True)
    add_beir_arguments(sub.add_parser("beir", help="score routes and fusion on a BEIR folder"))
    for name, (module, help_text) in PLUGGED.items():
        sp = sub.add_parser(name, help=help_text, add_help=name == load)
        if name == load:
            importlib.import_module(module).add_arguments(sp)
        else:
            sp.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def format_summary(s: dict[str, Any]) -> str:
    """A short plain-text view of a summary."""
    metrics = s["settings"]["metrics"]
    qms = s["timing"]["query_ms"]
    rows = [(f"route {r}", v, qms.get(r)) for r, v in s["routes"].items()]
    rows += [(f"fusion {p}", v, qms.get(p)) for p, v in s["fusion"].items()]
    rows.append(("default", s["default"], qms.get("default")))
    rows += [(f"anchor {n}", a["metrics"], a.get("query_ms")) for n, a in (s.get("anchors") or {}).items()
             if "metrics" in a]
    width = max(len(r[0]) for r in rows)
    out = [f"{s['dataset']}/{s['split']}: {s['n_queries']} queries, k={s['settings']['k']}, "
           f"timebox {s['settings']['timebox']:g}s",
           f"{'':<{width}}  " + "  ".join(f"{m:>10}" for m in metrics) + f"  {'mean ms':>9}  {'p95 ms':>9}"]
    for label, vals, t in rows:
        cells = "  ".join(f"{vals[m]:>10.4f}" if vals.get(m) is not None else f"{'-':>10}" for m in metrics)
        mean = t.get("mean") if t else None
        p95 = t.get("p95") if t else None
        ms = [("-" if not isinstance(v, (int, float)) else f"{v:.2f}" if v < 1 else f"{v:.1f}")
              for v in (mean, p95)]
        out.append(f"{label:<{width}}  {cells}  {ms[0]:>9}  {ms[1]:>9}")
    if s["timing"]["build_s"]:
        out.append("build: " + ", ".join(f"{n} {t:.1f}s (coverage {s['coverage'].get(n, 0):.0%})"
                                         for n, t in s["timing"]["build_s"].items()))
    partial = {n: c for n, c in (s.get("coverage") or {}).items()
               if n in s["routes"] and isinstance(c, (int, float)) and c < 1}
    for n, c in partial.items():
        out.append(f"warning: route {n} was scored on a partial index (coverage {c:.0%}: its build "
                   f"did not finish within --build-timebox); its scores are not the layer's")
    att = s["attribution"]
    reasons = ", ".join(f"{r} {n}" for r, n in att["counts"].items() if n)
    out.append(f"missed at k={att['k']} (default): {att['missed']} of {att['relevant_pairs']} "
               f"relevant pairs{': ' + reasons if reasons else ''}")
    ru = s["comparisons"]["route_unique_relevant"]
    out.append(f"route-unique relevant at k={ru['k']}: {ru['route_unique_total']} ("
               + ", ".join(f"{r} {n}" for r, n in ru["route_unique"].items()) + "); kept by "
               + ", ".join(f"{p} {n}" for p, n in ru["recovered_by"].items()))
    sig = s["comparisons"]["significance"]
    for t in sig["tests"]:
        if t["significant"]:
            out.append(f"significant ({sig['correction']} per metric): {t['a']} vs {t['b']} "
                       f"{t['metric']} {t['delta']:+.4f} [{t['ci_low']:+.4f}, {t['ci_high']:+.4f}] "
                       f"(p {t['p_value']:.3g}, adjusted {t['p_adjusted']:.3g})")
    for row in s.get("anytime_stages", []):
        first = next((m for m in row if "@" in m), None)
        out.append(f"stage {row['stage']} at {row['timebox_s']:g}s: {first} {row.get(first)}, "
                   f"mean {row['mean_ms']} ms")
    for row in s.get("anytime", []):
        first = metrics[0]
        out.append(f"anytime {row['timebox_s']:g}s: {first} {row.get(first)}, mean {row['mean_ms']} ms, "
                   f"aborted runs {row['aborted_runs']}")
    return "\n".join(out)


def run_beir_command(args: argparse.Namespace) -> int:
    from lar_evals.data import load_beir
    from lar_evals.run import run_beir

    from lar_evals.progress import Bars

    data = load_beir(args.dir, args.split)
    out = Path(args.out) if args.out else Path(f"evals-{data.name}-{data.split}.json")
    runs_dir = Path(args.runs_dir) if args.runs_dir else out.with_name(out.stem + "-runs")
    bars = None if args.quiet else Bars()
    try:
        summary = run_beir(data, routes=args.routes, fusion=args.fusion, rrf_c=args.rrf_c, k=args.k,
                           timebox=args.timebox, build_timebox=args.build_timebox, metrics=args.metrics,
                           max_queries=args.max_queries, seed=args.seed, state_dir=args.state,
                           config=args.config, runs_dir=runs_dir, cache_root=args.cache_dir,
                           ext=args.ext, attribution_k=args.attribution_k, anytime=args.anytime,
                           anytime_queries=args.anytime_queries, anytime_stages=args.anytime_stages,
                           checkpoint=args.checkpoint, stat_test=args.stat_test,
                           correction=args.correction, comparisons=args.compare, alpha=args.alpha,
                           per_query_table=args.per_query, anchors=args.anchors,
                           progress=bars.queries if bars else None,
                           build_progress=bars.build if bars else None)
    finally:
        if bars is not None:
            bars.close()
    write_json(out, summary)
    print(format_summary(summary))
    print(f"wrote {out} and run files in {runs_dir}/")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    load = argv[0] if argv and argv[0] in PLUGGED else None
    try:
        parser = build_parser(load)
    except ModuleNotFoundError as exc:
        module = PLUGGED[load][0] if load else "?"
        if exc.name and module.startswith(exc.name):
            print(f"evals: {load} is not available in this checkout ({module} is missing); "
                  "the beir subcommand works", file=sys.stderr)
            return 2
        raise
    args = parser.parse_args(argv)
    try:
        if args.cmd == "beir":
            return run_beir_command(args)
        return int(importlib.import_module(PLUGGED[args.cmd][0]).run(args) or 0)
    except LarError as exc:
        print(f"evals: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


__all__ = ["PLUGGED", "build_parser", "format_summary", "main", "write_json"]
