"""What a search asks for: :class:`SearchRequest`, validated once, used by every entry point.

The Python API (``Engine.search``), the ``lar search`` command, the ``%lar search`` magic, the
MCP server's ``search`` tool and the evaluation harness all build one of these, so a query, a
timebox or a layer list means the same thing (and fails with the same message) wherever it
comes from. ``params()`` is its JSON form (what traces record); ``from_params`` reads it back.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from lar.core.errors import ConfigError
from lar.core.scope import Scope
from lar.core.timebox import parse_duration

#: candidates a generate layer returns per hit asked for (at least MIN_POOL)
EMPHASIS_POOL = {"precision": 2, "balanced": 5, "recall": 20}
MIN_POOL = 20
DEFAULT_TIMEBOX = 0.5
DEFAULT_K = 20
DEFAULT_RRF_C = 60.0
MAX_K = 100_000
#: the longest query, in characters of text over the whole query (a mapping's values summed): a
#: query is a phrase, a pattern or a passage, and the OS refuses a longer argument to ripgrep
#: (one argument is at most 128 KiB on Linux), so a longer one is refused here with a clear error
MAX_QUERY_CHARS = 32_768


def pool_size(k: int, emphasis: str) -> int:
    """How many candidates each layer returns for ``k`` hits at this ``emphasis``."""
    if emphasis not in EMPHASIS_POOL:
        raise ConfigError(f"emphasis must be one of {sorted(EMPHASIS_POOL)}, got {emphasis!r}")
    return max(MIN_POOL, k * EMPHASIS_POOL[emphasis])


def query_chars(query: Any) -> int:
    """The characters of text in ``query``: a string's length, or the sum over a mapping's or a
    list's strings (keys included), however deeply nested."""
    if isinstance(query, str):
        return len(query)
    if isinstance(query, Mapping):
        return sum(query_chars(k) + query_chars(v) for k, v in query.items())
    if isinstance(query, (list, tuple)):
        return sum(query_chars(v) for v in query)
    return 0


def _names(value: Any, what: str) -> tuple[str, ...] | None:
    """Layer names from ``"a,b"`` or a sequence of strings (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(x.strip() for x in value.split(",") if x.strip())
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Sequence):
        raise ConfigError(f"{what} must be layer names (a list, or 'a,b'), got {type(value).__name__}")
    out = []
    for x in value:
        if not isinstance(x, str) or not x:
            raise ConfigError(f"{what} must be layer names (non-empty strings), got {x!r}")
        out.append(x)
    return tuple(out)


def _positive_int(value: Any, what: str, upper: int = MAX_K) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise ConfigError(f"{what} must be a positive integer (at most {upper:,}), got {value!r}")
    return value


@dataclass(frozen=True)
class SearchRequest:
    """One search: the query and how to run it (the arguments of ``Engine.search``).

    ``query`` is text (each layer reads it in its default form) or ``{layer: query}`` (then only
    the named layers run, each with its own form). ``timebox`` is seconds (or ``"200ms"``);
    ``k`` the number of hits; ``tokens`` an optional bound on the compact result's size;
    ``emphasis`` the pool size per layer; ``layers`` / ``exclude`` which layers may run (names;
    unknown ones are refused by the engine, which knows its layers); ``scope`` globs or
    ``{"include": [...], "exclude": [...]}``; ``fusion`` a policy name (None: the engine's
    default); ``rrf_c`` the RRF constant; ``strict`` raise if any layer failed."""

    query: Any
    timebox: float = DEFAULT_TIMEBOX
    k: int = DEFAULT_K
    emphasis: str = "balanced"
    layers: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    scope: Any = None
    fusion: str | None = None
    rrf_c: float = DEFAULT_RRF_C
    strict: bool = False
    tokens: int | None = None

    def __post_init__(self) -> None:
        q = self.query
        if isinstance(q, str):
            if not q.strip():
                raise ConfigError("the query is empty; give text, or a mapping {layer: query}")
        elif isinstance(q, Mapping):
            if not q:
                raise ConfigError("the query mapping is empty; name at least one layer")
            bad = [n for n in q if not isinstance(n, str) or not n]
            if bad:
                raise ConfigError(f"a query mapping's keys are layer names, got {bad[0]!r}")
            object.__setattr__(self, "query", MappingProxyType(dict(q)))
        else:
            raise ConfigError(f"a query is a string or a mapping {{layer: query}}, got {type(q).__name__}")
        size = query_chars(q)
        if size > MAX_QUERY_CHARS:
            raise ConfigError(f"the query is {size:,} characters long; the limit is {MAX_QUERY_CHARS:,} "
                              "(search for a shorter phrase, pattern or passage)")
        object.__setattr__(self, "timebox", parse_duration(self.timebox))
        _positive_int(self.k, "k")
        if self.tokens is not None:
            _positive_int(self.tokens, "tokens", upper=10**9)
        pool_size(1, self.emphasis)  # checks the emphasis
        object.__setattr__(self, "layers", _names(self.layers, "layers"))
        object.__setattr__(self, "exclude", _names(self.exclude, "exclude") or None)
        Scope.parse(self.scope)  # a bad scope is refused here, before any layer runs
        if self.fusion is not None and (not isinstance(self.fusion, str) or not self.fusion):
            raise ConfigError(f"fusion must be a policy name or None, got {self.fusion!r}")
        c = self.rrf_c
        if isinstance(c, bool) or not isinstance(c, numbers.Real) or not math.isfinite(c) or c <= 0:
            raise ConfigError(f"the RRF constant rrf_c must be a finite number > 0 (usually 60); got {c!r}")
        object.__setattr__(self, "rrf_c", float(c))
        if not isinstance(self.strict, bool):
            raise ConfigError(f"strict must be True or False, got {self.strict!r}")

    # -- derived values -----------------------------------------------------------------------
    @property
    def pool(self) -> int:
        """Candidates each layer returns (``k`` and the emphasis)."""
        return pool_size(self.k, self.emphasis)

    def parsed_scope(self) -> Scope:
        return Scope.parse(self.scope)

    def with_changes(self, **changes: Any) -> "SearchRequest":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # -- JSON form ----------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The request as JSON-able parameters (the keyword arguments of ``Engine.search``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if isinstance(self.query, Mapping):
            out["query"] = dict(self.query)
        for name in ("layers", "exclude"):
            if out[name] is not None:
                out[name] = list(out[name])
        return out

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "SearchRequest":
        """A request from keyword parameters (``params()``'s form); unknown keys are refused
        with the list of known ones."""
        if not isinstance(params, Mapping):
            raise ConfigError(f"search parameters must be a mapping, got {type(params).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in params if k not in known)
        if unknown:
            raise ConfigError(f"unknown search parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if "query" not in params:
            raise ConfigError("a search needs a query")
        return cls(**dict(params))


def as_request(given: Mapping[str, Any]) -> SearchRequest:
    """The request of ``Engine.search``'s arguments: ``given["query"]`` itself when it is a
    :class:`SearchRequest` (and no other argument differs from its default), else a new one."""
    query = given.get("query")
    if isinstance(query, SearchRequest):
        defaults = {f.name: f.default for f in fields(SearchRequest)}
        extra = sorted(k for k, v in given.items() if k != "query" and not _same(v, defaults.get(k)))
        if extra:
            raise ConfigError(f"give either a SearchRequest or search arguments, not both ({', '.join(extra)})")
        return query
    return SearchRequest.from_params(given)


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


__all__ = ["DEFAULT_K", "DEFAULT_RRF_C", "DEFAULT_TIMEBOX", "EMPHASIS_POOL", "MIN_POOL",
           "SearchRequest", "as_request", "pool_size"]
