"""Running a command (argv list, never a shell) or a Python callable, capturing its output."""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from lar.apps.toolcache.errors import ToolRunError, ToolTimeoutError


@dataclass(frozen=True)
class RawRun:
    stdout: bytes
    stderr: bytes
    returncode: int
    started: float  # epoch seconds
    elapsed: float
    truncated: bool = False

    def __post_init__(self) -> None:
        if self.elapsed < 0:
            raise ToolRunError(f"elapsed time must be >= 0, got {self.elapsed}")


def resolve_executable(name: str, env: Mapping[str, str]) -> str:
    """``name`` as given when it contains a slash, else looked up on the environment's PATH
    (``rg`` falls back to the ripgrep binary lar ships with)."""
    if "/" in name:
        return name
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    if name == "rg":
        from lar.store.rg import rg_path

        return rg_path()
    raise ToolRunError(f"command {name!r} was not found on PATH; install it or give its full path")


def _cap(data: bytes, max_bytes: int) -> tuple[bytes, bool]:
    return (data, False) if len(data) <= max_bytes else (data[:max_bytes], True)


def run_command(argv: Sequence[str], *, cwd: str, env: Mapping[str, str], input: bytes | None,
                timeout: float, max_bytes: int, executable: str | None = None) -> RawRun:
    """Run ``argv`` (no shell) in ``cwd``; stdin is ``input`` or empty. On timeout the whole
    process group is killed and ``ToolTimeoutError`` is raised."""
    exe = executable or resolve_executable(argv[0], env)
    started, t0 = time.time(), time.monotonic()
    try:
        proc = subprocess.Popen([exe, *argv[1:]], cwd=cwd, env=dict(env),
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        raise ToolRunError(f"cannot start {shlex.join(argv)!s}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.communicate()
        raise ToolTimeoutError(
            f"{shlex.join(argv)} did not finish within {timeout:g} s and was stopped; nothing was "
            "cached. Narrow the command (a path, a glob, a tighter pattern) or raise the timeout"
        ) from None
    elapsed = time.monotonic() - t0
    out, t1 = _cap(out, max_bytes)
    err, t2 = _cap(err, max_bytes)
    return RawRun(out, err, proc.returncode, started, elapsed, t1 or t2)


def run_callable(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
                 timeout: float | None, max_bytes: int) -> RawRun:
    """Call ``fn(*args, **kwargs)``; it must return ``str`` or ``bytes``. With a timeout the call
    runs in a daemon thread; one that overruns raises ``ToolTimeoutError`` (Python cannot stop
    the thread, so it finishes in the background and its result is dropped)."""
    started, t0 = time.time(), time.monotonic()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    if timeout is None:
        target()
    else:
        th = threading.Thread(target=target, name="lar-toolcache-call", daemon=True)
        th.start()
        th.join(timeout)
        if th.is_alive():
            raise ToolTimeoutError(f"{_name(fn)} did not return within {timeout:g} s; nothing was "
                                   "cached (the call keeps running in a background thread)")
    if "error" in box:
        raise box["error"]
    value = box.get("value")
    if isinstance(value, str):
        data = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise ToolRunError(f"{_name(fn)} returned {type(value).__name__}; a cached tool returns "
                           "str or bytes (serialise it, e.g. json.dumps(value, indent=1))")
    data, cut = _cap(data, max_bytes)
    return RawRun(data, b"", 0, started, time.monotonic() - t0, cut)


def _name(fn: Callable[..., Any]) -> str:
    return callable_name(fn)


def callable_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a callable (functools.partial: of the wrapped function)."""
    inner = getattr(fn, "func", fn)
    mod = getattr(inner, "__module__", None) or "?"
    qual = getattr(inner, "__qualname__", None) or type(inner).__qualname__
    return f"{mod}.{qual}"


def callable_identity(fn: Callable[..., Any]) -> str:
    """``module.qualname#digest``: the digest covers the function's bytecode and constants, so
    two lambdas (or two versions of a function) never share a cache key."""
    import hashlib

    code = getattr(getattr(fn, "func", fn), "__code__", None)
    if code is None:
        return callable_name(fn)
    h = hashlib.blake2b(code.co_code + repr(code.co_consts).encode("utf-8", "replace"),
                        digest_size=4).hexdigest()
    return f"{callable_name(fn)}#{h}"
