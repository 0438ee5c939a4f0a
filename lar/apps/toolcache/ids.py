"""Tool ids (the format is documented in ``lar.apps.toolcache.view``) and what a fetch returns."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lar.apps.toolcache.errors import ToolIdError

TOOL_ID_RE = re.compile(r"^t([0-9a-f]{6,32})(?::(?:(\d+)(?:-(\d+))?|L(\d+)(?:-(\d+))?))?$")


@dataclass(frozen=True)
class ToolId:
    """A parsed tool id: the key prefix and what it selects (whole, items or lines)."""

    prefix: str
    kind: str  # "all" | "items" | "lines"
    a: int = 0
    b: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("all", "items", "lines"):
            raise ToolIdError(f"tool id kind {self.kind!r} is unknown")
        if self.kind != "all" and not 1 <= self.a <= self.b:
            raise ToolIdError(f"tool id range {self.a}-{self.b} must count up from 1")


def is_tool_id(value: str) -> bool:
    return isinstance(value, str) and bool(TOOL_ID_RE.match(value.strip()))


def parse_tool_id(value: str) -> ToolId:
    m = TOOL_ID_RE.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise ToolIdError(f"{value!r} is not a tool id; tool ids look like 't3fa9c1d2e4b5' (the "
                          "whole output), 't3fa9c1d2e4b5:4' (item 4), ':2-5' (items) or ':L10-20' "
                          "(lines)")
    prefix, ia, ib, la, lb = m.groups()
    if ia is not None:
        return ToolId(prefix, "items", int(ia), int(ib or ia))
    if la is not None:
        return ToolId(prefix, "lines", int(la), int(lb or la))
    return ToolId(prefix, "all")


@dataclass(frozen=True)
class ToolFetched:
    """The full text of an output, item range or line range."""

    id: str
    output: str  # the output's id, t<key12>
    command: str
    lines: tuple[int, int]  # 1-based inclusive; (0, 0) for an empty output
    items: tuple[int, int] | None
    text: str
    total_lines: int
    withheld: int = 0

    def __post_init__(self) -> None:
        if self.lines[1] < self.lines[0] or self.total_lines < 0 or self.withheld < 0:
            raise ToolIdError(f"fetch of {self.id!r}: invalid line range {self.lines}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "output": self.output, "cmd": self.command,
                             "lines": list(self.lines), "total_lines": self.total_lines}
        if self.items:
            d["items"] = list(self.items)
        d["text"] = self.text
        if self.withheld:
            d["withheld"] = self.withheld
        return d

    def __str__(self) -> str:
        return self.text
