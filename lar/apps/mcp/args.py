"""Arguments of the MCP tools, as pydantic v2 models: the argument types (constraints that also
become the tools' input JSON Schema), ``ToolSpec`` (a tool's name, description and input model)
and the binding of a call's arguments with messages that name the argument, say what it must
be and what was sent. The models themselves are in ``lar.apps.mcp.inputs``."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Mapping, Union

from lar.core.errors import ConfigError, LarError, require
from lar.core.timebox import parse_duration

require("pydantic", "agent")
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, Strict,  # noqa: E402
                      StringConstraints, ValidationError, WithJsonSchema, model_validator)

MAX_NAME_CHARS = 64  # a layer name
MAX_LIST = 256  # layer names, globs or query layers in one argument
MAX_PATH_CHARS = 4096  # a glob or a folder (PATH_MAX)


class ToolArgumentError(ConfigError):
    """A tool was called with a missing, unknown or malformed argument."""


@dataclass(frozen=True)
class Expect:
    """What an argument must be, in words (``... must be <text>, got ...``): kept in the
    argument type's metadata beside the constraints it describes."""

    text: str


def got_arg(v: Any) -> str:
    return f"{json.dumps(v, default=str)[:60]} ({type(v).__name__})"


def integer(lo: int, hi: int) -> Any:
    """A JSON integer in [lo, hi] (no bool, no float, no numeric string)."""
    return Annotated[int, Strict(), Field(ge=lo, le=hi), Expect(f"an integer from {lo} to {hi}")]


def _seconds(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("a duration is a number or text such as '200ms', not true or false")
    try:
        return parse_duration(v) if isinstance(v, (int, float, str)) else v
    except LarError as exc:  # pydantic reports ValueError; a LarError would escape it
        raise ValueError(str(exc)) from None


def seconds(hi: float) -> Any:
    """Seconds in (0, hi]: a number, or text such as '200ms', '1.5s', '2m'."""
    return Annotated[float, BeforeValidator(_seconds), Field(gt=0, le=hi, allow_inf_nan=False),
                     WithJsonSchema({"type": ["number", "string"], "exclusiveMinimum": 0,
                                     "maximum": hi}),
                     Expect(f"seconds in (0, {hi:g}] (a number, or text such as '200ms')")]


def text(max_chars: int | None = None, what: str = "a non-empty string") -> Any:
    """A string with a non-space character (at most ``max_chars``)."""
    return Annotated[str, StringConstraints(strict=True, min_length=1, max_length=max_chars,
                                            pattern=r"\S"),
                     Expect(what if max_chars is None else f"{what} of at most {max_chars} characters")]


def choice(*values: str) -> Any:
    """One of ``values``."""
    return Annotated[Literal[values], Expect(f"one of {', '.join(values)}")]


Flag = Annotated[bool, Strict(), Expect("true or false")]
LayerName = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_NAME_CHARS,
                                             pattern=r"^[^\s,]+$")]
Glob = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_PATH_CHARS)]


def _split_names(v: Any) -> Any:
    return [x for x in v.split(",") if x] if isinstance(v, str) else v


LayerNames = Annotated[list[LayerName], BeforeValidator(_split_names),
                       Field(min_length=1, max_length=MAX_LIST),
                       WithJsonSchema({"anyOf": [
                           {"type": "array", "minItems": 1, "maxItems": MAX_LIST, "items": {
                               "type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS}},
                           {"type": "string", "minLength": 1,
                            "description": "comma-separated names"}]}),
                       Expect(f"a list of 1 to {MAX_LIST} layer names (or one comma-separated "
                              f"string of them)")]


def _one_glob(v: Any) -> Any:
    return [v] if isinstance(v, str) else v


Globs = Annotated[list[Glob], BeforeValidator(_one_glob), Field(max_length=MAX_LIST),
                  WithJsonSchema({"anyOf": [
                      {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS},
                      {"type": "array", "maxItems": MAX_LIST,
                       "items": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS}}]}),
                  Expect(f"a glob or a list of at most {MAX_LIST} globs")]

Query = Annotated[Union[text(),
                        Annotated[dict[LayerName, Any], Field(min_length=1, max_length=MAX_LIST)]],
                  Expect('text or an object {layer: query} (e.g. {"grep": "def main"})')]


def _no_null_defaults(schema: dict[str, Any]) -> None:
    """A default of None means "not given": the schema states no default then."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class ToolInput(BaseModel):
    """A tool's arguments: unknown ones are refused; a null argument means its default (JSON
    has no NaN or infinity: the MCP client sends null for them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_no_null_defaults)

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = cls.model_fields
            return {k: v for k, v in data.items()
                    if not (v is None and k in fields and not fields[k].is_required())}
        return data


def _expect(field: Any) -> str:
    found = [m.text for m in getattr(field, "metadata", ()) if isinstance(m, Expect)]
    return found[0] if found else "a valid value"


def _detail(errors: list[dict[str, Any]]) -> str:
    """The part of pydantic's report that says more than the argument's description: which
    item was wrong, or how long the value was."""
    for e in errors:
        at = [x for x in e["loc"][1:] if isinstance(x, int)]
        if at:
            return f"; {e['loc'][0]}[{']['.join(map(str, at))}]: {e['msg']}"
    for e in errors:
        if e["type"] in ("too_long", "too_short", "string_too_long"):
            return f"; {e['msg']}"
    return ""


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, its description for the client and its input model."""

    name: str
    description: str
    model: type[ToolInput]

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(self.model.model_fields)

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema the client is given (generated from the model)."""
        return self.model.model_json_schema()

    def bind(self, arguments: Any) -> dict[str, Any]:
        """The call's arguments checked and completed with the defaults, by parameter name."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(f"{self.name}: arguments must be an object, got {got_arg(arguments)}")
        try:
            got = self.model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentError(self._message(arguments, exc.errors())) from None
        return {name: getattr(got, name) for name in self.params}

    def _message(self, arguments: Mapping[str, Any], errors: list[dict[str, Any]]) -> str:
        fields = self.model.model_fields
        unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
        if unknown:
            return (f"{self.name}: unknown argument {unknown[0]!r}; its arguments are "
                    f"{', '.join(fields) or '(none)'}")
        name = str(errors[0]["loc"][0]) if errors[0]["loc"] else ""
        if name not in fields:  # not about one argument (cannot happen with these models)
            return f"{self.name}: {errors[0]['msg']}"
        mine = [e for e in errors if e["loc"] and e["loc"][0] == name]
        if any(e["type"] == "missing" for e in mine):
            return f"{self.name}: missing argument {name!r} ({fields[name].description})"
        return (f"{self.name}: argument {name!r} must be {_expect(fields[name])}, got "
                f"{got_arg(arguments.get(name))}{_detail(mine)}")


__all__ = ["Expect", "Flag", "Globs", "LayerNames", "Query", "ToolArgumentError", "ToolInput", "ToolSpec",
           "choice", "got_arg", "integer", "seconds", "text"]
