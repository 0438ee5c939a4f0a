"""The engine's recording hooks: traces (``lar.record.trace``) and the call log (``lar.record.calllog``).

``Engine`` inherits these. Each public call (search, fetch, build, status, inventory, read) runs
through ``_recorded``: when a trace recorder or the call log is active it times the call and
records one line / row, errors included (then re-raised). Calls made inside a recorded call, or
while a trace is being replayed, are not recorded.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from typing import Any, Callable, Iterable, Mapping

from lar.core.errors import ConfigError, LarError
from lar.core.request import SearchRequest
from lar.record.replay import describe_output
from lar.core.timebox import parse_duration
from lar.record.trace import (CALLS, TraceError, TraceRecorder, call_context, current_context, error_text,
                    new_session_id)


def search_params(given: Mapping[str, Any]) -> dict[str, Any]:
    """What a trace records of a search: its parameters, the timebox in seconds when it parses
    (the call itself raises for it otherwise)."""
    query = given.get("query")
    params = query.params() if isinstance(query, SearchRequest) else dict(given)
    params["timebox"] = seconds(params.get("timebox"))
    return params


def seconds(value: Any) -> Any:
    """A timebox in seconds when it parses (the engine raises for it otherwise)."""
    try:
        return parse_duration(value)
    except LarError:
        return value


class Recording:
    """Mixin for ``Engine``: ``record_trace``, ``stop_trace``, ``trace_source``, ``record_call``
    and the ``call_log`` (a ``CallLog`` or None)."""

    _trace: TraceRecorder | None = None
    call_log = None
    session: str = ""

    def _init_recording(self, trace: str | os.PathLike | None, session: str | None) -> None:
        if session is not None and (not isinstance(session, str) or not session):
            raise ConfigError(f"session must be a non-empty string, got {session!r}")
        self.session = (session or self.config.get("session") or os.environ.get("LAR_SESSION")
                        or new_session_id())
        self._trace = None
        self.call_log = None
        if self.config.get("call_log", True):
            from lar.record.calllog import FOLLOW_UP_WINDOW, CallLog

            try:
                self.call_log = CallLog(self.state_dir / "calls.sqlite", idle=self.idle,
                                        follow_up_window=float(self.config.get(
                                            "call_log_follow_up_s", FOLLOW_UP_WINDOW)))
            except LarError as exc:  # the log is telemetry: say so, and search anyway
                warnings.warn(f"lar: call log disabled: {exc}", RuntimeWarning, stacklevel=3)
        if trace is not None:
            self.record_trace(trace)

    def _close_recording(self) -> None:
        self.stop_trace()
        if self.call_log is not None:
            self.call_log.close()

    # -- public hooks -------------------------------------------------------------------------
    def record_trace(self, path: str | os.PathLike, session: str | None = None) -> TraceRecorder:
        """Record every call from now on as a JSON line in ``path`` (appends; replaces any
        trace being recorded). Returns the recorder; ``stop_trace()`` ends it."""
        self.stop_trace()
        self._trace = TraceRecorder(path, session=session or self.session)
        return self._trace

    def stop_trace(self) -> None:
        rec, self._trace = self._trace, None
        if rec is not None:
            rec.close()

    @property
    def trace(self) -> TraceRecorder | None:
        return self._trace

    def trace_source(self, name: str, session: str | None = None):
        """Context manager: calls inside are recorded with ``source=name`` ("api", "cli",
        "magic", "mcp") and, if given, ``session``. Context-variable based: thread and task safe."""
        return call_context(source=name, session=session)

    def record_call(self, call: str, params: Mapping[str, Any] | None = None,
                    returned_ids: Iterable[str] = (), runs: Iterable[Any] = (),
                    elapsed_ms: float = 0.0, error: str | None = None, *,
                    raw_text: str | Callable[[], str] | None = None,
                    view_text: str | Callable[[], str] | None = None,
                    raw_tokens: int | None = None, view_tokens: int | None = None,
                    source: str | None = None, session: str | None = None,
                    derived_only: Iterable[str] = ()) -> None:
        """Add one record to the trace and the call log (for components such as the tool-output
        cache's ``run_tool`` or the MCP server). ``raw_*``/``view_*``: the output before and
        after the two-stage filter, as text (or a callable giving it) or as token counts."""
        ctx = current_context()
        if not ctx.record:
            return
        if call not in CALLS:
            raise ConfigError(f"call {call!r} is not one of {', '.join(CALLS)}")
        if isinstance(elapsed_ms, bool) or not isinstance(elapsed_ms, (int, float)) or elapsed_ms < 0:
            raise ConfigError(f"elapsed_ms must be a number >= 0, got {elapsed_ms!r}")
        source = source or ctx.source
        session = session or ctx.session
        ids, runs = list(returned_ids), list(runs)
        if self._trace is not None:
            try:
                self._trace.record(call, params, ids, runs, elapsed_ms, error, source=source,
                                   session=session)
            except TraceError as exc:  # never lose a call's result to a full disk
                warnings.warn(f"lar: trace line not written: {exc}", RuntimeWarning, stacklevel=2)
        if self.call_log is not None:
            self.call_log.record(call, session=session or self.session, source=source,
                                 params=params, returned_ids=ids, raw_text=raw_text,
                                 view_text=view_text, raw_tokens=raw_tokens,
                                 view_tokens=view_tokens, elapsed_ms=elapsed_ms, error=error,
                                 derived_only=derived_only)

    # -- around each public call ----------------------------------------------------------------
    def _recording(self) -> bool:
        ctx = current_context()
        return ctx.record and not ctx.nested and (self._trace is not None or self.call_log is not None)

    def _recorded(self, call: str, params: dict[str, Any], fn: Callable[[], Any],
                  describe: Callable[[Any], tuple[list, list]] | None = None) -> Any:
        if not self._recording():
            return fn()
        t0 = time.perf_counter()
        with call_context(nested=True):
            try:
                out = fn()
            except Exception as exc:
                self._record_outcome(call, params, None, t0, exc, describe)
                raise
        self._record_outcome(call, params, out, t0, None, describe)
        return out

    async def _arecorded(self, call: str, params: dict[str, Any], fn: Callable[[], Any]) -> Any:
        if not self._recording():
            return await fn()
        t0 = time.perf_counter()
        with call_context(nested=True):
            try:
                out = await fn()
            except Exception as exc:
                self._record_outcome(call, params, None, t0, exc, None)
                raise
        self._record_outcome(call, params, out, t0, None, None)
        return out

    def _record_outcome(self, call, params, out, t0, exc, describe) -> None:
        elapsed_ms = (time.perf_counter() - t0) * 1000
        if exc is not None:
            self.record_call(call, params, (), (), elapsed_ms, error_text(exc))
            return
        ids, runs = (describe or (lambda o: describe_output(call, o)))(out)
        view, raw = self._texts(call, out)
        derived = ()
        if call == "search":
            origin = {n: getattr(layer, "origin", "text") for n, layer in self.layers.items()}
            derived = [h.id for h in out.hits if all(origin.get(s) == "derived" for s in h.signals)]
        self.record_call(call, params, ids, runs, elapsed_ms, None, view_text=view, raw_text=raw,
                         derived_only=derived)

    def _texts(self, call: str, out: Any):
        """(view, raw) as callables, evaluated in the call log's writer thread. For a search the
        view is the compact JSON (``Result.to_dict()``); raw is the one-stage answer: the full
        evidence JSON with the whole text of every hit's span. Other calls return all they
        produced, so raw is the view (None)."""
        if self.call_log is None:
            return None, None
        if call == "search":
            return out.to_json, lambda: self._one_stage_text(out)
        if call == "read":
            return (lambda: out), None
        if call == "inventory":
            return (lambda: json.dumps({"schema": 1, "units": [x.to_dict() for x in out]})), None
        return (lambda: json.dumps(out.to_dict() if hasattr(out, "to_dict") else out,
                                   ensure_ascii=False, default=str)), None

    def _one_stage_text(self, res) -> str:
        from lar.store.reader import decode_span

        doc = res.to_dict(full=True)
        for hit, d in zip(res.hits, doc["hits"]):
            try:
                data = self.reader.unit_text(hit.hash, hit.path)
                d["text"] = decode_span(data, hit.span.start, hit.span.end)
            except (LarError, OSError):
                pass  # the unit went away: the excerpt stands in for it
        return json.dumps(doc, ensure_ascii=False, default=str)
