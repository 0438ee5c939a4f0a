"""Command-line value parsers shared by the ``lar`` command, the ``%lar`` magics and the
evaluation harness (argparse ``type=`` callables; each raises ``ArgumentTypeError`` with the
reason)."""
from __future__ import annotations

import argparse
import json
from typing import Any

from lar.core.errors import LarError
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


def query_arg(value: str) -> Any:
    """A query is text, or a JSON object {layer: query} when it starts with '{'."""
    if value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"query looks like JSON but is not valid: {exc}") from None
    return value


__all__ = ["csv_list", "duration", "durations", "query_arg"]
