"""The guard of a rooted tool cache (the MCP server's): which commands run, with which
arguments, and which cached lines are served.

Running. A command is an argv list, never a shell line: nothing the caller sends is expanded.
``argv[0]`` must be a bare name on the allow-list (``DEFAULT_ALLOWED`` unless configured); it is
looked up on PATH (absolute entries outside the root; ``rg`` falls back to the ripgrep lar
ships) and runs with ``SAFE_PATH`` and a fixed environment. The working directory must resolve
inside the root. Options are matched against the command's allow list (``policy``) after its
own abbreviation rules (``options``) and passed on spelled in full; operands must resolve
inside the root lexically and after symlinks, may not be hidden or in lar's state folder, and
an existing file must be one ripgrep lists. git runs only ``GIT_SUBCOMMANDS`` with no global
options; revisions with ``:`` or ``{`` are refused, others peeled to commits; pathspecs are
limited to the root (``-- .`` when none) with hidden paths excluded. See docs/security.md.

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
from lar.apps.toolcache.options import Parsed, Table, parse, spec_of
from lar.apps.toolcache.policy import (FIND_ACTIONS, FIND_GLOBAL, FIND_PRIMARIES, FIND_REFUSED,
                                       GIT_RELATIVE, GIT_SUBCOMMANDS, GIT_TABLES, TABLES)
from lar.apps.toolcache.store import ToolRecord
from lar.apps.toolcache.view import bare_path, file_prefix

DEFAULT_ALLOWED = ("rg", "grep", "ls", "cat", "head", "tail", "wc", "find", "git")
MAX_ARGS, MAX_ARG_CHARS = 256, 4096
_INT = re.compile(r"\+?[0-9]{1,9}")
_REV = re.compile(r"(\^?)([A-Za-z0-9_][A-Za-z0-9_./@-]*?)((?:[~^][0-9]*)*)")

_GIT_PREFIX = ("--no-pager", "-c", "core.fsmonitor=false", "-c", "core.pager=cat",
               "-c", "diff.external=", "-c", "color.ui=false", "-c", "core.hooksPath=/dev/null")
_GIT_DIFFING = ("--no-ext-diff", "--no-textconv", "--relative")
_GIT_NOT_HIDDEN = (":(exclude,glob)**/.*", ":(exclude,glob)**/.*/**")  # hidden: never material
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
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
        self._listed: frozenset[str] | None = None

    # -- paths ------------------------------------------------------------------------------
    def in_scope(self, p: Path) -> bool:
        return inside(p, self.root) and not any(inside(p, h) for h in self.hidden)

    def material_path(self, p: Path) -> bool:
        """False for a path inside the root with a hidden component, or an existing file that
        ripgrep's ignore rules leave out."""
        rel = self._rel(p)
        if any(x.startswith(".") for x in Path(rel).parts if x != "."):
            return False
        real = Path(os.path.realpath(p))
        return not real.is_file() or (inside(real, self.root) and self._rel(real) in self.listed())

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
        self._listed = None  # files come and go: list them afresh for each command
        args = list(argv[1:])
        run_args = self._check_args(name, args, where)
        from lar.apps.toolcache.runner import resolve_executable

        env = self.environment()
        return Prepared(tuple([name, *run_args]), resolve_executable(name, self.lookup_env()),
                        str(where), env)

    def lookup_env(self) -> dict[str, str]:
        """Where executables are looked up: the server's absolute PATH entries outside the root
        (the command then runs with ``SAFE_PATH``)."""
        path = os.pathsep.join(p for p in os.environ.get("PATH", os.defpath).split(os.pathsep)
                               if os.path.isabs(p) and not inside(Path(p), self.root))
        return {"PATH": path}

    def _check_args(self, name: str, args: list[str], cwd: Path) -> list[str]:
        """The canonical argument list to run (every option in full, then ``--``, then the
        operands), or ``ToolNotAllowedError`` naming the first argument that is refused."""
        if name == "git":
            return self._git(args, cwd)
        if name == "find":
            return self._find(args, cwd)
        table = TABLES.get(name) or Table(name)  # a command the operator added: no options
        parsed = parse(table, args)
        self._check_values(table, parsed, cwd)
        for op in parsed.operands:
            self.check_operand(op, cwd)
        front: list[str] = []
        back: list[str] = []
        if name == "rg":  # later globs win in ripgrep: the state folder stays out whatever
            front = ["--no-config", "--no-require-git", "--no-messages"]
            back = [f"--glob=!{h.name}" for h in self.hidden]
        elif name == "grep":  # grep -r would otherwise wade through lar's state and .git
            front = [*(f"--exclude-dir={h.name}" for h in self.hidden), "--exclude-dir=.?*"]
        return [*front, *parsed.canonical(), *back, "--", *parsed.operands]

    def check_operand(self, arg: str, cwd: Path) -> None:
        self.check_path(arg, cwd)
        full = cwd / arg
        if os.path.lexists(full):
            rel = Path(os.path.normpath(full)).relative_to(self.root).parts
            hidden = [p for p in rel if p.startswith(".") and p not in (".", "..")]
            if hidden:
                raise ToolNotAllowedError(f"argument {arg!r} names a hidden path ({hidden[0]!r}); "
                                          "hidden and ignored files are never material")
            real = Path(os.path.realpath(full))  # a symlink counts as the file it names
            if not real.is_dir() and self._rel(real) not in self.listed():
                raise ToolNotAllowedError(f"argument {arg!r} names a file ripgrep's ignore rules "
                                          "leave out (.gitignore, .ignore, .larignore); ignored "
                                          "files are never material")

    def listed(self) -> frozenset[str]:
        """The root-relative files ripgrep lists (its ignore rules, no hidden files, not lar's
        state): what may be material. Listed once per command checked or output served."""
        if self._listed is None:
            from lar.store.scanner import list_files

            rels = [self._rel(h) + "/**" for h in self.hidden]
            self._listed = frozenset(list_files(self.root, rels))
        return self._listed

    def _check_values(self, table: Table, parsed: Parsed, cwd: Path) -> None:
        for opt, value in parsed.options:
            if value is None:
                continue
            kind = spec_of(table, opt).kind
            if kind == "int" and not _INT.fullmatch(value):
                raise ToolNotAllowedError(f"option {opt!r} of {table.name} takes a whole number, "
                                          f"got {value[:40]!r}")
            if kind == "path":
                self.check_path(value, cwd, f"value of {opt}")
            if kind in ("glob", "exclude-glob"):
                g = value[1:] if value.startswith("!") else value
                if g.startswith("/") or ".." in g.split("/"):
                    raise ToolNotAllowedError(f"value of {opt} {value!r} names a path outside the "
                                              "root ('..' or an absolute path)")
            if kind == "exclude-glob" and not value.startswith("!"):
                raise ToolNotAllowedError(
                    f"option {opt!r} of {table.name} takes only excluding globs ('!GLOB'): a "
                    "positive glob overrides ripgrep's ignore rules; narrow with -t TYPE or a "
                    f"path instead (got {value[:40]!r})")

    def _git(self, args: list[str], cwd: Path) -> list[str]:
        if not args or args[0] not in GIT_TABLES:
            raise ToolNotAllowedError(f"git runs only these subcommands, given directly after "
                                      f"'git': {', '.join(GIT_SUBCOMMANDS)} (global options such as "
                                      "-c, -C, --git-dir, --exec-path are refused)")
        sub, table = args[0], GIT_TABLES[args[0]]
        parsed = parse(table, args[1:])
        self._check_values(table, parsed, cwd)
        ops = list(parsed.operands)
        pattern: list[str] = []
        if sub == "grep" and not parsed.names() & {"-e", "--regexp"}:
            if not ops or (parsed.before_dashdash is not None and parsed.before_dashdash == 0):
                raise ToolNotAllowedError("git grep needs a pattern (give it before '--' or as -e)")
            pattern = ["-e", ops.pop(0)]
            split = None if parsed.before_dashdash is None else parsed.before_dashdash - 1
        else:
            split = parsed.before_dashdash
        if split is None:
            revs = [o for o in ops if not os.path.lexists(cwd / o)]
            paths = [o for o in ops if os.path.lexists(cwd / o)]
        else:
            revs, paths = ops[:split], ops[split:]
        peeled = [self._revision(sub, r) for r in revs]
        for p in paths:
            if ":" in p:
                raise ToolNotAllowedError(f"git argument {p!r}: pathspec magic (':/', ':(top)') "
                                          "is refused; give a path inside the root")
            self.check_operand(p, cwd)
        extra = list(_GIT_DIFFING) if sub in GIT_RELATIVE else []
        return [*_GIT_PREFIX, sub, *extra, *parsed.canonical(), *pattern, *peeled, "--",
                *(paths or ["."]), *_GIT_NOT_HIDDEN]

    @staticmethod
    def _revision(sub: str, rev: str) -> str:
        if ":" in rev or "{" in rev:
            raise ToolNotAllowedError(
                f"git argument {rev!r}: 'rev:path', 'REV^{{tree}}' and other revisions that name "
                "trees or blobs are refused (they reach outside the root's subtree); use "
                "'git show REV -- PATH'")
        parts = re.split(r"(\.\.\.?)", rev)
        out = []
        for part in parts:
            if part in ("..", "...", ""):
                out.append(part)
                continue
            m = _REV.fullmatch(part)
            if m is None:
                raise ToolNotAllowedError(f"git revision {rev!r} is not a plain ref, hash or "
                                          "range such as HEAD~2, main..topic, a1b2c3d")
            neg, base, suffix = m.groups()
            out.append(f"{neg}{base}^{{commit}}{suffix}")  # a blob or tree id fails here
        if sub in ("status", "ls-files"):
            raise ToolNotAllowedError(f"git {sub} takes no revision, got {rev!r}")
        return "".join(out)

    def _find(self, args: list[str], cwd: Path) -> list[str]:
        i, paths = 0, []
        while i < len(args) and not (args[i].startswith("-") or args[i] in ("(", ")", "!")):
            paths.append(args[i])
            i += 1
        glob_opts: list[str] = []
        expr: list[str] = []
        action = False
        while i < len(args):
            a = args[i]
            i += 1
            if a in FIND_REFUSED:
                raise ToolNotAllowedError(f"option {a!r} of find is refused ({FIND_REFUSED[a]})")
            n = FIND_GLOBAL.get(a, FIND_PRIMARIES.get(a))
            if n is None:
                raise ToolNotAllowedError(f"option {a!r} of find is refused (not on its allow "
                                          f"list); allowed: {' '.join([*FIND_GLOBAL, *FIND_PRIMARIES])}")
            vals = args[i:i + n]
            if len(vals) < n:
                raise ToolNotAllowedError(f"option {a!r} of find needs a value")
            i += n
            if a in FIND_GLOBAL and not _INT.fullmatch(vals[0]):
                raise ToolNotAllowedError(f"option {a!r} of find takes a whole number")
            if a == "-newer":
                self.check_operand(vals[0], cwd)
            (glob_opts if a in FIND_GLOBAL else expr).extend([a, *vals])
            action = action or a in FIND_ACTIONS
        for p in paths:
            self.check_operand(p, cwd)
        prune = ["(", "-name", ".?*", *(x for h in self.hidden for x in ("-o", "-name", h.name)),
                 ")", "-prune"]  # hidden entries and lar's state are never listed or entered
        return [*(paths or ["."]), *glob_opts, *prune, "-o", "(", *(expr or ["-true"]), ")",
                *([] if action else ["-print"])]

    def environment(self) -> dict[str, str]:
        """A fixed environment: nothing of the server's (no GIT_*, PAGER, LD_*, ...)."""
        return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": self.home,
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
            asked = list(rec.request or rec.command)
            self._check_args(asked[0], asked[1:], cwd)
        except ToolNotAllowedError as exc:
            raise OutOfScopeError(f"output {rec.id} is not served: {exc}") from None
        return cwd

    def withheld(self, lines: Sequence[str], cwd: Path) -> dict[int, str]:
        """Line index -> the notice that replaces the line (it names a path out of scope)."""
        out: dict[int, str] = {}
        memo: dict[str, str | None] = {}
        self._listed = None

        def notice(p: str) -> str | None:
            if p not in memo:
                full = Path(p) if os.path.isabs(p) else cwd / p
                lexical, real = Path(os.path.normpath(full)), Path(os.path.realpath(full))
                if not inside(lexical, self.root) or not inside(real, self.root):
                    memo[p] = WITHHELD.format(path=p)
                elif not self.in_scope(lexical) or not self.in_scope(real):
                    memo[p] = STATE_WITHHELD
                elif not self.material_path(lexical):
                    memo[p] = IGNORED_WITHHELD
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


WITHHELD = "[lar: line withheld: it names {path}, outside the root]"
STATE_WITHHELD = "[lar: line withheld: it is in lar's state folder]"
IGNORED_WITHHELD = "[lar: line withheld: it names a hidden or ignored file]"
