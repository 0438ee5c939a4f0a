"""A getopt-style option matcher driven by an allow-list table (``lar.apps.toolcache.policy``).

The matcher reads an argument list the way the real program would (GNU ``getopt_long``: any
unambiguous prefix of a long option, ``--opt=value`` and ``--opt value``, short clusters such
as ``-rn`` and ``-A3``, ``--`` ending the options; git's parse-options reads prefixes the same
way), resolves every option to its full name, and refuses any option that is not on the table
or is ambiguous. Its output is the *canonical* argument list: every option spelled in full and
separately (``-rn`` becomes ``-r -n``, ``--inc=x`` becomes ``--include=x``), then ``--``, then
the operands. The program never sees an abbreviation, so a prefix the real program would read
differently from this table cannot slip through.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from lar.apps.toolcache.errors import ToolNotAllowedError

FLAG, VALUE = "flag", "value"  # arity of an option: takes no value / takes exactly one


@dataclass(frozen=True)
class Opt:
    """One allowed option: its arity and what kind of value it takes (checked by the caller:
    ``text`` any string, ``int`` a non-negative integer, ``path`` a path inside the root,
    ``glob`` a glob that does not climb out of the root, ``exclude-glob`` a glob starting
    with ``!``)."""

    arity: str = FLAG
    kind: str = "text"


@dataclass(frozen=True)
class Table:
    """The allow-list of one command (or git subcommand)."""

    name: str
    long: Mapping[str, Opt] = field(default_factory=dict)  # "--include" -> Opt
    short: Mapping[str, Opt] = field(default_factory=dict)  # "-A" -> Opt
    # options the real program has that are refused, named in the error when an argument
    # resolves to one (for a clear message; anything off the table is refused anyway)
    refused: Mapping[str, str] = field(default_factory=dict)  # "--dereference-recursive" -> why
    abbreviations: bool = True  # the program accepts unambiguous prefixes of long options
    max_operands: int | None = None


@dataclass(frozen=True)
class Parsed:
    options: tuple[tuple[str, str | None], ...]  # (full name, value or None), in order
    operands: tuple[str, ...]
    before_dashdash: int | None = None  # how many operands came before a ``--`` (None: no --)

    def canonical(self) -> list[str]:
        out: list[str] = []
        for name, value in self.options:
            if value is None:
                out.append(name)
            elif name.startswith("--"):
                out.append(f"{name}={value}")
            else:
                out.extend((name, value))
        return out

    def names(self) -> set[str]:
        return {n for n, _ in self.options}


def _refuse(table: Table, arg: str, resolved: str | None = None) -> ToolNotAllowedError:
    if resolved is not None and resolved != arg.partition("=")[0]:
        what = f"option {arg.partition('=')[0]!r} (read by {table.name} as {resolved!r})"
    else:
        what = f"option {(resolved or arg.partition('=')[0])!r}"
    why = table.refused.get(resolved or arg.partition("=")[0])
    tail = f" ({why})" if why else " (not on its allow list)"
    allowed = " ".join(sorted(table.long) + sorted(table.short))
    return ToolNotAllowedError(f"{what} of {table.name} is refused{tail}; allowed options: "
                               f"{allowed or 'none'}")


def resolve_long(table: Table, given: str) -> str:
    """The full name ``given`` (``--name`` without a value) stands for, or ``ToolNotAllowedError``.

    An exact name wins; otherwise a prefix must match exactly one name among the allowed *and*
    the known refused options (a prefix of a refused option is refused, naming it)."""
    if given in table.long:
        return given
    if given in table.refused:
        raise _refuse(table, given, given)
    if not table.abbreviations or len(given) < 3:
        raise _refuse(table, given)
    cands = sorted({n for n in (*table.long, *table.refused) if n.startswith(given)})
    if not cands:
        raise _refuse(table, given)
    if len(cands) > 1:
        raise ToolNotAllowedError(f"option {given!r} of {table.name} is ambiguous (it could be "
                                  f"{', '.join(cands)}); spell the option in full")
    if cands[0] not in table.long:
        raise _refuse(table, given, cands[0])
    return cands[0]


def parse(table: Table, args: Sequence[str],
          is_option: Callable[[str], bool] = lambda a: a.startswith("-") and a != "-") -> Parsed:
    """Read ``args`` by ``table`` (GNU rules, options and operands may be interleaved)."""
    opts: list[tuple[str, str | None]] = []
    operands: list[str] = []
    i, n, split = 0, len(args), None
    while i < n:
        a = args[i]
        i += 1
        if a == "--":
            split = len(operands)
            operands.extend(args[i:])
            break
        if not is_option(a):
            operands.append(a)
            continue
        if a.startswith("--"):
            given, eq, value = a.partition("=")
            name = resolve_long(table, given)
            spec = table.long[name]
            if spec.arity == FLAG:
                if eq:
                    raise ToolNotAllowedError(f"option {name!r} of {table.name} takes no value, "
                                              f"got {a!r}")
                opts.append((name, None))
            else:
                if not eq:
                    if i >= n:
                        raise ToolNotAllowedError(f"option {name!r} of {table.name} needs a value")
                    value = args[i]
                    i += 1
                opts.append((name, value))
            continue
        # a cluster of short options: -rn, -A3, -e pattern, -nA 3
        j = 1
        while j < len(a):
            key = "-" + a[j]
            spec = table.short.get(key)
            if spec is None:
                raise _refuse(table, key)
            j += 1
            if spec.arity == FLAG:
                opts.append((key, None))
                continue
            if j < len(a):
                value = a[j:]
            else:
                if i >= n:
                    raise ToolNotAllowedError(f"option {key!r} of {table.name} needs a value")
                value = args[i]
                i += 1
            opts.append((key, value))
            break
    if table.max_operands is not None and len(operands) > table.max_operands:
        raise ToolNotAllowedError(f"{table.name} takes at most {table.max_operands} operands, "
                                  f"got {len(operands)}")
    return Parsed(tuple(opts), tuple(operands), split)


def spec_of(table: Table, name: str) -> Opt:
    return table.long.get(name) or table.short[name]
