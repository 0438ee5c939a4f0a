"""``ToolCache``: run a command or callable once, keep its full output, hand back a view."""
from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lar.core.errors import ConfigError
from lar.apps.toolcache.errors import OutOfScopeError, ToolIdError, ToolNotAllowedError
from lar.apps.toolcache.ids import ToolFetched, parse_tool_id
from lar.apps.toolcache.runner import RawRun, callable_identity, run_callable, run_command
from lar.apps.toolcache.security import Guard
from lar.apps.toolcache.store import SHORT, RunStore, ToolRecord, input_digest, tool_key
from lar.apps.toolcache.view import ToolView, build_view, join_lines, select, split_lines

DEFAULT_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "GIT_DIR", "GIT_WORK_TREE",
                    "PYTHONPATH")
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def _positive(name: str, value: Any, *, integer: bool = False, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value <= 0:
        kind = "a positive integer" if integer else "a positive number of seconds"
        raise ConfigError(f"{name} must be {kind}, got {value!r}")
    return value


class ToolCache:
    """The two-stage tool-output cache.

    ``run(cmd)`` runs an argv list (never through a shell) or a Python callable, stores its full
    output under ``directory`` keyed by command, working directory, the values of ``env_keys``
    and the input's digest, and returns a ``ToolView``; running the same key again returns the
    stored output (``cached=True``, with its original time) unless ``refresh=True`` or it is
    older than ``max_age`` seconds. ``fetch(id)`` returns any output, item or line range in full.

    With ``root``, a guard applies (see ``lar.apps.toolcache.security``): only the
    ``allowed_commands`` (default ``DEFAULT_ALLOWED``) run, with every path argument inside the
    root, and only outputs that guard produced are viewed or fetched, with lines naming paths
    outside the root (or in the ``hidden`` folders, e.g. lar's state) withheld. Without
    ``root``, ``allowed_commands`` (if given) only limits ``argv[0]``.
    """

    def __init__(self, directory: str | os.PathLike, *, root: str | os.PathLike | None = None,
                 allowed_commands: Sequence[str] | None = None,
                 env_keys: Sequence[str] = DEFAULT_ENV_KEYS, max_line: int = 160,
                 view_lines: int = 40, item_lines: int = 6, max_bytes: int = DEFAULT_MAX_BYTES,
                 hidden: Sequence[str | os.PathLike] = ()):
        self.store = RunStore(directory)
        self.directory = self.store.directory
        if isinstance(env_keys, str) or not all(isinstance(k, str) and k for k in env_keys):
            raise ConfigError(f"env_keys must be a sequence of variable names, got {env_keys!r}")
        self.env_keys = tuple(env_keys)
        self.max_line = _positive("max_line", max_line, integer=True)
        self.view_lines = _positive("view_lines", view_lines, integer=True)
        self.item_lines = _positive("item_lines", item_lines, integer=True)
        self.max_bytes = _positive("max_bytes", max_bytes, integer=True)
        if allowed_commands is not None and (
                isinstance(allowed_commands, str) or not all(isinstance(c, str) for c in allowed_commands)):
            raise ConfigError("allowed_commands must be a list of command names, e.g. ['rg', 'ls']")
        self.guard = None
        if root:
            (self.directory / "home").mkdir(exist_ok=True)  # an empty HOME for guarded commands
            self.guard = Guard(root, allowed_commands, home=self.directory / "home", hidden=hidden)
        self.allowed = self.guard.allowed if self.guard else (
            None if allowed_commands is None else tuple(allowed_commands))

    def __repr__(self) -> str:
        return f"<ToolCache {str(self.directory)!r} root={self.root!r}>"

    @property
    def root(self) -> str | None:
        return str(self.guard.root) if self.guard else None

    @property
    def corpus_dir(self) -> Path:
        """The folder of output texts (``t<key12>.txt``): open it with ``lar.open`` to search."""
        return self.store.outputs_dir

    def engine(self, **kw: Any):
        """A lar engine over the cached outputs, with its state in ``<directory>/index``."""
        import lar

        return lar.open(self.corpus_dir, kw.pop("state", self.directory / "index"), **kw)

    # -- running ----------------------------------------------------------------------------
    def run(self, cmd: Sequence[str] | Callable[..., str | bytes], *,
            cwd: str | os.PathLike | None = None, input: bytes | str | None = None,  # noqa: A002
            timeout: float | None = 60.0, refresh: bool = False, max_age: float | None = None,
            args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
            env: Mapping[str, str] | None = None) -> ToolView:
        """Run ``cmd`` (or return its cached output) and return the view."""
        timeout = _positive("timeout", timeout, allow_none=True)
        max_age = _positive("max_age", max_age, allow_none=True)
        data = input.encode("utf-8") if isinstance(input, str) else input
        if data is not None and not isinstance(data, bytes):
            raise ConfigError(f"input must be bytes, str or None, got {type(input).__name__}")
        if callable(cmd):
            if data is not None or env is not None or cwd is not None:
                raise ConfigError("input, env and cwd are for commands; pass a callable's inputs "
                                  "as args/kwargs")
            rec, raw = self._run_callable(cmd, args, kwargs or {}, timeout, refresh, max_age)
        else:
            if args or kwargs:
                raise ConfigError("args/kwargs are for callables; put a command's arguments in "
                                  "its argv list")
            rec, raw = self._run_command(cmd, cwd, data, timeout, refresh, max_age, env)
        return self._view(rec, cached=raw is None)

    def _cached(self, key: str, refresh: bool, max_age: float | None) -> ToolRecord | None:
        if refresh:
            return None
        rec = self.store.load(key)
        if rec is not None and max_age is not None and time.time() - rec.started > max_age:
            return None
        return rec

    def _run_command(self, argv, cwd, data, timeout, refresh, max_age, env):
        if self.guard is not None:
            if env is not None:
                raise ConfigError("a ToolCache with a root runs commands in its own fixed "
                                  "environment; env= is not accepted")
            prep = self.guard.prepare(argv, cwd)
            run_argv, where, run_env, exe = prep.argv, prep.cwd, dict(prep.env), prep.executable
            scope = str(self.guard.root)
            request = tuple(argv) if tuple(argv) != run_argv else None
        else:
            if isinstance(argv, str) or not isinstance(argv, (list, tuple)) or not argv \
                    or not all(isinstance(a, str) for a in argv):
                raise ConfigError("a command is a non-empty list of strings such as "
                                  "['rg', '-n', 'TODO', 'src'] (it never runs through a shell)")
            if self.allowed is not None and os.path.basename(argv[0]) not in self.allowed:
                raise ToolNotAllowedError(f"command {argv[0]!r} is not on the allow-list: "
                                          f"{', '.join(self.allowed)}")
            where = str(Path(cwd if cwd is not None else os.getcwd()).expanduser().resolve())
            if not os.path.isdir(where):
                raise ConfigError(f"cwd {str(cwd)!r} is not a folder")
            run_argv, run_env = tuple(argv), dict(os.environ if env is None else env)
            exe = scope = request = None
        env_vals = {k: run_env[k] for k in self.env_keys if k in run_env}
        key = tool_key("command", run_argv, where, env_vals, input_digest(data))
        rec = self._cached(key, refresh, max_age)
        if rec is not None:
            return rec, None
        raw = run_command(run_argv, cwd=where, env=run_env, input=data, timeout=timeout,
                          max_bytes=self.max_bytes, executable=exe)
        return self._save(key, "command", run_argv, where, env_vals, data, raw, scope, request), raw

    def _run_callable(self, fn, args, kwargs, timeout, refresh, max_age):
        if self.guard is not None:
            raise ToolNotAllowedError("a ToolCache with a root runs only allow-listed commands; "
                                      "use a ToolCache without root for Python callables")
        if isinstance(fn, functools.partial):
            args, kwargs, fn = (*fn.args, *args), {**fn.keywords, **kwargs}, fn.func
        command = (callable_identity(fn), *map(repr, args),
                   *(f"{k}={v!r}" for k, v in sorted(kwargs.items())))
        env_vals = {k: os.environ[k] for k in self.env_keys if k in os.environ}
        where = str(Path.cwd().resolve())
        key = tool_key("callable", command, where, env_vals, None)
        rec = self._cached(key, refresh, max_age)
        if rec is not None:
            return rec, None
        raw = run_callable(fn, args, kwargs, timeout, self.max_bytes)
        return self._save(key, "callable", command, where, env_vals, None, raw, None), raw

    def _save(self, key, kind, command, cwd, env_vals, data, raw: RawRun, scope,
              request=None) -> ToolRecord:
        rec = ToolRecord(key=key, kind=kind, command=tuple(command), cwd=cwd, env=env_vals,
                         input_hash=input_digest(data), returncode=raw.returncode,
                         started=raw.started, elapsed=raw.elapsed, stdout_bytes=len(raw.stdout),
                         stderr_bytes=len(raw.stderr), truncated=raw.truncated, scope=scope,
                         request=request)
        self.store.save(rec, raw.stdout, raw.stderr)
        return rec

    # -- reading ----------------------------------------------------------------------------
    def record(self, tool_id: str) -> ToolRecord:
        """The record of an output (any id of it, or a key prefix)."""
        prefix = parse_tool_id(tool_id).prefix if tool_id.startswith("t") else tool_id
        rec = self.store.load(self.store.resolve(prefix))
        if rec is None:  # pragma: no cover - resolve() found the file a moment ago
            raise ToolIdError(f"tool output {prefix} vanished; run the command again")
        return rec

    def records(self) -> list[ToolRecord]:
        """Every cached output's record (served ones only when a root is set)."""
        recs = self.store.records()
        if self.guard is None:
            return recs
        out = []
        for r in recs:
            try:
                self.guard.check_record(r)
            except (OutOfScopeError, ToolNotAllowedError):
                continue
            out.append(r)
        return out

    def _lines(self, rec: ToolRecord) -> tuple[str, list[str], list[str], bool, int]:
        """(raw text, lines for grouping, lines to show, final newline, withheld count)."""
        text = self.store.text(rec.key)
        lines, final = split_lines(text)
        if self.guard is None:
            return text, lines, lines, final, 0
        cwd = self.guard.check_record(rec)
        bad = self.guard.withheld(lines, cwd)
        shown = [bad.get(i, x) for i, x in enumerate(lines)]
        return text, lines, shown, final, len(bad)

    def _cwd_display(self, rec: ToolRecord) -> str:
        if rec.kind == "callable":
            return "."  # a callable's folder is part of its key, but says nothing to the reader
        if self.guard is not None:
            return self.guard._rel(Path(rec.cwd))
        return rec.cwd

    def _view(self, rec: ToolRecord, cached: bool) -> ToolView:
        text, lines, shown, _, withheld = self._lines(rec)
        return build_view(out_id=rec.id, lines=lines, shown_lines=shown, command=rec.display,
                          cwd=self._cwd_display(rec), returncode=rec.returncode, cached=cached,
                          time=rec.time_iso, elapsed=rec.elapsed, raw_text=text,
                          max_line=self.max_line, view_lines=self.view_lines,
                          item_lines=self.item_lines, withheld=withheld)

    def view(self, tool_id: str) -> ToolView:
        """The view of a cached output again (``cached=True``)."""
        return self._view(self.record(tool_id), cached=True)

    def fetch(self, tool_id: str) -> ToolFetched:
        """The full text of an output (``t<key12>``), items (``:n``, ``:a-b``) or lines
        (``:L<a>-<b>``), whether the view showed them or not."""
        tid = parse_tool_id(tool_id)
        rec = self.record("t" + tid.prefix)
        _, lines, shown, final, _ = self._lines(rec)
        a, b, items = select(tid, lines)
        withheld = sum(1 for i in range(a, b) if shown[i] is not lines[i])
        return ToolFetched(id=tool_id.strip(), output=rec.id, command=rec.display,
                           lines=(a + 1, b) if b > a else (0, 0), items=items,
                           text=join_lines(shown, a, b, final), total_lines=len(lines),
                           withheld=withheld)

    def text(self, tool_id: str) -> str:
        """The whole output as text (``fetch(tool_id).text`` of the output id)."""
        return self.fetch("t" + parse_tool_id(tool_id).prefix).text

    def id_for_path(self, path: str) -> str | None:
        """The output id behind a path of the outputs corpus (``t<key12>.txt``), or None."""
        name = Path(path).name
        if name.startswith("t") and name.endswith(".txt") and len(name) == SHORT + 5:
            return name[:-4]
        return None
