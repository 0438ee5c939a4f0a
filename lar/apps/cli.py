"""The ``lar`` command: index, status, search, fetch, inventory, read, build, demo, eval, calls,
replay, mcp (the MCP server), run (the tool-output cache).

Every command takes ``--root`` (default: the current folder) and ``--state``; ``--json`` prints
the stable JSON documented in docs/json.md (each object carries ``"schema": 1``).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from lar.apps.cli_args import add_search_arguments, csv_list, duration, query_arg, request_from_args
from lar.core.errors import LarError

COMMANDS_GROUP = "lar.commands"


def _executor(ray_address: str | None):
    """``lar build --ray [ADDRESS]``: None (build here), ``"ray"`` (at the engine's
    ``ray_address``, else a local cluster) or the Ray executor at ADDRESS."""
    if not ray_address:
        return None if ray_address is None else "ray"
    from lar.distributed.ray_build import RayExecutor

    return RayExecutor(address=ray_address)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lar", description="Layered Anytime Retrieval")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=".", help="folder to search (default: current folder)")
    common.add_argument("--state", default=None, help="state dir (default: <root>/.lar)")
    common.add_argument("--json", action="store_true", help="print stable JSON")
    common.add_argument("-v", "--verbose", action="store_true",
                        help="let model libraries print their loading reports and progress bars")
    sub = p.add_subparsers(dest="cmd", required=True)

    sub.add_parser("index", parents=[common], help="scan the folder into the file index")
    sub.add_parser("status", parents=[common], help="layers, coverage, skipped files")
    s = sub.add_parser("search", parents=[common], help="search under a timebox")
    s.add_argument("query", type=query_arg, help="text, or a JSON mapping {layer: query}")
    add_search_arguments(s)
    s.add_argument("--full", action="store_true", help="with --json: evidence per layer too")
    s.add_argument("--all-runs", action="store_true",
                   help="list every layer's run, skipped ones too (default: the layers that ran, "
                        "failed or were named)")
    f = sub.add_parser("fetch", parents=[common], help="full text of a hit id")
    f.add_argument("id")
    f.add_argument("--context", type=int, default=0, help="lines of context on each side")
    i = sub.add_parser("inventory", parents=[common], help="list every unit in scope")
    i.add_argument("--scope", action="append", default=None)
    r = sub.add_parser("read", parents=[common], help="read a unit by path or hash")
    r.add_argument("unit")
    b = sub.add_parser("build", parents=[common], help="let building layers catch up")
    b.add_argument("--timebox", type=duration, default=30.0)
    b.add_argument("--layers", type=csv_list, default=None, help="build only these layers")
    b.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the model passes on Ray workers (the optional ray extra): at ADDRESS "
                        "('auto', 'host:port', 'ray://host:port'), else a local cluster")
    d = sub.add_parser("demo", help="run the scripted demo on the embedded corpus")
    d.add_argument("--timebox", type=duration, default=0.5)
    for long_op in (b, d):  # progress bars on stderr: by default when stderr is a terminal
        long_op.add_argument("--progress", dest="progress", action="store_true", default=None,
                             help="show progress bars on stderr (default: when it is a terminal)")
        long_op.add_argument("--no-progress", dest="progress", action="store_false",
                             help="show no progress bars")
    d.add_argument("--json", action="store_true")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="let model libraries print their loading reports and progress bars")
    for traced in (s, f):  # --trace: append these calls to a JSONL trace (source "cli")
        traced.add_argument("--trace", default=None, metavar="PATH",
                            help="record this call in a JSONL trace (see docs/traces.md)")
    c = sub.add_parser("calls", parents=[common], help="call log summary: tokens, fetched ids, follow-ups")
    c.add_argument("--session", default=None, help="only this session (default: all)")
    rp = sub.add_parser("replay", parents=[common], help="replay a trace and show what changed")
    rp.add_argument("trace_file", metavar="TRACE", help="a JSONL trace recorded with --trace")
    rp.add_argument("--layers", type=csv_list, default=None, help="replay searches with these layers")
    rp.add_argument("--timebox", type=duration, default=None, help="replay searches with this timebox")
    rp.add_argument("--k", type=int, default=None, help="replay searches with this k")
    m = sub.add_parser("mcp", parents=[common], help="serve the root to MCP clients over stdio")
    m.add_argument("--allow", action="append", default=None, metavar="CMD",
                   help="allow this command in run_tool (repeatable; replaces the default "
                        "allow-list rg grep ls cat head tail wc find git)")
    m.add_argument("--layers", type=csv_list, default=None,
                   help="layers search and build use when the caller names none")
    m.add_argument("--no-background", action="store_true",
                   help="do not build in the background (default: build, yielding to searches)")
    rn = sub.add_parser("run", parents=[common], help="run a command through the tool-output cache")
    rn.add_argument("--fetch", default=None, metavar="ID", help="print a tool id's full text")
    rn.add_argument("--timeout", type=duration, default=60.0)
    rn.add_argument("--refresh", action="store_true", help="run again even if cached")
    rn.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS... (no shell)")
    for name, ep in sorted(plugin_commands().items()):
        e = sub.add_parser(name, add_help=False, help=f"{name} ... (from {ep.value})")
        e.add_argument("args", nargs=argparse.REMAINDER)
    return p


def search_failed(res) -> str | None:
    """Why a search answered nothing it was asked for: every layer the caller named (or, when
    none was named, every layer that did not skip) failed. None when any of them ran."""
    named = set(res.layers) if res.layers is not None else None
    runs = [r for r in res.runs if (r.name in named if named is not None else r.state.value != "skipped")]
    if runs and all(r.state.value == "failed" for r in runs):
        return "; ".join(f"{r.name} failed: {r.reason}" for r in runs)
    return None


def plugin_commands() -> dict[str, Any]:
    """Subcommands other packages add through the ``lar.commands`` entry-point group (the
    evaluation harness adds ``eval``): ``{name: EntryPoint}``; each loads to ``main(argv) -> int``."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}


def _plugin(name: str, argv: Sequence[str]) -> int:
    """``lar NAME ...``: hand the rest of the command line to the package that added NAME."""
    return plugin_commands()[name].load()(list(argv))


def _cli_session() -> str:
    """Calls from one shell (or one agent process) share a session: $LAR_SESSION or the parent pid."""
    import os

    return os.environ.get("LAR_SESSION") or f"cli-{os.getppid()}"


def _calls(args) -> int:
    """``lar calls``: the call log summary, read from <state>/calls.sqlite without a scan."""
    from pathlib import Path

    from lar.record.calllog import CallLog
    from lar.engine.settings import default_state_dir

    state = Path(args.state).expanduser() if args.state else default_state_dir(Path(args.root).resolve())
    if not (state / "calls.sqlite").is_file():
        raise LarError(f"no call log in {str(state)!r} yet; run a search there first "
                       "(or pass --root/--state of the folder you searched)")
    with CallLog(state / "calls.sqlite") as log:
        if args.json:
            _print(log.summary(args.session), True)
        else:
            print(log.format_summary(args.session))
    return 0


def _replay(eng, args) -> None:
    from lar.record.replay import replay

    report = replay(args.trace_file, eng, layers=args.layers, timebox=args.timebox, k=args.k)
    _print(report, args.json)


def _mcp(args) -> int:
    """``lar mcp``: serve the root over stdio (docs/agents.md)."""
    from lar.apps.mcp import serve

    serve(args.root, state=args.state, allowed_commands=args.allow, layers=args.layers,
          background=False if args.no_background else None)
    return 0


def _run(args) -> int:
    """``lar run -- CMD ARGS``: run through the tool cache in <state>/tools and print the view;
    ``lar run --fetch ID``: print an output, item or line range in full."""
    from pathlib import Path

    from lar.engine.settings import default_state_dir
    from lar.apps.toolcache import ToolCache

    state = Path(args.state).expanduser() if args.state else default_state_dir(Path(args.root).resolve())
    cache = ToolCache(state / "tools")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.fetch:
        if command:
            raise LarError("give either --fetch ID or a command, not both")
        got = cache.fetch(args.fetch)
        _print(got, args.json) if args.json else sys.stdout.write(got.text)
        return 0
    if not command:
        raise LarError("nothing to run; give a command after --, e.g. lar run -- rg -n TODO src")
    view = cache.run(command, timeout=args.timeout, refresh=args.refresh)
    _print(view.to_dict() if args.json else view.text, args.json)
    return 0


def _print(obj: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj.to_dict() if hasattr(obj, "to_dict") else obj, ensure_ascii=False,
                         indent=2, default=str))
    else:
        print(obj)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in plugin_commands():
        return _plugin(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "verbose", False):
        import os

        from lar.encoders.models import ENV_VERBOSE

        os.environ[ENV_VERBOSE] = "1"
    try:
        if args.cmd == "demo":
            from lar.apps.demo import run_demo

            return run_demo(timebox=args.timebox, as_json=args.json, progress=args.progress)
        if args.cmd == "calls":
            return _calls(args)
        if args.cmd == "mcp":
            return _mcp(args)
        if args.cmd == "run":
            return _run(args)
        import lar

        scan = args.cmd not in ("fetch", "read")
        with lar.open(args.root, args.state, scan=scan, session=_cli_session(),
                      trace=getattr(args, "trace", None)) as eng, eng.trace_source("cli"):
            if args.cmd == "index":
                _print(eng.index_now() if not scan else eng.last_scan, True)
            elif args.cmd == "status":
                _print(eng.status(), args.json)
            elif args.cmd == "search":
                res = eng.search(request_from_args(args.query, args))
                if args.json:
                    print(res.to_json(full=args.full, indent=2))
                else:
                    print(res.format(all_runs=args.all_runs))
                failed = search_failed(res)
                if failed:
                    print(f"lar: error: {failed}", file=sys.stderr)
                    return 1
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
                from lar.apps.progress import BuildProgress, wanted

                with BuildProgress(wanted(args.progress)) as bars:
                    report = eng.build(timebox=args.timebox, layers=args.layers, progress=bars,
                                       executor=_executor(args.ray))
                _print(report, True)
            elif args.cmd == "replay":
                _replay(eng, args)
        return 0
    except LarError as exc:
        print(f"lar: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def entry() -> None:  # pragma: no cover - the console script
    """``lar``: run the command, then exit without waiting for work a deadline abandoned."""
    from lar.apps.exit import exit_promptly

    sys.exit(exit_promptly(main()))


if __name__ == "__main__":  # pragma: no cover
    entry()
