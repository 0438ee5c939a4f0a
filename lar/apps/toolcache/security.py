"""The guard of a rooted tool cache (the MCP server's): which commands run, with which
arguments, and which cached lines are served.

Running. A command is an argv list, never a shell line: nothing the caller sends is expanded.
``argv[0]`` must be a bare name on the allow-list (``DEFAULT_ALLOWED`` unless configured); it is
looked up on PATH (absolute PATH entries only; ``rg`` falls back to the ripgrep lar ships).
The working directory must resolve inside the root. Every argument that is not an option, and
the value of every ``--option=value``, is checked as a path: joined to the working directory it
must stay inside the root lexically (no ``..`` escape, no absolute path outside) and after
resolving symlinks. Options that run other programs, write files, or follow symlinks out of the
tree are refused per command (``REFUSED``). ``git`` runs only the subcommands in
``GIT_SUBCOMMANDS`` given directly after ``git``; arguments containing ``:`` (``rev:path``,
pathspec magic such as ``:/``) are refused; it runs with ``--no-pager``, fsmonitor, external diff
and textconv disabled, no system or global config, and ``--relative`` for diff, log and show.
Commands get a small fixed environment (PATH, a UTF-8 C locale, git variables) and an empty
stdin.

Serving. A cached output is served only when its record says the guard of this same root ran
it, its working directory still resolves inside the root, and its path arguments still do (a
symlink swapped since is caught). Within a served output a line is withheld (replaced by a
notice; line numbers stay) when its file prefix (``PATH:N:``, ``PATH-N-``, ``PATH:``) or the
whole line as a path resolves outside the root, when it lies in a ``diff --git`` section whose
paths resolve outside the root, or when it holds a path token with ``..`` components that
resolves outside the root. lar's own state folder (when it lies inside the root) is out of
scope too: arguments may not name it, ``grep`` gets ``--exclude-dir`` for it, and lines naming
paths in it are replaced by one notice (so a run of them collapses into one line).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from lar.apps.toolcache.errors import OutOfScopeError, ToolNotAllowedError
from lar.apps.toolcache.store import ToolRecord
from lar.apps.toolcache.view import bare_path, file_prefix

DEFAULT_ALLOWED = ("rg", "grep", "ls", "cat", "head", "tail", "wc", "find", "git")
GIT_SUBCOMMANDS = ("log", "show", "diff", "status", "grep", "blame", "ls-files")
MAX_ARGS, MAX_ARG_CHARS = 256, 4096

# options refused per command: they run programs, write files, or follow symlinks
REFUSED: dict[str, frozenset[str]] = {
    "rg": frozenset({"--pre", "--pre-glob", "-z", "--search-zip", "-L", "--follow",
                     "--hostname-bin"}),
    "grep": frozenset({"-R", "--dereference-recursive"}),
    "tail": frozenset({"-f", "-F", "--follow", "--retry"}),
    "find": frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                       "-fprintf", "-fls", "-L", "-follow"}),
    "git": frozenset({"--output", "--ext-diff", "--textconv", "--no-index", "-O",
                      "--open-files-in-pager", "--exec", "--upload-pack", "--no-relative", "-L"}),
}
# commands whose single-letter options may be clustered (-rnL): each letter is checked
CLUSTERED = frozenset({"rg", "grep", "ls", "cat", "head", "tail", "wc", "git"})
_GIT_PREFIX = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
               "-c", "diff.external=", "-c", "color.ui=false")
_GIT_DIFFING = ("--no-ext-diff", "--no-textconv", "--relative")
_DIFF_HEAD = re.compile(r"^diff --git (\S+) (\S+)")
_TOKEN_SPLIT = re.compile(r"[\s'\"=(),<>\[\]{}]+")


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


@dataclass(frozen=True)
class Prepared:
    """A checked command: what to run, where, with which environment."""

    argv: tuple[str, ...]  # as recorded (argv[0] is the bare name)
    executable: str
    cwd: str
    env: Mapping[str, str]


class Guard:
    def __init__(self, root: str | os.PathLike, allowed: Iterable[str] | None = None,
                 home: str | os.PathLike | None = None, hidden: Iterable[str | os.PathLike] = ()):
        self.root = Path(root).expanduser().resolve()
        # folders inside the root that are not part of the scope (lar's state folder)
        self.hidden = tuple(p for p in (Path(h).expanduser().resolve() for h in hidden)
                            if p != self.root and inside(p, self.root))
        names = tuple(DEFAULT_ALLOWED if allowed is None else allowed)
        for n in names:
            if not isinstance(n, str) or not n or "/" in n or n.strip() != n:
                raise ToolNotAllowedError(f"allow-list entry {n!r} must be a bare command name "
                                          "such as 'rg' (no path, no spaces)")
        self.allowed = tuple(dict.fromkeys(names))
        self.home = str(home) if home else os.devnull

    # -- paths ------------------------------------------------------------------------------
    def in_scope(self, p: Path) -> bool:
        return inside(p, self.root) and not any(inside(p, h) for h in self.hidden)

    def _rel(self, p: Path) -> str:
        return "." if p == self.root else p.relative_to(self.root).as_posix()

    def resolve_cwd(self, cwd: str | os.PathLike | None) -> Path:
        raw = "." if cwd is None else os.fspath(cwd)
        if "\x00" in raw:
            raise ToolNotAllowedError("cwd contains a NUL byte")
        full = Path(raw) if os.path.isabs(raw) else self.root / raw
        lexical = Path(os.path.normpath(full))
        real = Path(os.path.realpath(full))
        if not self.in_scope(lexical) or not self.in_scope(real):
            raise ToolNotAllowedError(f"cwd {raw!r} is outside the root {str(self.root)!r}; give a "
                                      "folder inside it (relative paths are taken from the root)")
        if not real.is_dir():
            raise ToolNotAllowedError(f"cwd {raw!r} is not a folder inside the root")
        return real

    def check_path(self, arg: str, cwd: Path, what: str = "argument") -> None:
        if not arg:
            return
        full = Path(arg) if os.path.isabs(arg) else cwd / arg
        lexical = Path(os.path.normpath(full))
        if not inside(lexical, self.root):
            raise ToolNotAllowedError(f"{what} {arg!r} names a path outside the root "
                                      f"{str(self.root)!r} ('..' or an absolute path); only paths "
                                      "inside the root may be used")
        try:
            real = Path(os.path.realpath(full))
        except (OSError, ValueError):
            real = full
        if not inside(real, self.root):
            raise ToolNotAllowedError(f"{what} {arg!r} passes through a symlink that leaves the "
                                      f"root {str(self.root)!r}; it is not followed")
        if not self.in_scope(lexical) or not self.in_scope(real):
            raise ToolNotAllowedError(f"{what} {arg!r} is inside lar's state folder, which is not "
                                      "part of the searchable scope")

    # -- commands ---------------------------------------------------------------------------
    def prepare(self, argv: Sequence[str], cwd: str | os.PathLike | None) -> Prepared:
        if isinstance(argv, str) or not isinstance(argv, (list, tuple)) or not argv:
            raise ToolNotAllowedError("command must be a non-empty list of strings such as "
                                      "['rg', '-n', 'pattern', 'src']; no shell line is run")
        if len(argv) > MAX_ARGS:
            raise ToolNotAllowedError(f"command has {len(argv)} arguments; at most {MAX_ARGS}")
        for a in argv:
            if not isinstance(a, str):
                raise ToolNotAllowedError(f"command arguments must be strings, got {a!r}")
            if "\x00" in a or len(a) > MAX_ARG_CHARS:
                raise ToolNotAllowedError(f"argument {a[:40]!r}… has a NUL byte or more than "
                                          f"{MAX_ARG_CHARS} characters")
        name = argv[0]
        if name not in self.allowed:
            raise ToolNotAllowedError(f"command {name!r} is not on the allow-list; allowed: "
                                      f"{', '.join(self.allowed)} (give the bare name as argv[0])")
        where = self.resolve_cwd(cwd)
        args = list(argv[1:])
        run_args = self._check_args(name, args, where)
        from lar.apps.toolcache.runner import resolve_executable

        env = self.environment()
        return Prepared(tuple([name, *run_args]), resolve_executable(name, env), str(where), env)

    def _check_args(self, name: str, args: list[str], cwd: Path) -> list[str]:
        refused = REFUSED.get(name, frozenset())
        if name == "git":
            if not args or args[0] not in GIT_SUBCOMMANDS:
                raise ToolNotAllowedError(f"git runs only these subcommands, given directly after "
                                          f"'git': {', '.join(GIT_SUBCOMMANDS)}")
        options_end = False
        for i, a in enumerate(args):
            if name == "git" and i == 0:
                continue
            if a == "--" and not options_end:
                options_end = True
                continue
            if a.startswith("-") and len(a) > 1 and not options_end:
                opt, eq, value = a.partition("=")
                if opt in refused or a in refused or (name in CLUSTERED and a[:2] in refused):
                    raise ToolNotAllowedError(f"option {opt!r} of {name} is refused (it can run "
                                              "programs, write files or leave the root)")
                if name in CLUSTERED and re.fullmatch(r"-[A-Za-z0-9]{2,}", a):
                    bad = [f"-{c}" for c in a[1:] if f"-{c}" in refused]
                    if bad:
                        raise ToolNotAllowedError(f"option {bad[0]!r} (in {a!r}) of {name} is "
                                                  "refused (it can run programs or leave the root)")
                if eq:
                    self.check_path(value, cwd, f"value of {opt}")
                continue
            if name == "git" and ":" in a:
                raise ToolNotAllowedError(f"git argument {a!r}: 'rev:path' and pathspec magic "
                                          "(':/', ':(top)') are refused; use 'git show REV -- PATH'")
            self.check_path(a, cwd)
        if name == "git":
            extra = _GIT_DIFFING if args[0] in ("diff", "log", "show") else ()
            return [*_GIT_PREFIX, args[0], *extra, *args[1:]]
        if name == "grep" and self.hidden:  # grep -r would otherwise wade through lar's state
            return [*(f"--exclude-dir={h.name}" for h in self.hidden), *args]
        return args

    def environment(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                               if os.path.isabs(p) and not inside(Path(p), self.root))
        return {"PATH": path, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": self.home,
                "NO_COLOR": "1", "TERM": "dumb", "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
                "GIT_OPTIONAL_LOCKS": "0", "GIT_PAGER": "cat", "PAGER": "cat"}

    # -- serving ----------------------------------------------------------------------------
    def check_record(self, rec: ToolRecord) -> Path:
        """Raise ``OutOfScopeError`` unless this root's guard ran ``rec`` and it still points
        inside the root; returns its working directory."""
        if rec.kind != "command" or rec.scope != str(self.root):
            raise OutOfScopeError(
                f"output {rec.id} ({rec.display[:80]}) was not produced by this server's allow-list "
                f"for the root {str(self.root)!r} (it came from the Python API, `lar run` or another "
                "root), so it is not served; run it again with run_tool")
        try:
            cwd = self.resolve_cwd(rec.cwd)
            self._check_args(rec.command[0], _strip_injected(rec.command, self.hidden), cwd)
        except ToolNotAllowedError as exc:
            raise OutOfScopeError(f"output {rec.id} is not served: {exc}") from None
        return cwd

    def withheld(self, lines: Sequence[str], cwd: Path) -> dict[int, str]:
        """Line index -> the notice that replaces the line (it names a path out of scope)."""
        out: dict[int, str] = {}
        memo: dict[str, str | None] = {}

        def notice(p: str) -> str | None:
            if p not in memo:
                full = Path(p) if os.path.isabs(p) else cwd / p
                lexical, real = Path(os.path.normpath(full)), Path(os.path.realpath(full))
                if not inside(lexical, self.root) or not inside(real, self.root):
                    memo[p] = WITHHELD.format(path=p)
                elif not self.in_scope(lexical) or not self.in_scope(real):
                    memo[p] = STATE_WITHHELD
                else:
                    memo[p] = None
            return memo[p]

        section_bad: str | None = None
        for i, line in enumerate(lines):
            m = _DIFF_HEAD.match(line)
            if m:
                paths = [re.sub(r"^[ab]/", "", x) for x in m.groups()]
                section_bad = next((n for n in map(notice, paths) if n), None)
            if section_bad is not None:
                out[i] = section_bad
                continue
            p = file_prefix(line) or bare_path(line)
            if p is not None and notice(p):
                out[i] = notice(p)
                continue
            if ".." in line:
                for tok in _TOKEN_SPLIT.split(line):
                    if ".." in tok.split("/") and notice(tok):
                        out[i] = notice(tok)
                        break
        return out


def _strip_injected(command: Sequence[str], hidden: Sequence[Path] = ()) -> list[str]:
    """The caller's arguments of a recorded command (the options the guard adds removed)."""
    args = list(command[1:])
    if command[0] == "grep":
        injected = [f"--exclude-dir={h.name}" for h in hidden]
        if args[:len(injected)] == injected:
            args = args[len(injected):]
    if command[0] == "git" and tuple(args[:len(_GIT_PREFIX)]) == _GIT_PREFIX:
        args = args[len(_GIT_PREFIX):]
        if len(args) > len(_GIT_DIFFING) and tuple(args[1:1 + len(_GIT_DIFFING)]) == _GIT_DIFFING:
            args = [args[0], *args[1 + len(_GIT_DIFFING):]]
    return args


WITHHELD = "[lar: line withheld: it names {path}, outside the root]"
STATE_WITHHELD = "[lar: line withheld: it is in lar's state folder]"
