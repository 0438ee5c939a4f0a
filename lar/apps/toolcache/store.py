"""Keying and persistence of cached tool outputs.

Layout under the cache directory (every file is written atomically: temp file + rename; the
``.json`` record is written last, so a record that exists is complete):

``runs/<key>.json``     the record (command, cwd, environment values, input hash, exit code,
                        start time, elapsed seconds, sizes)
``runs/<key>.stdout``   the raw bytes the command wrote to stdout (``.stderr`` likewise)
``outputs/t<key12>.txt`` the output as text (see ``combine``): what views, fetches and the
                        search layers read. ``lar.open(<dir>/outputs)`` indexes it like any folder.

The key is a BLAKE2b digest (16 bytes, 32 hex digits) of the command (argv, or a callable's
qualified name with the ``repr`` of its arguments), the resolved working directory, the values
of the environment variables named in ``env_keys`` and a digest of the input bytes.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from lar.core.errors import CorruptStateError
from lar.store.cas import atomic_write
from lar.apps.toolcache.errors import ToolIdError

KEY_HEX = 32
SHORT = 12
STDERR_MARK = "[stderr]"
_KEY_RE = re.compile(r"^[0-9a-f]{32}$")
KINDS = ("command", "callable")


def tool_key(kind: str, command: tuple[str, ...], cwd: str, env: Mapping[str, str],
             input_hash: str | None) -> str:
    """The cache key of one invocation (32 hex digits)."""
    payload = json.dumps({"v": 1, "kind": kind, "command": list(command), "cwd": cwd,
                          "env": sorted(env.items()), "input": input_hash},
                         separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=KEY_HEX // 2).hexdigest()


def input_digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.blake2b(data, digest_size=16).hexdigest()


def combine(stdout: bytes, stderr: bytes) -> str:
    """The output as text: stdout, then (when stderr is not empty) a line ``[stderr]`` and
    stderr. Bytes are decoded as UTF-8 (invalid bytes become U+FFFD), CRLF becomes LF."""
    out = stdout.decode("utf-8", errors="replace").replace("\r\n", "\n")
    err = stderr.decode("utf-8", errors="replace").replace("\r\n", "\n")
    if not err:
        return out
    if out and not out.endswith("\n"):
        out += "\n"
    return out + STDERR_MARK + "\n" + err


@dataclass(frozen=True)
class ToolRecord:
    """What was run, where, and what came of it. ``scope`` is the root the allow-list guard
    checked the command against (``None``: run without a guard, by the Python API or
    ``lar run``); ``command`` is the argv as run, ``request`` the caller's argv when the guard
    added options to it (git's safety options, grep's ``--exclude-dir``)."""

    key: str
    kind: str
    command: tuple[str, ...]
    cwd: str
    env: Mapping[str, str] = field(default_factory=dict)
    input_hash: str | None = None
    returncode: int = 0
    started: float = 0.0
    elapsed: float = 0.0
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    truncated: bool = False
    scope: str | None = None
    request: tuple[str, ...] | None = None  # the caller's argv, when the guard added options

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not _KEY_RE.match(self.key):
            raise CorruptStateError(f"tool record key {self.key!r} is not {KEY_HEX} hex digits")
        if self.kind not in KINDS:
            raise CorruptStateError(f"tool record kind {self.kind!r}; expected one of {KINDS}")
        cmd = tuple(self.command)
        if not cmd or not all(isinstance(c, str) for c in cmd):
            raise CorruptStateError(f"tool record {self.key}: command must be non-empty strings")
        object.__setattr__(self, "command", cmd)
        if self.request is not None:
            object.__setattr__(self, "request", tuple(self.request))
        object.__setattr__(self, "env", dict(self.env))
        if self.elapsed < 0 or self.stdout_bytes < 0 or self.stderr_bytes < 0:
            raise CorruptStateError(f"tool record {self.key}: negative elapsed time or size")

    @property
    def short(self) -> str:
        return self.key[:SHORT]

    @property
    def id(self) -> str:
        """The output's id: ``t`` + the first 12 hex digits of the key."""
        return "t" + self.short

    @property
    def display(self) -> str:
        if self.kind == "callable":
            return f"{self.command[0].split('#')[0]}({', '.join(self.command[1:])})"
        return shlex.join(self.request or self.command)

    @property
    def time_iso(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["command"] = list(self.command)
        d["request"] = None if self.request is None else list(self.request)
        d["env"] = dict(self.env)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ToolRecord":
        try:
            return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
        except TypeError as exc:
            raise CorruptStateError(f"tool record is malformed: {exc}") from None


class RunStore:
    """The on-disk store of records and outputs (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser().resolve()
        self.runs_dir = self.directory / "runs"
        self.outputs_dir = self.directory / "outputs"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.outputs_dir.mkdir(parents=True, exist_ok=True)

    def output_path(self, key: str) -> Path:
        return self.outputs_dir / f"t{key[:SHORT]}.txt"

    def save(self, record: ToolRecord, stdout: bytes, stderr: bytes) -> str:
        """Write the raw streams, the text and then the record; returns the text."""
        text = combine(stdout, stderr)
        # a cache: atomic (no reader sees half a file) but not fsynced, the record last
        atomic_write(self.runs_dir / f"{record.key}.stdout", stdout, durable=False)
        atomic_write(self.runs_dir / f"{record.key}.stderr", stderr, durable=False)
        atomic_write(self.output_path(record.key), text.encode("utf-8"), durable=False)
        atomic_write(self.runs_dir / f"{record.key}.json",
                     json.dumps(record.to_dict(), ensure_ascii=False, indent=1).encode("utf-8"),
                     durable=False)
        return text

    def load(self, key: str) -> ToolRecord | None:
        path = self.runs_dir / f"{key}.json"
        try:
            raw = path.read_text("utf-8")
        except FileNotFoundError:
            return None
        try:
            return ToolRecord.from_dict(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise CorruptStateError(f"{path} is not valid JSON ({exc}); delete it to rerun") from None

    def resolve(self, prefix: str) -> str:
        """The full key for a key prefix (at least 6 hex digits)."""
        if not re.fullmatch(r"[0-9a-f]{6,32}", prefix):
            raise ToolIdError(f"{prefix!r} is not a tool output key; give 6 to 32 hex digits")
        found = sorted(p.stem for p in self.runs_dir.glob(f"{prefix}*.json"))
        if not found:
            raise ToolIdError(f"no cached tool output has a key starting with {prefix!r}; "
                              "run the command first (its view gives the id)")
        if len(found) > 1:
            raise ToolIdError(f"key prefix {prefix!r} is ambiguous ({len(found)} outputs); "
                              "give more digits")
        return found[0]

    def text(self, key: str) -> str:
        try:
            return self.output_path(key).read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolIdError(f"the text of tool output {key[:SHORT]} is missing; rerun the "
                              "command with refresh=True") from None

    def raw(self, key: str, stream: str = "stdout") -> bytes:
        if stream not in ("stdout", "stderr"):
            raise ToolIdError(f"stream must be 'stdout' or 'stderr', got {stream!r}")
        try:
            return (self.runs_dir / f"{key}.{stream}").read_bytes()
        except FileNotFoundError:
            raise ToolIdError(f"the {stream} of tool output {key[:SHORT]} is missing") from None

    def keys(self) -> Iterator[str]:
        for p in sorted(self.runs_dir.glob("*.json")):
            if _KEY_RE.match(p.stem):
                yield p.stem

    def records(self) -> list[ToolRecord]:
        out = []
        for k in self.keys():
            rec = self.load(k)
            if rec is not None:
                out.append(rec)
        return out
