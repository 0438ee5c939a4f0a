"""What the MCP tools return, as typed models: each tool's ``outputSchema`` is generated from
its model (pydantic, which the MCP SDK depends on), and a successful call carries its reply as
``structuredContent`` too, so a client can check it against the schema. Fields a reply may or
may not carry are optional; models allow extra keys so a reply can grow without breaking a
client that validates."""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class HitOut(_Open):
    id: str = Field(description="hit id '<hash prefix>:<start>-<end>' (or a tool line id); fetch it")
    path: Optional[str] = Field(None, description="file path relative to the root")
    lines: Optional[list[int]] = Field(None, description="[first, last] line, 1-based")
    excerpt: str = Field(description="a short excerpt of the span")
    signals: list[str] = Field(description="the layers that found it")
    rank: Optional[int] = Field(None, description="1-based rank in this result")
    score: Optional[float] = Field(None, description="fused score, on the result's score_scale")


class RunOut(_Open):
    layer: str
    state: str = Field(description="ran | aborted | failed (skipped layers are left out)")
    hits: int = Field(description="hits the layer contributed")
    coverage: Optional[float] = Field(None, description="share of the scope the layer has built")
    reason: Optional[str] = Field(None, description="why it was cut short or failed, or how much "
                                                    "is built and what builds the rest")


class SearchOut(_Open):
    hits: list[HitOut]
    score_scale: str = Field(description="what the hits' scores are: 'rrf', 'adaptive-<norm>', ...")
    runs: list[RunOut]
    elapsed: float = Field(description="seconds the search took")


class UnitOut(_Open):
    path: str
    size: int
    hash: str


class InventoryOut(_Open):
    total: int
    offset: int
    units: list[UnitOut]
    next_offset: Optional[int] = Field(None, description="offset of the next page, when there is one")


class LayerOut(_Open):
    name: str
    coverage: float
    roles: list[str]
    query: str = Field(description="the query forms the layer reads")
    cost: str


class StatusOut(_Open):
    root: str
    units: int
    distinct: int
    skipped: int
    layers: list[LayerOut]
    tools: dict[str, Any]
    default_layers: Optional[list[str]] = None


class BuildOut(_Open):
    timebox: float
    layers: dict[str, dict[str, Any]] = Field(description="per layer: state, ok, skipped, failed, "
                                                          "pending, coverage")
    elapsed: float


#: the tools that declare an output schema, by name
OUTPUTS: dict[str, type[BaseModel]] = {"search": SearchOut, "inventory": InventoryOut,
                                       "status": StatusOut, "build": BuildOut}


def output_schema(tool: str) -> dict[str, Any] | None:
    """The JSON Schema of ``tool``'s reply (None: the tool declares none)."""
    model = OUTPUTS.get(tool)
    return model.model_json_schema() if model is not None else None


__all__ = ["OUTPUTS", "BuildOut", "HitOut", "InventoryOut", "RunOut", "SearchOut", "StatusOut",
           "output_schema"]
