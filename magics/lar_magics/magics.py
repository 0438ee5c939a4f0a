"""``%lar`` and ``%%lar``: lar's engine, results and views in an IPython kernel.

Every sub-command is documented in docs/notebooks.md; ``%lar help`` prints the list and
``%lar CMD --help`` a command's flags. A wrong flag prints the usage and the error (no
traceback); an error lar raises on purpose (``LarError``) prints its message.
"""
from __future__ import annotations

import sys
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from lar.core.errors import LarError

from lar.apps.cli_args import SEARCH_FLAGS

from lar_magics import parsing
from lar_magics.errors import MagicError, MagicUsageError
from lar_magics.results import Results, ResultsList, Shown, search
from lar_magics.session import SESSION, as_magic, open_demo, read_config

def search_params(ns) -> dict[str, Any]:
    """The search arguments the ``%lar search`` flags gave (``lar search``'s flags)."""
    return {k: getattr(ns, k) for k in SEARCH_FLAGS}


def build_report(report: dict[str, Any]) -> str:
    lines = [f"built for {report.get('elapsed', 0.0):.1f} s (timebox {report.get('timebox', 0):g} s)"]
    for name, v in (report.get("layers") or {}).items():
        cov = v.get("coverage")
        lines.append(f"  {name:<10} {v.get('state', ''):<8} ok {v.get('ok', 0):>5}  skipped "
                     f"{v.get('skipped', 0):>4}  failed {v.get('failed', 0):>4}  pending "
                     f"{v.get('pending', 0):>5}  coverage {'-' if cov is None else f'{cov:.0%}'}")
    return "\n".join(lines)


@magics_class
class LarMagics(Magics):
    @line_cell_magic
    def lar(self, line: str, cell: str | None = None):
        """lar: ``%lar open|status|search|anytime|fetch|explain|build|eval|trace|replay|defaults|
        close|help`` (``%lar help`` lists them); ``%%lar [flags]`` runs the cell's queries."""
        try:
            if cell is not None:
                return self._cell(line, cell)
            return self._line(line)
        except parsing.HelpShown:
            return None
        except MagicUsageError as exc:
            if exc.usage:
                print(exc.usage, file=sys.stderr)
            print(f"%lar: error: {exc}", file=sys.stderr)
        except LarError as exc:
            print(f"lar: error: {exc}", file=sys.stderr)
        return None

    # -- helpers -------------------------------------------------------------------------------
    def _bind(self, name: str | None, value: Any) -> None:
        if name:
            self.shell.user_ns[name] = value

    def _engine(self):
        return SESSION.require()

    # -- line magic ----------------------------------------------------------------------------
    def _line(self, line: str):
        tokens = parsing.split(line)
        if tokens[:1] == ["eval"]:
            return self._eval(tokens[1:])
        ns = parsing.parse(tokens, SESSION.defaults)
        ns._tokens = tokens[1:]
        return getattr(self, "_" + ns.cmd)(ns)

    def _help(self, ns):
        parsing.PARSER.print_help()

    def _open(self, ns):
        config = read_config(ns.config)
        if ns.demo:
            if ns.path:
                raise MagicUsageError("give a PATH or --demo, not both",
                                      parsing.SUBPARSERS["open"].format_usage())
            eng = open_demo(ns.workdir, config)
        elif not ns.path:
            raise MagicUsageError("which folder? %lar open PATH (or %lar open --demo)",
                                  parsing.SUBPARSERS["open"].format_usage())
        else:
            from lar.engine.settings import interactive_background

            eng = SESSION.open(ns.path, ns.state, config=config, scan=not ns.no_scan,
                               background=interactive_background() and not ns.no_background)
        self._bind(ns.as_name, eng)
        n = len(eng.inventory())
        print(f"lar: opened {eng.root} ({n} units; state in {eng.state_dir})\n"
              f"layers: {', '.join(eng.layers)}\n"
              "next: %lar status, %lar search \"query\", %lar build --timebox 30s")

    def _close(self, ns):
        was = SESSION.engine
        SESSION.close()
        print("lar: closed " + (str(was.root) if was is not None else "nothing (no engine was open)"))

    def _status(self, ns):
        eng = self._engine()
        if ns.view or ns.live:
            from lar_magics.status_view import StatusView

            view = StatusView(eng, scope=ns.scope, interval=ns.interval)
            if ns.live:
                view.start(build=True)
            self._bind(ns.as_name, view)
            return view
        with as_magic(eng):
            st = eng.status(ns.scope)
        self._bind(ns.as_name, st)
        if ns.json:
            print(_json(st.to_dict()))
            return None
        return Shown(st)

    def _query(self, ns, cmd: str) -> Any:
        return parsing.query_of(ns.query, parsing.SUBPARSERS[cmd].format_usage())

    def _search(self, ns):
        query = self._query(ns, "search")
        res = search(self._engine(), query, **search_params(ns))
        return self._show(ns, res)

    def _show(self, ns, res: Results):
        SESSION.last = res
        self._bind(ns.as_name, res)
        if ns.json:
            print(res.to_json(full=ns.full, indent=2))
            return None
        return res.widget() if ns.view else res

    def _anytime(self, ns, query: Any = None):
        from lar_magics.anytime_view import AnytimeView

        q = self._query(ns, "anytime") if query is None else query
        eng = self._engine()
        params = search_params(ns)
        timebox = params.pop("timebox")
        view = AnytimeView(eng, q, timebox=timebox, steps=ns.steps, run=True, **params)
        SESSION.last = view.results
        self._bind(ns.as_name, view)
        return view

    def _defaults(self, ns):
        if ns.reset:
            SESSION.defaults = []
        else:
            given = [t for t in ns._tokens if t != "--reset"]
            if given:
                SESSION.defaults = given
        print("lar: search defaults: " + (" ".join(SESSION.defaults) or "(none)"))

    def _fetch(self, ns):
        eng = self._engine()
        with as_magic(eng):
            f = eng.fetch(ns.id, context=ns.context)
        self._bind(ns.as_name, f)
        if ns.json:
            print(_json(f.to_dict()))
            return None
        return Shown(f)

    def _explain(self, ns):
        from lar_magics.views import explain

        eng = self._engine()
        res = self.shell.user_ns.get(ns.result) if ns.result else SESSION.last
        if ns.result and res is None:
            raise MagicError(f"no variable {ns.result!r} holds a search result")
        if res is None:
            raise MagicError("explain needs the search the hit came from: run %lar search first, "
                             "or pass --result NAME")
        if isinstance(res, ResultsList):  # a %%lar cell's searches: the one that has the hit
            res = next((r for r in res if any(h.id == ns.id for h in r.hits)), res[-1])
        view = explain(eng, res, ns.id)
        self._bind(ns.as_name, view)
        return view

    def _build(self, ns):
        eng = self._engine()
        if ns.stop:
            eng.stop_background_build()
            print("lar: background build stopped")
            return None
        if ns.background:
            eng.start_background_build()
            print("lar: building in the background (it yields to searches); watch it with "
                  "%lar status --view, stop it with %lar build --stop")
            return None
        layers = list(dict.fromkeys([*(ns.layers or []), *ns.names])) or None
        with as_magic(eng):
            report = eng.build(timebox=ns.timebox, layers=layers, scope=ns.scope)
        self._bind(ns.as_name, report)
        print(build_report(report))
        return None

    def _trace(self, ns):
        eng = self._engine()
        start, stop = getattr(eng, "record_trace", None), getattr(eng, "stop_trace", None)
        if start is None or stop is None:
            raise MagicError("this lar cannot record traces (Engine.record_trace is missing); "
                             "update lar")
        if ns.action == "start":
            if not ns.path:
                raise MagicUsageError("where to? %lar trace start PATH",
                                      parsing.SUBPARSERS["trace"].format_usage())
            start(ns.path)
            print(f"lar: recording calls to {ns.path}; %lar trace stop ends it, "
                  f"%lar replay {ns.path} shows it")
        else:
            if ns.path:
                raise MagicUsageError("trace stop takes no path",
                                      parsing.SUBPARSERS["trace"].format_usage())
            stop()
            print("lar: trace stopped")

    def _replay(self, ns):
        from lar_magics.views import replay

        view = replay(self._engine(), ns.path)
        self._bind(ns.as_name, view)
        return view

    def _eval(self, argv: list[str]):
        try:
            from lar_evals.cli import main as eval_main
        except ImportError as exc:
            raise MagicError("the evaluation harness (package 'lar_evals') is not importable "
                             f"here; reinstall lar (pip install -e '.[eval]'): {exc}") from None
        if not argv:
            argv = ["--help"]
        try:
            code = eval_main(list(argv))
        except SystemExit as exc:  # argparse printed its usage and the error
            code = exc.code if isinstance(exc.code, int) else 2
        if code:
            print(f"lar: eval exited with status {code}", file=sys.stderr)
        return None

    # -- cell magic ----------------------------------------------------------------------------
    def _cell(self, line: str, cell: str):
        tokens = parsing.split(line)
        cmd = tokens[0] if tokens[:1] in (["search"], ["anytime"]) else "search"
        if tokens[:1] == [cmd]:
            tokens = tokens[1:]
        usage = parsing.SUBPARSERS[cmd].format_usage()
        if tokens[:1] and not tokens[0].startswith("-"):
            raise MagicUsageError("with %%lar the first line holds flags only; the queries go in "
                                  "the cell, one per line (or 'layer: query' lines)", usage)
        ns = parsing.parse([cmd, "cell", *tokens], SESSION.defaults)
        eng = self._engine()
        queries = parsing.cell_queries(cell, eng.layers, usage)
        if cmd == "anytime":
            if len(queries) != 1:
                raise MagicUsageError("%%lar anytime takes one query (or one layer mapping)", usage)
            return self._anytime(ns, queries[0])
        params = search_params(ns)
        if len(queries) == 1:
            return self._show(ns, search(eng, queries[0], **params))
        results = ResultsList(search(eng, q, **params) for q in queries)
        SESSION.last = results[-1]
        self._bind(ns.as_name, results)
        if ns.json:
            print(_json([r.to_dict(full=ns.full) for r in results]))
            return None
        return results


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, ensure_ascii=False, indent=2, default=str)


__all__ = ["LarMagics", "build_report", "search_params"]
