"""Command line of the test-set generator.

``python -m lar_evals generate CORPUS --kind KIND[,KIND...] --n N --seed S --out DIR`` (kinds:
``lar_evals.generate.KINDS``)
(through ``lar_evals.cli``, which calls ``add_arguments`` and ``run``), or standalone as
``python -m lar_evals.generate_cli CORPUS ...``. Prints one summary line and the report's path;
exits 0 when at least one query was written, 1 when none was, 2 on an error.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lar.core.errors import LarError

from lar_evals.generate import KINDS, load_generator
from lar_evals.generate_many import generate_many
from lar_evals.generators.verify import MAX_IDF_LEAK


def _kinds(value: str) -> list[str]:
    kinds = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if not kinds or bad:
        raise argparse.ArgumentTypeError(f"unknown kind {', '.join(bad) or value!r}; choose from "
                                         f"{', '.join(KINDS)} (comma-separated for several)")
    return kinds


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the generator's arguments to ``parser`` (a sub-command's parser) and return it."""
    parser.add_argument("corpus", metavar="CORPUS", help="folder of files to make queries from")
    parser.add_argument("--kind", required=True, type=_kinds,
                        help=f"which test set to make: {', '.join(KINDS)}, or several separated "
                             "by commas (one set, queries of each kind, for the per-type breakdown)")
    parser.add_argument("--n", type=int, default=100, help="queries wanted (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="output folder (corpus.jsonl, queries.jsonl, qrels/test.tsv, "
                             "report.json)")
    parser.add_argument("--max-files", type=int, default=None, metavar="N",
                        help="use at most N files, spread evenly over the sorted file list")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                        help="gitignore-style pattern of files or folders to leave out "
                             "(repeatable), e.g. --exclude 'tests/'")
    parser.add_argument("--max-idf-leak", type=float, default=MAX_IDF_LEAK, metavar="SHARE",
                        help="reject a paraphrase query when its answer holds more than this "
                             f"share of the query's IDF mass (default {MAX_IDF_LEAK}; 1 = off)")
    parser.add_argument("--generator", default=None, metavar="MODULE:FUNCTION",
                        help="a callable generator(target_text, kind, rng) -> str | None that "
                             "writes the queries instead of the built-in rewriting")
    return parser


def summary_line(report: dict) -> str:
    """One line: how many queries of which kind were written, rejected, from how many files
    (one line per kind for a set of several kinds)."""
    if "parts" in report:
        return "\n".join(summary_line(r) for r in report["parts"].values())
    rejected = report.get("rejected") or {}
    why = ", ".join(f"{k} {v}" for k, v in rejected.items())
    jac = report.get("overlap", {}).get("jaccard", {}).get("median")
    return (f"{report['kind']}: wrote {report['n_written']}/{report['n_requested']} queries "
            f"from {report['corpus_files']} files (seed {report['seed']}, "
            f"generator {report['generator']}); rejected {report.get('n_rejected', 0)}"
            + (f" ({why})" if why else "") + f"; median Jaccard {jac}")


def run(args: argparse.Namespace) -> int:
    """Generate the test set ``args`` describe; print a summary line and the report path."""
    try:
        gen = load_generator(args.generator) if args.generator else None
        report = generate_many(args.corpus, args.kind, args.n, args.seed, args.out, generator=gen,
                               max_files=args.max_files, exclude=args.exclude,
                               max_idf_leak=args.max_idf_leak)
    except LarError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary_line(report))
    print(f"report: {Path(args.out) / 'report.json'}")
    return 0 if report["n_written"] else 1


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m lar_evals.generate_cli CORPUS --kind ... --out DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m lar_evals.generate_cli",
        description="Generate a test set (BEIR layout) from a folder: rare-term, mixed, "
                    "paraphrase pairs, word-swap.")
    return run(add_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
