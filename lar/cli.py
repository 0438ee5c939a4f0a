"""The ``lar`` command: index, status, search, fetch, inventory, read, build, demo, eval.

Every command takes ``--root`` (default: the current folder) and ``--state``; ``--json`` prints
the stable JSON documented in the README (each object carries ``"schema": 1``).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from .errors import LarError
from .timebox import parse_duration


def _csv(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def _duration(value: str) -> float:
    try:
        return parse_duration(value)
    except LarError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _query(value: str) -> Any:
    """A query is text, or a JSON object {layer: query} when it starts with '{'."""
    if value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"query looks like JSON but is not valid: {exc}") from None
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lar", description="Layered Anytime Retrieval")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=".", help="folder to search (default: current folder)")
    common.add_argument("--state", default=None, help="state dir (default: <root>/.lar)")
    common.add_argument("--json", action="store_true", help="print stable JSON")
    sub = p.add_subparsers(dest="cmd", required=True)

    sub.add_parser("index", parents=[common], help="scan the folder into the file index")
    sub.add_parser("status", parents=[common], help="layers, coverage, skipped files")
    s = sub.add_parser("search", parents=[common], help="search under a timebox")
    s.add_argument("query", type=_query, help="text, or a JSON mapping {layer: query}")
    s.add_argument("--timebox", type=_duration, default=0.5, help="e.g. 200ms, 1s (default 500ms)")
    s.add_argument("--k", type=int, default=20)
    s.add_argument("--tokens", type=int, default=None, help="also bound the result's size in tokens")
    s.add_argument("--layers", type=_csv, default=None, help="comma-separated layer names")
    s.add_argument("--exclude", type=_csv, default=None, help="comma-separated layer names")
    s.add_argument("--scope", action="append", default=None, help="glob to include (repeatable)")
    s.add_argument("--fusion", default="route-unique", help="route-unique | rrf | combsum | combmnz")
    s.add_argument("--rrf-c", type=float, default=60.0)
    s.add_argument("--emphasis", default="balanced", choices=["precision", "balanced", "recall"])
    s.add_argument("--strict", action="store_true", help="fail if any layer fails")
    s.add_argument("--full", action="store_true", help="with --json: evidence per layer too")
    f = sub.add_parser("fetch", parents=[common], help="full text of a hit id")
    f.add_argument("id")
    f.add_argument("--context", type=int, default=0, help="lines of context on each side")
    i = sub.add_parser("inventory", parents=[common], help="list every unit in scope")
    i.add_argument("--scope", action="append", default=None)
    r = sub.add_parser("read", parents=[common], help="read a unit by path or hash")
    r.add_argument("unit")
    b = sub.add_parser("build", parents=[common], help="let building layers catch up")
    b.add_argument("--timebox", type=_duration, default=30.0)
    d = sub.add_parser("demo", help="run the scripted demo on the embedded corpus")
    d.add_argument("--timebox", type=_duration, default=0.5)
    d.add_argument("--json", action="store_true")
    e = sub.add_parser("eval", add_help=False,
                       help="evaluation harness: lar eval beir DIR --split NAME (python -m evals)")
    e.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _eval(argv: Sequence[str]) -> int:
    """``lar eval ...``: hand the rest of the command line to the evaluation harness."""
    import importlib
    import os

    try:
        eval_main = importlib.import_module("evals.cli").main
    except ImportError as exc:
        if exc.name not in ("evals", "evals.cli"):
            raise
        # an install that predates the harness: use the checkout we are standing in, if any
        if not os.path.isfile(os.path.join("evals", "cli.py")):
            print("lar: error: the evaluation harness (package 'evals') is not importable; run it "
                  "from the repository root as: python -m evals " + " ".join(argv)
                  + " (or reinstall lar: pip install -e .)", file=sys.stderr)
            return 2
        sys.path.insert(0, os.getcwd())
        eval_main = importlib.import_module("evals.cli").main
    return eval_main(list(argv))


def _print(obj: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj.to_dict() if hasattr(obj, "to_dict") else obj, ensure_ascii=False,
                         indent=2, default=str))
    else:
        print(obj)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["eval"]:
        return _eval(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "demo":
            from .demo import run_demo

            return run_demo(timebox=args.timebox, as_json=args.json)
        import lar

        scan = args.cmd not in ("fetch", "read")
        with lar.open(args.root, args.state, scan=scan) as eng:
            if args.cmd == "index":
                _print(eng.index_now() if not scan else eng._last_scan, True)
            elif args.cmd == "status":
                _print(eng.status(), args.json)
            elif args.cmd == "search":
                res = eng.search(args.query, timebox=args.timebox, k=args.k, emphasis=args.emphasis,
                                 layers=args.layers, exclude=args.exclude, scope=args.scope,
                                 fusion=args.fusion, rrf_c=args.rrf_c, strict=args.strict,
                                 tokens=args.tokens)
                if args.json:
                    print(res.to_json(full=args.full, indent=2))
                else:
                    print(res)
            elif args.cmd == "fetch":
                _print(eng.fetch(args.id, context=args.context), args.json)
            elif args.cmd == "inventory":
                items = eng.inventory(scope=args.scope)
                if args.json:
                    print(json.dumps({"schema": 1, "units": [x.to_dict() for x in items]}, indent=2))
                else:
                    for x in items:
                        print(f"{x.hash[:12]}  {x.size:>9}  {x.path}")
            elif args.cmd == "read":
                sys.stdout.write(eng.read(args.unit))
            elif args.cmd == "build":
                _print(eng.build(timebox=args.timebox), True)
        return 0
    except LarError as exc:
        print(f"lar: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
