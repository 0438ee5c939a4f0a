"""The MCP tools of ``lar mcp``, independent of the MCP SDK: dispatch and compact JSON replies
(the arguments' pydantic models, their JSON Schema and checks: ``lar.apps.mcp.inputs``).
``LarTools.call(name, arguments)`` never raises for a caller's mistake: it returns a ``Reply``
with ``ok=False`` and a message that says what was wrong and what to do, so the server keeps
serving."""
from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from lar.layers.derived import GeneratorError, SamplingGenerator
from lar.core.errors import LarError, ScopeError
from lar.apps.toolcache import ToolCache, count_tokens, is_tool_id
from lar.apps.mcp.args import ToolArgumentError
from lar.apps.mcp.inputs import SPEC_BY_NAME

log = logging.getLogger("lar.apps.mcp")


class SamplingUnavailableError(LarError):
    """``build(generator="client")`` was called by a client that does not offer sampling, or
    the client's model could not be reached."""


class SamplingClient(Protocol):
    """The MCP client of the current tool call, as the tools see it (``lar.apps.mcp.server`` makes
    one per call from the request's session)."""

    offers_sampling: bool

    def sample(self, prompt: str, max_tokens: int) -> tuple[str, str]:
        """Ask the client's model; returns ``(reply text, model name the client reports)``."""
        ...


class UnknownToolError(LarError, KeyError):
    """A tool name the server does not have."""

    def __str__(self) -> str:
        return self.args[0]


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
                 config: Mapping[str, Any] | None = None, layers: Sequence[str] | None = None,
                 background: bool = False):
        from lar.engine.settings import default_state_dir

        root_path = Path(root).expanduser()
        if not root_path.is_dir():
            raise ScopeError(f"--root {str(root)!r} is not a folder; give the folder to serve")
        self.root = root_path.resolve()
        self.state = Path(state).expanduser().resolve() if state else default_state_dir(self.root)
        self.config = dict(config or {})
        self.layers = list(layers) if layers else None
        self.background = bool(background)  # build in the background once the engine opens
        self.tools = ToolCache(self.state / "tools", root=self.root, allowed_commands=allowed_commands,
                               hidden=[self.state])
        self._engine = None
        self._tool_engine = None
        self._lock = threading.RLock()
        self._client: SamplingClient | None = None  # the MCP client of the call in progress

    @property
    def engine(self):
        if self._engine is None:
            import lar

            self._engine = lar.open(self.root, self.state, config=self.config,
                                    background=self.background)
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
    def call(self, name: str, arguments: Any, *, client: SamplingClient | None = None) -> Reply:
        """Run tool ``name``; ``client`` is the MCP client of this call (its model is reached
        through it by ``build(generator="client")``; None: no client model)."""
        with self._lock:
            self._client = client
            try:
                return self._call(name, arguments)
            finally:
                self._client = None

    def _call(self, name: str, arguments: Any) -> Reply:
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
        hits = [_compact(h) for h in res.hits]
        if source == "tools":
            self._note = {"raw_tokens": 0}
            hits = [x for x in (self._tool_hit(h) for h in hits) if x is not None]
            self._note["ids"] = [h["id"] for h in hits]
        runs = [{"layer": r.name, "state": r.state.value, "hits": r.contributions}
                | ({"coverage": round(r.coverage, 3)} if r.coverage is not None else {})
                | ({"reason": r.reason} if r.reason and (r.state.value != "ran" or (
                    r.coverage is not None and r.coverage < 1.0)) else {})
                for r in res.runs if r.state.value != "skipped"]
        return {"hits": hits, "score_scale": res.score_scale, "runs": runs,
                "elapsed": round(res.elapsed, 3)}

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
        out = {"id": f"{oid}:L{a}-{b}", "path": hit["path"], "lines": [a, b], "excerpt": excerpt,
               "signals": hit["signals"], "cmd": got.command}
        out.update({k: hit[k] for k in ("rank", "score") if k in hit})
        return out

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

    def _t_build(self, timebox, layers, generator, scope) -> dict[str, Any]:
        layers = layers or self.layers
        if generator is None:
            gen = self._client_generator()
            if gen is None:
                return self.engine.build(timebox=timebox, layers=layers, scope=scope)
            with gen.reachable(self._client if self._client and self._client.offers_sampling
                               else None):  # continue with the client's model where it can
                return self.engine.build(timebox=timebox, layers=layers, scope=scope)
        if layers is None:
            layers = ["derived"]
        elif "derived" not in layers:
            raise ToolArgumentError(f"build: argument 'generator' applies to the derived layer; "
                                    f"add 'derived' to layers or leave layers out (got {layers})")
        layer = self._derived()
        t0 = time.monotonic()
        if generator == "extractive":
            layer.use_generator("extractive")
            report = self.engine.build(timebox=timebox, layers=layers, scope=scope)
        else:
            client = self._client
            if client is None or not client.offers_sampling:
                raise SamplingUnavailableError(
                    "build: generator 'client' writes derived texts with the MCP client's model "
                    "through sampling, but this client did not declare the sampling capability. "
                    "Use generator='extractive' to derive texts offline, without a model.")
            _, model = client.sample(PROBE_PROMPT, 16)  # the model name keys the cache
            gen = ClientGenerator(model)
            layer.use_generator(gen)
            left = max(timebox - (time.monotonic() - t0), min(timebox, 0.1))
            with gen.reachable(client):
                report = self.engine.build(timebox=left, layers=layers, scope=scope)
        report["generator"] = layer.key.to_json()
        return report

    def _derived(self):
        layer = self.engine.layers.get("derived")
        if layer is None or not hasattr(layer, "use_generator"):
            have = ", ".join(self.engine.layers)
            raise ToolArgumentError("build: argument 'generator' needs the derived layer, which "
                                    f"this engine does not have (layers: {have})")
        return layer

    def _client_generator(self) -> "ClientGenerator | None":
        """The derived layer's generator when it is the client's model (a build continues
        with it), else None."""
        if self._engine is None:
            return None
        gen = getattr(self._engine.layers.get("derived"), "generator", None)
        return gen if isinstance(gen, ClientGenerator) else None


PROBE_PROMPT = "Reply with the single word OK."


def _compact(hit) -> dict[str, Any]:
    """A hit's compact JSON; a hit of the derived layer also names the derived text it matched
    and the generator and model that wrote it (verify with fetch: it is not stated literally)."""
    out = hit.to_compact()
    ev = hit.evidence.get("derived") if isinstance(hit.evidence, Mapping) else None
    d = getattr(ev, "details", None) or {}
    if d.get("derived_text"):
        out["derived"] = {"text": d["derived_text"], "kind": d.get("kind"),
                          "generator": d.get("generator"), "model": d.get("model")}
    return out


class ClientGenerator(SamplingGenerator):
    """``SamplingGenerator`` over the MCP client's model (generator name "sampling", model as
    the client reports it). The model is reachable only inside ``reachable(client)``, i.e.
    during a ``build`` tool call; between calls ``available`` is false and the derived layer
    leaves its units pending instead of failing them."""

    def __init__(self, model: str):
        self._client: SamplingClient | None = None
        super().__init__(self._sample, model=model)

    @property
    def available(self) -> bool:
        return self._client is not None

    @contextlib.contextmanager
    def reachable(self, client: SamplingClient | None):
        self._client = client
        try:
            yield self
        finally:
            self._client = None

    def _sample(self, prompt: str) -> str:
        client = self._client
        if client is None:
            raise GeneratorError("the MCP client's model is reachable only during a build call")
        try:
            text, model = client.sample(prompt, 400)
        except Exception:
            self._client = None  # declined or gone: the rest of this build leaves units pending
            raise
        if model != self.model:
            self._client = None
            raise GeneratorError(f"the client's model changed from {self.model!r} to {model!r} "
                                 "during the build; call build with generator='client' again")
        return text
