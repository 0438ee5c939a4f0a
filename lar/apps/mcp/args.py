"""Arguments of the MCP tools: specs (JSON Schema for the client), validation with messages
that say what was wrong, and binding of a call's arguments to a tool's parameters."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from lar.core.errors import ConfigError, LarError
from lar.core.timebox import parse_duration

REQUIRED = object()


class ToolArgumentError(ConfigError):
    """A tool was called with a missing, unknown or malformed argument."""


def got_arg(v: Any) -> str:
    return f"{json.dumps(v, default=str)[:60]} ({type(v).__name__})"


def string_arg(where: str, v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ToolArgumentError(f"{where} must be a non-empty string, got {got_arg(v)}")
    return v


def query_arg(where: str, v: Any) -> Any:
    if isinstance(v, str) and v.strip():
        return v
    if isinstance(v, Mapping) and v and all(isinstance(k, str) for k in v):
        return dict(v)
    raise ToolArgumentError(f"{where} must be text or an object {{layer: query}} (e.g. "
                            f'{{"grep": "def main"}}), got {got_arg(v)}')


def seconds_arg(lo: float, hi: float) -> Callable[[str, Any], float]:
    def check(where: str, v: Any) -> float:
        try:
            s = parse_duration(v) if not isinstance(v, bool) else None
        except LarError:
            s = None
        if s is None or not lo < s <= hi:
            raise ToolArgumentError(f"{where} must be seconds in ({lo:g}, {hi:g}] (a number, or "
                                    f"text such as '200ms'), got {got_arg(v)}")
        return s
    return check


def integer_arg(lo: int, hi: int) -> Callable[[str, Any], int]:
    def check(where: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ToolArgumentError(f"{where} must be an integer from {lo} to {hi}, got {got_arg(v)}")
        return v
    return check


def boolean_arg(where: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ToolArgumentError(f"{where} must be true or false, got {got_arg(v)}")
    return v


def names_arg(where: str, v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [x for x in v.split(",") if x]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ToolArgumentError(f"{where} must be a list of layer names, got {got_arg(v)}")
    return v


def argv_arg(where: str, v: Any) -> list[str]:
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        raise ToolArgumentError(f"{where} must be a list of strings such as "
                                f'["rg", "-n", "TODO", "src"] (no shell line), got {got_arg(v)}')
    return v


def globs_arg(where: str, v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ToolArgumentError(f"{where} must be a glob or a list of globs, got {got_arg(v)}")
    return v


def choice_arg(*values: str) -> Callable[[str, Any], str]:
    def check(where: str, v: Any) -> str:
        if v not in values:
            raise ToolArgumentError(f"{where} must be one of {', '.join(values)}, got {got_arg(v)}")
        return v
    return check


@dataclass(frozen=True)
class Param:
    name: str
    schema: Mapping[str, Any]
    check: Callable[[str, Any], Any]
    doc: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: tuple[Param, ...] = ()

    def input_schema(self) -> dict[str, Any]:
        props = {}
        for p in self.params:
            s = dict(p.schema, description=p.doc)
            if p.default is not REQUIRED and p.default is not None:
                s["default"] = p.default
            props[p.name] = s
        return {"type": "object", "properties": props, "additionalProperties": False,
                "required": [p.name for p in self.params if p.default is REQUIRED]}

    def bind(self, arguments: Any) -> dict[str, Any]:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(f"{self.name}: arguments must be an object, got {got_arg(arguments)}")
        known = {p.name for p in self.params}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise ToolArgumentError(f"{self.name}: unknown argument {unknown[0]!r}; its arguments "
                                    f"are {', '.join(p.name for p in self.params) or '(none)'}")
        out = {}
        for p in self.params:
            if p.name not in arguments or (arguments[p.name] is None and p.default is not REQUIRED):
                if p.default is REQUIRED:
                    raise ToolArgumentError(f"{self.name}: missing argument {p.name!r} ({p.doc})")
                out[p.name] = p.default
            else:
                out[p.name] = p.check(f"{self.name}: argument {p.name!r}", arguments[p.name])
        return out
