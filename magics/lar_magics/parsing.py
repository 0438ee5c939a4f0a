"""Parsing ``%lar`` lines and ``%%lar`` cells. The parser raises ``MagicUsageError`` (with the
sub-command's usage) instead of exiting, so a wrong flag prints usage, never a traceback.

The search flags are the ``lar search`` command line's: ``--timebox --k --tokens --layers
--exclude --scope --fusion --rrf-c --emphasis --strict --json --full``, plus ``--as NAME``.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
from typing import Any, Iterable

from lar.apps.cli_args import add_search_arguments, csv_list, duration, durations

from lar_magics.errors import MagicUsageError


class HelpShown(Exception):
    """``--help`` printed the help; nothing else to do."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse hook
        raise MagicUsageError(message, self.format_usage())

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            print(message)
        raise HelpShown()


def _name(value: str) -> str:
    if not value.isidentifier():
        raise argparse.ArgumentTypeError(f"{value!r} is not a Python variable name")
    return value


def add_search_flags(p: argparse.ArgumentParser, as_default: str | None) -> None:
    add_search_arguments(p)  # the lar search command's own flags
    p.add_argument("--json", action="store_true", help="print the stable JSON instead")
    p.add_argument("--full", action="store_true", help="with --json: evidence per layer too")
    p.add_argument("--view", action="store_true", help="show the interactive results view")
    p.add_argument("--as", dest="as_name", type=_name, default=as_default,
                   help=f"bind the result to this variable (default {as_default})")


def build_parser() -> tuple[Parser, dict[str, Parser]]:
    p = Parser(prog="%lar", description="lar in a notebook (see docs/notebooks.md)", add_help=True)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    subs: dict[str, Parser] = {}

    def add(name: str, help: str) -> Parser:
        subs[name] = sub.add_parser(name, help=help, prog=f"%lar {name}")
        return subs[name]

    o = add("open", "open an engine on a folder (or --demo)")
    o.add_argument("path", nargs="?", help="the folder to search")
    o.add_argument("--state", default=None, help="state dir (default: <root>/.lar)")
    o.add_argument("--config", default=None, help="engine config: JSON object or JSON file")
    o.add_argument("--no-scan", action="store_true", help="skip the initial scan")
    o.add_argument("--no-background", action="store_true",
                   help="do not build in the background (a folder opens building, yielding to "
                        "searches; --demo never does, so the tour does not depend on timing)")
    o.add_argument("--demo", action="store_true", help="the embedded demo corpus (as make demo)")
    o.add_argument("--workdir", default=None, help="with --demo: where .lar-demo lives")
    o.add_argument("--as", dest="as_name", type=_name, default=None, help="bind the engine")
    add("close", "close the notebook's engine")
    st = add("status", "layers and coverage")
    st.add_argument("--scope", action="append", default=None)
    st.add_argument("--view", action="store_true", help="the status view (coverage bars)")
    st.add_argument("--live", action="store_true",
                    help="the status view, building in the background and refreshing")
    st.add_argument("--interval", type=duration, default=1.0, help="refresh every (default 1s)")
    st.add_argument("--json", action="store_true")
    st.add_argument("--as", dest="as_name", type=_name, default=None)
    s = add("search", "search under a timebox")
    s.add_argument("query", nargs="+", help="text, or a JSON mapping {layer: query}")
    add_search_flags(s, "_lar")
    a = add("anytime", "the anytime view: the search at growing timeboxes")
    a.add_argument("query", nargs="+")
    add_search_flags(a, "_lar_anytime")
    a.set_defaults(timebox=1.0)
    a.add_argument("--steps", type=durations, default=None,
                   help="stage timeboxes before the full one (default 25ms,100ms,400ms)")
    d = add("defaults", "search flags put before every %%lar search / anytime")
    add_search_flags(d, None)
    d.add_argument("--reset", action="store_true", help="forget the defaults")
    f = add("fetch", "full text of a hit id")
    f.add_argument("id")
    f.add_argument("--context", type=int, default=0, help="lines of context on each side")
    f.add_argument("--json", action="store_true")
    f.add_argument("--as", dest="as_name", type=_name, default="_lar_fetched")
    e = add("explain", "the explain view of a late-interaction hit")
    e.add_argument("id")
    e.add_argument("--result", type=_name, default=None,
                   help="variable holding the search (default: the last search)")
    e.add_argument("--as", dest="as_name", type=_name, default=None)
    b = add("build", "let building layers catch up (%lar build late: that layer only)")
    b.add_argument("names", nargs="*", metavar="LAYER", help="layers to build (as --layers)")
    b.add_argument("--timebox", type=duration, default=30.0)
    b.add_argument("--layers", type=csv_list, default=None)
    b.add_argument("--scope", action="append", default=None)
    b.add_argument("--background", action="store_true", help="build lazily in the background")
    b.add_argument("--stop", action="store_true", help="stop the background build")
    b.add_argument("--as", dest="as_name", type=_name, default=None)
    t = add("trace", "record calls to a JSON-lines trace: trace start PATH | trace stop")
    t.add_argument("action", choices=["start", "stop"])
    t.add_argument("path", nargs="?")
    r = add("replay", "the replay view of a recorded trace")
    r.add_argument("path")
    r.add_argument("--as", dest="as_name", type=_name, default=None)
    add("eval", "the evaluation harness: %%lar eval beir DIR --split NAME ... (python -m lar_evals)")
    add("help", "this help")
    return p, subs


PARSER, SUBPARSERS = build_parser()


def split(line: str) -> list[str]:
    try:
        return shlex.split(line, posix=True)
    except ValueError as exc:
        raise MagicUsageError(f"cannot read the line: {exc} (check the quotes)",
                              PARSER.format_usage()) from None


def parse(tokens: list[str], defaults: Iterable[str] = ()) -> argparse.Namespace:
    """Parse ``%lar`` tokens; ``defaults`` go before a search's own flags (last one wins)."""
    if not tokens:
        raise MagicUsageError("say what to do, e.g. %lar search \"query\"", PARSER.format_usage())
    cmd, rest = tokens[0], tokens[1:]
    if cmd in ("search", "anytime"):
        rest = list(defaults) + rest
    if cmd not in SUBPARSERS:
        known = ", ".join(SUBPARSERS)
        raise MagicUsageError(f"unknown command {cmd!r}; one of: {known}", PARSER.format_usage())
    ns, extra = PARSER.parse_known_args([cmd, *rest])
    if extra:
        raise MagicUsageError(f"unrecognized arguments: {' '.join(extra)}",
                              SUBPARSERS[cmd].format_usage())
    return ns


def query_of(words: list[str], usage: str = "") -> Any:
    """The query of ``search`` words: text, or a JSON mapping when it starts with '{'."""
    text = " ".join(words).strip()
    if text.startswith("{"):
        try:
            q = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MagicUsageError(f"the query looks like JSON but is not valid: {exc}", usage) from None
        if not isinstance(q, dict):
            raise MagicUsageError("a JSON query must be an object {layer: query}", usage)
        return q
    return text


_PAIR = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")


def _value(text: str, usage: str) -> Any:
    if text[:1] in ("{", "[", '"'):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise MagicUsageError(f"cannot read {text!r} as JSON: {exc}", usage) from None
    return text


def cell_queries(body: str, layer_names: Iterable[str], usage: str = "") -> list[Any]:
    """Queries of a ``%%lar`` cell: a JSON object, ``layer: query`` lines (one search with a
    mapping query), or one free-text query per line. Blank lines and ``#`` comments are skipped."""
    lines = [l for l in body.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    text = "\n".join(lines).strip()
    if not text:
        raise MagicUsageError("the cell is empty: write one query per line, or 'layer: query' "
                              "lines for one search with a query per layer", usage)
    if text.startswith("{"):
        return [query_of([text], usage)]
    names = set(layer_names)
    pairs = [_PAIR.match(l) for l in lines]
    if all(m and m.group(1) in names and m.group(2) for m in pairs):
        mapping: dict[str, Any] = {}
        for m in pairs:
            if m.group(1) in mapping:
                raise MagicUsageError(f"layer {m.group(1)!r} appears twice in the cell", usage)
            mapping[m.group(1)] = _value(m.group(2), usage)
        return [mapping]
    return [l.strip() for l in lines]


__all__ = ["HelpShown", "PARSER", "Parser", "SUBPARSERS", "add_search_flags", "build_parser",
           "cell_queries", "parse", "query_of", "split"]
