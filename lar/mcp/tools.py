"""The MCP tools of ``lar mcp``, independent of the MCP SDK: argument specs (JSON Schema),
validation, dispatch and compact JSON replies. ``LarTools.call(name, arguments)`` never raises
for a caller's mistake: it returns a ``Reply`` with ``ok=False`` and a message that says what was
wrong and what to do, so the server keeps serving."""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, LarError, ScopeError
from ..timebox import parse_duration
from ..toolcache import ToolCache, count_tokens, is_tool_id

log = logging.getLogger("lar.mcp")
REQUIRED = object()


class ToolArgumentError(ConfigError):
    """A tool was called with a missing, unknown or malformed argument."""


class UnknownToolError(LarError, KeyError):
    """A tool name the server does not have."""

    def __str__(self) -> str:
        return self.args[0]


# -- argument checks -------------------------------------------------------------------------
def _got(v: Any) -> str:
    return f"{json.dumps(v, default=str)[:60]} ({type(v).__name__})"


def _string(where: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ToolArgumentError(f"{where} must be a non-empty string, got {_got(v)}")
    return v


def _query(where: str, v: Any) -> Any:
    if isinstance(v, str) and v.strip():
        return v
    if isinstance(v, Mapping) and v and all(isinstance(k, str) for k in v):
        return dict(v)
    raise ToolArgumentError(f"{where} must be text or an object {{layer: query}} (e.g. "
                            f'{{"grep": "def main"}}), got {_got(v)}')


def _seconds(lo: float, hi: float) -> Callable[[str, Any], float]:
    def check(where: str, v: Any) -> float:
        try:
            s = parse_duration(v) if not isinstance(v, bool) else None
        except LarError:
            s = None
        if s is None or not lo < s <= hi:
            raise ToolArgumentError(f"{where} must be seconds in ({lo:g}, {hi:g}] (a number, or "
                                    f"text such as '200ms'), got {_got(v)}")
        return s
    return check


def _integer(lo: int, hi: int) -> Callable[[str, Any], int]:
    def check(where: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ToolArgumentError(f"{where} must be an integer from {lo} to {hi}, got {_got(v)}")
        return v
    return check


def _boolean(where: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ToolArgumentError(f"{where} must be true or false, got {_got(v)}")
    return v


def _names(where: str, v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [x for x in v.split(",") if x]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ToolArgumentError(f"{where} must be a list of layer names, got {_got(v)}")
    return v


def _argv(where: str, v: Any) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise ToolArgumentError(f"{where} must be a list of strings such as "
                                f'["rg", "-n", "TODO", "src"] (no shell line), got {_got(v)}')
    return v


def _globs(where: str, v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ToolArgumentError(f"{where} must be a glob or a list of globs, got {_got(v)}")
    return v


def _choice(*values: str) -> Callable[[str, Any], str]:
    def check(where: str, v: Any) -> str:
        if v not in values:
            raise ToolArgumentError(f"{where} must be one of {', '.join(values)}, got {_got(v)}")
        return v
    return check


@dataclass(frozen=True)
class Param:
    name: str
    schema: Mapping[str, Any]
    check: Callable[[str, Any], Any]
    doc: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...] = ()

    def input_schema(self) -> dict[str, Any]:
        props = {}
        for p in self.params:
            s = dict(p.schema, description=p.doc)
            if p.default is not REQUIRED and p.default is not None:
                s["default"] = p.default
            props[p.name] = s
        return {"type": "object", "properties": props, "additionalProperties": False,
                "required": [p.name for p in self.params if p.default is REQUIRED]}

    def bind(self, arguments: Any) -> dict[str, Any]:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(f"{self.name}: arguments must be an object, got {_got(arguments)}")
        known = {p.name for p in self.params}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolArgumentError(f"{self.name}: unknown argument {unknown[0]!r}; its arguments "
                                    f"are {', '.join(p.name for p in self.params) or '(none)'}")
        out = {}
        for p in self.params:
            if p.name not in arguments or (arguments[p.name] is None and p.default is not REQUIRED):
                if p.default is REQUIRED:
                    raise ToolArgumentError(f"{self.name}: missing argument {p.name!r} ({p.doc})")
                out[p.name] = p.default
            else:
                out[p.name] = p.check(f"{self.name}: argument {p.name!r}", arguments[p.name])
        return out


_STR = {"type": "string"}
_NAMES = {"type": "array", "items": {"type": "string"}}
_SECONDS = {"type": ["number", "string"]}
SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("status", "Layers (coverage, query format, cost), unit counts, cached tool outputs."),
    ToolSpec("search", "Search the root (source 'files') or the cached tool outputs ('tools') "
             "under a timebox. Hits are {id, path, lines, excerpt, signals}; fetch an id for the "
             "full text.", (
                 Param("query", {"type": ["string", "object"]}, _query,
                       "text, or an object {layer: query} to give each layer its own query"),
                 Param("timebox", _SECONDS, _seconds(0, 120), "seconds the call may take", 0.5),
                 Param("k", {"type": "integer", "minimum": 1, "maximum": 200}, _integer(1, 200),
                       "number of hits", 20),
                 Param("layers", _NAMES, _names, "run only these layers (default: all)", None),
                 Param("fusion", _STR, _string, "route-unique | rrf | combsum | combmnz",
                       "route-unique"),
                 Param("source", {"type": "string", "enum": ["files", "tools"]},
                       _choice("files", "tools"), "files of the root, or cached tool outputs",
                       "files"),
                 Param("scope", {"type": ["string", "array"], "items": _STR}, _globs,
                       "glob(s) the hits must match, e.g. 'src/**'", None))),
    ToolSpec("fetch", "Full text of a search hit id ('3fa9c1d2e4b5:120-480') or a tool item id "
             "('t3fa9c1d2e4b5:4', ':2-5' items, ':L10-20' lines, or 't3fa9c1d2e4b5' whole).", (
                 Param("id", _STR, _string, "a hit id or tool id from an earlier reply"),
                 Param("context", {"type": "integer", "minimum": 0, "maximum": 200},
                       _integer(0, 200), "lines of context around a hit", 0))),
    ToolSpec("inventory", "Every unit (file) in the root, no relevance match; paged.", (
        Param("limit", {"type": "integer", "minimum": 1, "maximum": 2000}, _integer(1, 2000),
              "units per page", 100),
        Param("offset", {"type": "integer", "minimum": 0}, _integer(0, 10**9), "first unit", 0),
        Param("glob", {"type": ["string", "array"], "items": _STR}, _globs,
              "only units matching these globs", None))),
    ToolSpec("run_tool", "Run an allow-listed read-only command (argv list, no shell) inside "
             "the root; the full output is cached and a filtered view with item ids is "
             "returned. Fetch an item id for its full text.", (
                 Param("command", {"type": "array", "items": _STR, "minItems": 1}, _argv,
                       "argv list, e.g. [\"rg\", \"-n\", \"TODO\", \"src\"]"),
                 Param("cwd", _STR, _string, "working folder, relative to the root", "."),
                 Param("timeout", _SECONDS, _seconds(0, 600), "seconds before it is stopped", 30),
                 Param("refresh", {"type": "boolean"}, _boolean,
                       "run again even if a cached output exists", False))),
    ToolSpec("build", "Let the lazily built layers index for up to timebox seconds.", (
        Param("timebox", _SECONDS, _seconds(0, 600), "seconds to build", 30),
        Param("layers", _NAMES, _names, "build only these layers", None))),
)
SPEC_BY_NAME = {s.name: s for s in SPECS}


@dataclass(frozen=True)
class Reply:
    ok: bool
    text: str


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


class LarTools:
    """The six tools over one root. Calls are serialised (one engine, one writer)."""

    def __init__(self, root: str | Path, *, state: str | Path | None = None,
                 allowed_commands: Sequence[str] | None = None,
                 config: Mapping[str, Any] | None = None, layers: Sequence[str] | None = None):
        from ..engine import default_state_dir

        root_path = Path(root).expanduser()
        if not root_path.is_dir():
            raise ScopeError(f"--root {str(root)!r} is not a folder; give the folder to serve")
        self.root = root_path.resolve()
        self.state = Path(state).expanduser().resolve() if state else default_state_dir(self.root)
        self.config = dict(config or {})
        self.layers = list(layers) if layers else None
        self.tools = ToolCache(self.state / "tools", root=self.root, allowed_commands=allowed_commands,
                               hidden=[self.state])
        self._engine = None
        self._tool_engine = None
        self._lock = threading.RLock()

    @property
    def engine(self):
        if self._engine is None:
            import lar

            self._engine = lar.open(self.root, self.state, config=self.config)
        return self._engine

    def tool_engine(self):
        if self._tool_engine is None:
            cfg = dict(self.config, call_log=False)
            self._tool_engine = self.tools.engine(config=cfg)
        return self._tool_engine

    def close(self) -> None:
        with self._lock:
            for eng in (self._tool_engine, self._engine):
                if eng is not None:
                    eng.close()
            self._engine = self._tool_engine = None

    # -- dispatch ---------------------------------------------------------------------------
    def call(self, name: str, arguments: Any) -> Reply:
        with self._lock:
            t0, kwargs = time.monotonic(), None
            self._note: dict[str, Any] | None = None  # set by calls the engine does not log
            try:
                spec = SPEC_BY_NAME.get(name)
                if spec is None:
                    raise UnknownToolError(f"unknown tool {name!r}; this server has: "
                                           f"{', '.join(SPEC_BY_NAME)}")
                kwargs = spec.bind(arguments)
                eng = self.engine
                source = getattr(eng, "trace_source", None)
                with source("mcp") if callable(source) else contextlib.nullcontext():
                    reply = Reply(True, _dumps(getattr(self, "_t_" + name)(**kwargs)))
            except LarError as exc:
                reply = Reply(False, _dumps({"error": str(exc), "type": type(exc).__name__}))
            except Exception as exc:  # keep serving; the log has the traceback
                log.exception("tool %s failed", name)
                reply = Reply(False, _dumps({"error": f"internal error in {name}: {exc}",
                                             "type": type(exc).__name__}))
            if self._note is not None:
                self._record(name, kwargs or {}, reply, time.monotonic() - t0)
            return reply

    def _record(self, name: str, params: Mapping[str, Any], reply: Reply, elapsed: float) -> None:
        """Log a call the engine does not see (run_tool, fetch of a tool id, search of the
        cached outputs) in the engine's call log, with its raw and view sizes."""
        record = getattr(self._engine, "record_call", None)
        if not callable(record):
            return
        note = self._note or {}
        error = None if reply.ok else json.loads(reply.text)["error"]
        try:
            record(name, dict(params), note.get("ids", ()), elapsed_ms=elapsed * 1000.0,
                   error=error, raw_tokens=note.get("raw_tokens"), view_text=reply.text,
                   source="mcp")
        except Exception:  # the call log is telemetry; never fail the call on it
            log.debug("record_call failed", exc_info=True)

    # -- the tools --------------------------------------------------------------------------
    def _t_status(self) -> dict[str, Any]:
        st = self.engine.status()
        return {"root": st.root, "units": st.units, "distinct": st.distinct_hashes,
                "skipped": len(st.skipped),
                "layers": [{"name": l.name, "coverage": round(l.coverage, 3),
                            "roles": sorted(l.roles), "query": l.query_format, "cost": l.cost}
                           for l in st.layers],
                "tools": {"outputs": len(self.tools.records()), "allowed": list(self.tools.allowed)},
                "default_layers": self.layers}

    def _t_search(self, query, timebox, k, layers, fusion, source, scope) -> dict[str, Any]:
        eng = self.engine if source == "files" else self.tool_engine()
        t0 = time.monotonic()
        if source == "tools":  # outputs appear as they are run: up to half the timebox indexes them
            eng.index_now()
            cheap = [n for n in ("trigram", "bm25") if n in eng.layers]
            eng.build(timebox=timebox / 2, layers=layers or self.layers or cheap)
            timebox = max(timebox - (time.monotonic() - t0), min(timebox, 0.1))
        res = eng.search(query, timebox=timebox, k=k, layers=layers or self.layers,
                         fusion=fusion, scope=scope)
        hits = [h.to_compact() for h in res.hits]
        if source == "tools":
            self._note = {"raw_tokens": 0}
            hits = [x for x in (self._tool_hit(h) for h in hits) if x is not None]
            self._note["ids"] = [h["id"] for h in hits]
        runs = [{"layer": r.name, "state": r.state.value, "hits": r.contributions}
                | ({"coverage": round(r.coverage, 3)} if r.coverage is not None else {})
                | ({"reason": r.reason} if r.reason and r.state.value != "ran" else {})
                for r in res.runs if r.state.value != "skipped"]
        return {"hits": hits, "runs": runs, "elapsed": round(res.elapsed, 3)}

    def _tool_hit(self, hit: dict[str, Any]) -> dict[str, Any] | None:
        """A hit in the outputs corpus as a tool line id, or None when it is not served."""
        oid = self.tools.id_for_path(hit.get("path") or "")
        if oid is None or not hit.get("lines"):
            return None
        a, b = hit["lines"]
        try:
            got = self.tools.fetch(f"{oid}:L{a}-{b}")
        except LarError:
            return None  # not served here (another root, the Python API) or gone
        if self._note is not None:  # one stage would have sent the lines in full
            self._note["raw_tokens"] += count_tokens(got.text)
        excerpt = hit["excerpt"] if not got.withheld else got.text.strip()[:240]
        return {"id": f"{oid}:L{a}-{b}", "path": hit["path"], "lines": [a, b], "excerpt": excerpt,
                "signals": hit["signals"], "cmd": got.command}

    def _t_fetch(self, id, context) -> dict[str, Any]:  # noqa: A002 - the API's name
        if is_tool_id(id):
            self._note = {}
            return self.tools.fetch(id).to_dict()
        f = self.engine.fetch(id, context=context)
        out: dict[str, Any] = {"id": f.id, "path": f.path, "lines": list(f.lines), "text": f.text}
        if context:
            out.update(context_lines=list(f.context_lines), context=f.context_text)
        if f.changed:
            out.update(changed=True, current_id=f.current_id, note=f.note)
        return out

    def _t_inventory(self, limit, offset, glob) -> dict[str, Any]:
        items = self.engine.inventory(scope=glob)
        page = items[offset:offset + limit]
        out: dict[str, Any] = {"total": len(items), "offset": offset,
                               "units": [{"path": u.path, "size": u.size, "hash": u.hash[:12]}
                                         for u in page]}
        if offset + limit < len(items):
            out["next_offset"] = offset + limit
        return out

    def _t_run_tool(self, command, cwd, timeout, refresh) -> dict[str, Any]:
        self._note = {}
        view = self.tools.run(command, cwd=cwd, timeout=timeout, refresh=refresh)
        self._note = {"ids": [it.id for it in view.items], "raw_tokens": view.raw_tokens}
        return view.to_compact()

    def _t_build(self, timebox, layers) -> dict[str, Any]:
        return self.engine.build(timebox=timebox, layers=layers or self.layers)
