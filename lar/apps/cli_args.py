"""Command-line value parsers shared by the ``lar`` command, the ``%lar`` magics and the
evaluation harness (argparse ``type=`` callables; each raises ``ArgumentTypeError`` with the
reason)."""
from __future__ import annotations

import argparse
import json
from typing import Any

from lar.core.errors import LarError
from lar.core.request import DEFAULT_K, DEFAULT_RRF_C, DEFAULT_TIMEBOX, EMPHASIS_POOL, SearchRequest
from lar.core.timebox import parse_duration


def csv_list(value: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [x.strip() for x in value.split(",") if x.strip()]


def duration(value: str) -> float:
    """``"200ms"``, ``"2s"``, ``"0.5"`` -> seconds."""
    try:
        return parse_duration(value)
    except LarError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def durations(value: str) -> list[float]:
    """``"100ms,1s"`` -> ``[0.1, 1.0]``."""
    return [duration(x) for x in csv_list(value)]


def positive_int(value: str) -> int:
    """``"20"`` -> 20 (a whole number >= 1)."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {n}")
    return n


#: the search flags every command line that searches shares (``lar search``, ``%lar search``)
SEARCH_FLAGS = ("timebox", "k", "tokens", "layers", "exclude", "scope", "fusion", "rrf_c",
                "emphasis", "strict")


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of :data:`SEARCH_FLAGS`, with the defaults of :class:`lar.core.request.SearchRequest`."""
    p.add_argument("--timebox", type=duration, default=DEFAULT_TIMEBOX, help="e.g. 200ms, 1s (default 500ms)")
    p.add_argument("--k", type=positive_int, default=DEFAULT_K, help=f"hits to return (default {DEFAULT_K})")
    p.add_argument("--tokens", type=positive_int, default=None, help="also bound the result's size in tokens")
    p.add_argument("--layers", type=csv_list, default=None, help="comma-separated layer names")
    p.add_argument("--exclude", type=csv_list, default=None, help="comma-separated layer names")
    p.add_argument("--scope", action="append", default=None, help="glob to include (repeatable)")
    p.add_argument("--fusion", default=None,
                   help="route-unique | rrf | combsum | combmnz | pvalue | adaptive (default: the engine's)")
    p.add_argument("--rrf-c", type=float, default=DEFAULT_RRF_C, help="the RRF constant (default 60)")
    p.add_argument("--emphasis", default="balanced", choices=sorted(EMPHASIS_POOL))
    p.add_argument("--strict", action="store_true", help="fail if any layer fails")


def request_from_args(query: Any, ns: argparse.Namespace) -> SearchRequest:
    """The :class:`SearchRequest` of ``query`` and the flags :func:`add_search_arguments` parsed."""
    return SearchRequest(query, **{k: getattr(ns, k) for k in SEARCH_FLAGS})


def query_arg(value: str) -> Any:
    """A query is text, or a JSON object {layer: query} when it starts with '{'."""
    if value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"query looks like JSON but is not valid: {exc}") from None
    return value


__all__ = ["SEARCH_FLAGS", "add_search_arguments", "csv_list", "duration", "durations", "positive_int",
           "query_arg", "request_from_args"]
