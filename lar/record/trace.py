"""Call traces: record every call as one JSON line, load a trace, replay it against an engine.

``eng.record_trace("calls.jsonl")`` (or ``lar.open(root, trace=...)``, or ``lar search --trace``)
appends one line per call: its parameters, the ids it returned, what each layer did and how long
it took (schema in docs/traces.md). ``replay(trace, eng, layers=..., timebox=...)`` runs the
read-only calls again against the current engine and reports, per call, which ids were added,
removed or moved, the Jaccard overlap and the layer states before and after.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from lar.core.errors import ConfigError, LarError

TRACE_SCHEMA = 1
SOURCES = ("api", "cli", "magic", "mcp")
CALLS = ("search", "fetch", "build", "status", "inventory", "read", "run_tool")
READ_ONLY = ("search", "fetch", "status", "inventory", "read")
_FIELDS = ("seq", "t", "session", "source", "call", "params", "returned_ids", "runs",
           "elapsed_ms", "error")


class TraceError(LarError):
    """A trace file could not be written or read (names the file and line)."""


# -- who is calling: source and session, carried in a context variable ------------------------
@dataclass(frozen=True)
class CallContext:
    source: str = "api"
    session: str | None = None
    record: bool = True   # False while replaying: replays are not recorded or logged
    nested: bool = False  # True inside a recorded call: inner public calls are not recorded


_CTX: contextvars.ContextVar[CallContext] = contextvars.ContextVar("lar_call_context",
                                                                   default=CallContext())


def current_context() -> CallContext:
    return _CTX.get()


@contextlib.contextmanager
def call_context(source: str | None = None, session: str | None = None,
                 record: bool | None = None, nested: bool | None = None):
    """Set the ``source`` (and optionally ``session``) recorded for calls made inside."""
    cur = _CTX.get()
    if source is not None and source not in SOURCES:
        raise ConfigError(f"trace source {source!r} is not one of {', '.join(SOURCES)}")
    if session is not None and (not isinstance(session, str) or not session):
        raise ConfigError(f"a session name is a non-empty string, got {session!r}")
    new = CallContext(source or cur.source, session or cur.session,
                      cur.record if record is None else record,
                      cur.nested if nested is None else nested)
    token = _CTX.set(new)
    try:
        yield new
    finally:
        _CTX.reset(token)


def new_session_id() -> str:
    return uuid.uuid4().hex[:12]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def jsonable(value: Any) -> Any:
    """Parameters as plain JSON: scopes as their dict, tuples and sets as lists, paths as str."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(jsonable(v) for v in value)
    if hasattr(value, "to_dict"):
        return jsonable(value.to_dict())
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_dict(run: Any) -> dict[str, Any]:
    """A layer run (``LayerRun`` or a mapping) in the trace's form."""
    d = run.to_dict() if hasattr(run, "to_dict") else dict(run)
    if "name" not in d:
        raise ConfigError(f"a layer run needs a 'name', got {d!r}")
    return jsonable(d)


# -- recording ---------------------------------------------------------------------------------
class TraceRecorder:
    """Append-only JSONL trace: one line per call, written and flushed under a lock.

    Appending to an existing trace continues its sequence numbers. ``fsync=True`` also forces
    each line to disk (slower; the default flushes to the OS, which survives a crash of Python).
    """

    def __init__(self, path: str | os.PathLike, *, session: str | None = None, fsync: bool = False):
        self.path = Path(path).expanduser()
        if self.path.is_dir():
            raise TraceError(f"trace path {str(self.path)!r} is a folder; give a file name such as "
                             "'trace.jsonl'")
        self.session = session or new_session_id()
        self.fsync = bool(fsync)
        self._lock = threading.Lock()
        self._seq = self._last_seq() + 1
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise TraceError(f"cannot write the trace {str(self.path)!r}: {exc}") from None

    def _last_seq(self) -> int:
        """The last sequence number in an existing trace (-1 for a new or empty file)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                for start in (max(0, size - (1 << 16)), 0):  # the tail first, the whole file if needed
                    fh.seek(start)
                    lines = [ln for ln in fh.read().splitlines() if ln.strip()]
                    if not lines:
                        return -1
                    try:
                        return int(json.loads(lines[-1])["seq"])
                    except (ValueError, KeyError, TypeError):
                        if start == 0:
                            break
        except FileNotFoundError:
            return -1
        except OSError as exc:
            raise TraceError(f"cannot read the trace {str(self.path)!r}: {exc}") from None
        raise TraceError(f"{str(self.path)!r} exists and its last line is not a lar trace record; "
                         "choose another file or move this one away")

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def record(self, call: str, params: Mapping[str, Any] | None = None,
               returned_ids: Iterable[str] = (), runs: Iterable[Any] = (), elapsed_ms: float = 0.0,
               error: str | None = None, *, source: str | None = None,
               session: str | None = None) -> dict[str, Any]:
        """Append one record and return it (as written)."""
        ctx = current_context()
        source = source or ctx.source
        if call not in CALLS:
            raise ConfigError(f"call {call!r} is not one of {', '.join(CALLS)}")
        if source not in SOURCES:
            raise ConfigError(f"source {source!r} is not one of {', '.join(SOURCES)}")
        rec = {"schema": TRACE_SCHEMA, "seq": 0, "t": utc_now(),
               "session": session or ctx.session or self.session, "source": source, "call": call,
               "params": jsonable(dict(params or {})), "returned_ids": [str(i) for i in returned_ids],
               "runs": [run_dict(r) for r in runs], "elapsed_ms": round(float(elapsed_ms), 3),
               "error": None if error is None else str(error)}
        with self._lock:
            if self._fh.closed:
                raise TraceError(f"the trace {str(self.path)!r} is closed; start a new one")
            rec["seq"] = self._seq
            line = json.dumps(rec, ensure_ascii=False, default=str)
            try:
                self._fh.write(line + "\n")
                self._fh.flush()
                if self.fsync:
                    os.fsync(self._fh.fileno())
            except OSError as exc:
                raise TraceError(f"cannot append to the trace {str(self.path)!r}: {exc}") from None
            self._seq += 1
        return rec

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> "TraceRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<lar.TraceRecorder {str(self.path)!r} session={self.session!r} next_seq={self._seq}>"


# -- loading ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TraceStep:
    seq: int
    t: str
    session: str
    source: str
    call: str
    params: Mapping[str, Any]
    returned_ids: tuple[str, ...]
    runs: tuple[Mapping[str, Any], ...]
    elapsed_ms: float
    error: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 0:
            raise ConfigError(f"TraceStep.seq must be an integer >= 0, got {self.seq!r}")
        if self.call not in CALLS:
            raise ConfigError(f"TraceStep.call {self.call!r} is not one of {', '.join(CALLS)}")
        if self.source not in SOURCES:
            raise ConfigError(f"TraceStep.source {self.source!r} is not one of {', '.join(SOURCES)}")
        if not isinstance(self.params, Mapping):
            raise ConfigError("TraceStep.params must be a mapping")
        if not isinstance(self.elapsed_ms, (int, float)) or self.elapsed_ms < 0:
            raise ConfigError(f"TraceStep.elapsed_ms must be a number >= 0, got {self.elapsed_ms!r}")
        if self.error is not None and not isinstance(self.error, str):
            raise ConfigError("TraceStep.error must be a string or None")
        runs = tuple(MappingProxyType(dict(r)) for r in self.runs)
        if any("name" not in r for r in runs):
            raise ConfigError("every run of a TraceStep needs a 'name'")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "returned_ids", tuple(str(i) for i in self.returned_ids))
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "elapsed_ms", float(self.elapsed_ms))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TraceStep":
        if d.get("schema") != TRACE_SCHEMA:
            raise ConfigError(f"schema {d.get('schema')!r} is not {TRACE_SCHEMA}")
        missing = [f for f in _FIELDS if f not in d]
        if missing:
            raise ConfigError(f"missing fields {', '.join(missing)}")
        return cls(**{f: d[f] for f in _FIELDS})

    def to_dict(self) -> dict[str, Any]:
        return {"schema": TRACE_SCHEMA, "seq": self.seq, "t": self.t, "session": self.session,
                "source": self.source, "call": self.call, "params": jsonable(self.params),
                "returned_ids": list(self.returned_ids), "runs": [dict(r) for r in self.runs],
                "elapsed_ms": self.elapsed_ms, "error": self.error}

    @property
    def states(self) -> dict[str, str]:
        return {r["name"]: str(r.get("state", "")) for r in self.runs}


@dataclass(frozen=True)
class Trace:
    path: str
    steps: tuple[TraceStep, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def to_polars(self):
        from lar.core.errors import require

        pl = require("polars", "notebook")
        return pl.DataFrame([{"seq": s.seq, "t": s.t, "session": s.session, "source": s.source,
                              "call": s.call, "params": json.dumps(jsonable(s.params)),
                              "returned": len(s.returned_ids), "elapsed_ms": s.elapsed_ms,
                              "error": s.error} for s in self.steps])


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a JSONL trace; a malformed line raises ``TraceError`` naming the file and line."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"no trace file at {str(p)!r}; record one with eng.record_trace(path) "
                         "or lar search --trace PATH") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read the trace {str(p)!r}: {exc}") from None
    steps = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{p}:{n}: not a JSON line ({exc.msg}); a trace has one JSON "
                             "object per line") from None
        if not isinstance(d, dict):
            raise TraceError(f"{p}:{n}: a trace line is a JSON object, got {type(d).__name__}")
        try:
            steps.append(TraceStep.from_dict(d))
        except (ConfigError, TypeError) as exc:
            raise TraceError(f"{p}:{n}: not a lar trace record: {exc}") from None
    return Trace(str(p), tuple(steps))


__all__ = ["CALLS", "READ_ONLY", "SOURCES", "CallContext", "Trace", "TraceError", "TraceRecorder",
           "TraceStep", "call_context", "current_context", "load_trace"]
