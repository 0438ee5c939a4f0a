"""Scope (which units a call may see) and root confinement (nothing outside the root)."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable

from lar.core.errors import ScopeError, UnreadablePathError


def normalize_relpath(root: Path, path: str | os.PathLike) -> str:
    """Turn ``path`` (relative to ``root`` or absolute inside it) into a POSIX relative path.

    Refuses ``..`` components, absolute paths outside the root and symlinks that leave it.
    """
    raw = os.fspath(path)
    if "\x00" in raw:
        raise ScopeError(f"path {raw!r} contains a NUL byte")
    p = Path(raw)
    root = Path(root).resolve()
    if p.is_absolute():
        try:
            rel = p.relative_to(root)
        except ValueError:
            try:
                rel = p.resolve().relative_to(root)
            except ValueError:
                raise ScopeError(
                    f"{raw!r} is outside the engine's root {str(root)!r}; "
                    "open an engine on a folder that contains it"
                ) from None
    else:
        rel = p
    parts = PurePosixPath(rel.as_posix()).parts
    if any(part == ".." for part in parts):
        raise ScopeError(f"{raw!r}: '..' is not allowed in paths; give a path inside the root")
    rel_posix = PurePosixPath(*[x for x in parts if x not in (".", "")]).as_posix()
    if rel_posix in ("", "."):
        raise ScopeError(f"{raw!r} names the root itself, not a file inside it")
    full = root / rel_posix
    try:
        resolved = full.resolve()
    except (OSError, RuntimeError) as exc:  # Python < 3.13 raises RuntimeError for a loop
        if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
            raise UnreadablePathError(
                f"{raw!r} is a symlink loop (or lies under one); lar cannot read it") from None
        raise UnreadablePathError(f"{raw!r} cannot be resolved: {exc.strerror or exc}") from None
    try:
        resolved.relative_to(root)
    except ValueError:
        raise ScopeError(
            f"{raw!r} is a symlink that leaves the root {str(root)!r}; lar does not follow it"
        ) from None
    return rel_posix


def compile_globs(patterns: Iterable[str]):
    import pathspec

    return pathspec.PathSpec.from_lines("gitignore", list(patterns))


@dataclass(frozen=True)
class Scope:
    """Which units a call may see: include/exclude globs (gitignore syntax) and optional hashes.

    ``Scope()`` is everything under the root. ``include=("src/**", "*.md")`` keeps units whose
    path matches any include glob; ``exclude`` removes matches; ``hashes`` (if given) keeps only
    those content hashes (a metadata layer can act as a scope generator this way).
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    hashes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for name in ("include", "exclude"):
            val = getattr(self, name)
            if isinstance(val, str):
                val = (val,)
            val = tuple(val)
            for g in val:
                if not isinstance(g, str) or not g.strip():
                    raise ScopeError(f"scope {name} globs must be non-empty strings, got {g!r}")
                if ".." in PurePosixPath(g).parts:
                    raise ScopeError(f"scope glob {g!r} may not contain '..'")
            object.__setattr__(self, name, val)
        if self.hashes is not None:
            object.__setattr__(self, "hashes", frozenset(self.hashes))
        object.__setattr__(self, "_inc", compile_globs(self.include) if self.include else None)
        object.__setattr__(self, "_exc", compile_globs(self.exclude) if self.exclude else None)

    @classmethod
    def parse(cls, value: Any) -> "Scope":
        if value is None:
            return cls()
        if isinstance(value, Scope):
            return value
        if isinstance(value, str):
            return cls(include=(value,))
        if isinstance(value, (list, tuple)):
            return cls(include=tuple(value))
        if isinstance(value, dict):
            unknown = set(value) - {"include", "exclude", "hashes"}
            if unknown:
                raise ScopeError(f"unknown scope keys {sorted(unknown)}; use include, exclude, hashes")
            return cls(
                include=tuple(value.get("include", ()) or ()),
                exclude=tuple(value.get("exclude", ()) or ()),
                hashes=value.get("hashes"),
            )
        raise ScopeError(f"cannot read a scope from {type(value).__name__}; give globs or a Scope")

    @property
    def is_everything(self) -> bool:
        return not self.include and not self.exclude and self.hashes is None

    def matches(self, path: str, hash: str | None = None) -> bool:
        if self._inc is not None and not self._inc.match_file(path):
            return False
        if self._exc is not None and self._exc.match_file(path):
            return False
        if self.hashes is not None and hash is not None and hash not in self.hashes:
            return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "include": list(self.include),
            "exclude": list(self.exclude),
            "hashes": None if self.hashes is None else sorted(self.hashes),
        }


def state_glob(root: Path, state_dir: Path) -> str | None:
    """The root-relative glob of lar's state folder (``.lar/**``) when it lies inside the root,
    else None. Give it to ripgrep as an excluding glob (``--glob '!.lar/**'``)."""
    try:
        rel = Path(state_dir).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None
    return None if rel in ("", ".") else f"{rel}/**"


def material(path: str, state: str | None = None) -> bool:
    """False for a root-relative path that may never be material whatever the scope says: one
    inside lar's state folder (``state``: the glob ``state_glob`` gives), or with a hidden component (``.git/x``, ``.lar/x``, ``a/.env``).
    A second guard behind ripgrep's ignore rules, which decide what is listed at all."""
    # (the components PurePosixPath gives, plus '' and '.' for doubled slashes and './', which
    # never count: a plain split is ~10x cheaper, and grep asks once per matching line)
    if any(p.startswith(".") and p not in (".", "..") for p in path.split("/")):
        return False
    if state is not None and (path == state[:-3] or path.startswith(state[:-2])):
        return False  # ``state`` is state_glob()'s answer, e.g. 'cache/lar/**'
    return True
