"""The MCP tools' inputs: one pydantic model per tool (unknown arguments refused, types, ranges,
enums and sizes as field constraints) and ``SPECS``, the tools with their descriptions. The
input JSON Schema a client is given is generated from these models (``ToolSpec.input_schema``),
and the same models check every call (``ToolSpec.bind``). Checks that need the root, the engine
or the allow-list (paths inside the root, never the state folder, the command's options, known
layers) stay where that knowledge is: ``lar.apps.toolcache`` and the engine."""
from typing import Annotated

from pydantic import Field, StringConstraints

from lar.apps.mcp.args import (MAX_PATH_CHARS, Expect, Flag, Globs, LayerNames, Query, ToolInput,
                               ToolSpec, choice, integer, seconds, text)
from lar.apps.toolcache.security import MAX_ARG_CHARS, MAX_ARGS
from lar.fusion.policies import POLICIES

MAX_ID_CHARS = 256  # hit ids and tool ids are a hash prefix and a few numbers

Argv = Annotated[list[Annotated[str, StringConstraints(strict=True, max_length=MAX_ARG_CHARS)]],
                 Field(min_length=1, max_length=MAX_ARGS),
                 Expect(f'a list of strings such as ["rg", "-n", "TODO", "src"] (no shell line; '
                        f"1 to {MAX_ARGS} of them, each at most {MAX_ARG_CHARS} characters)")]


Timebox = seconds(120)
LongSeconds = seconds(600)
K = integer(1, 200)
ContextLines = integer(0, 200)
Limit = integer(1, 2000)
Offset = integer(0, 10**9)
Fusion = choice(*POLICIES)
Source = choice("files", "tools")
Generator = choice("client", "extractive")
AnyId = text(MAX_ID_CHARS, "a hit id or a tool id")
Folder = text(MAX_PATH_CHARS)


class StatusIn(ToolInput):
    pass


class SearchIn(ToolInput):
    query: Query = Field(description="text, or an object {layer: query} to give each layer its own query")
    timebox: Timebox = Field(0.5, description="seconds the call may take")
    k: K = Field(20, description="number of hits")
    layers: LayerNames = Field(None, description="run only these layers (default: all)")
    fusion: Fusion = Field(None, description=f"{' | '.join(POLICIES)} (default: the engine's)")
    source: Source = Field("files", description="files of the root, or cached tool outputs")
    scope: Globs = Field(None, description="glob(s) the hits must match, e.g. 'src/**'")


class FetchIn(ToolInput):
    id: AnyId = Field(description="a hit id or tool id from an earlier reply")
    context: ContextLines = Field(0, description="lines of context around a hit")


class InventoryIn(ToolInput):
    limit: Limit = Field(100, description="units per page")
    offset: Offset = Field(0, description="first unit")
    glob: Globs = Field(None, description="only units matching these globs")


class RunToolIn(ToolInput):
    command: Argv = Field(description='the command as an argv list, e.g. ["rg", "-n", "TODO", "src"]')
    cwd: Folder = Field(".", description="working folder, relative to the root")
    timeout: LongSeconds = Field(30, description="seconds before it is stopped")
    refresh: Flag = Field(False, description="run again even if a cached output exists")


class BuildIn(ToolInput):
    timebox: LongSeconds = Field(30, description="seconds to build")
    layers: LayerNames = Field(None, description="build only these layers (with generator: 'derived')")
    generator: Generator = Field(
        None, description="derived texts from the client's model via sampling ('client', needs a "
                          "client that offers sampling) or offline extractive rules ('extractive')")
    scope: Globs = Field(None, description="build only units matching these globs, e.g. 'src/**'")


def layer_forms() -> str:
    """The layers and the query forms each reads (from the registered layer classes), so an
    agent knows them without calling ``status`` first."""
    from lar.core.registry import registered_layers

    parts = []
    for name, cls in sorted(registered_layers().items()):
        form = " ".join(str(getattr(cls, "query_format", "") or "free text").split())
        parts.append(f"{name}: {form[:140]}")
    return "Layers and their query forms: " + "; ".join(parts) + "."


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("status", "Layers (coverage, query format, cost), unit counts, cached tool outputs.",
             StatusIn),
    ToolSpec("search", "Search the root (source 'files') or the cached tool outputs ('tools') "
             "under a timebox. Hits are {id, path, lines, excerpt, signals, rank, score} (score "
             "on the reply's score_scale); fetch an id for the full text. A plain-text query goes "
             "to every layer in its own reading; {layer: query} gives named layers their own "
             "form. " + layer_forms(), SearchIn),
    ToolSpec("fetch", "Full text of a search hit id ('3fa9c1d2e4b5:120-480') or a tool item id "
             "('t3fa9c1d2e4b5:4', ':2-5' items, ':L10-20' lines, or 't3fa9c1d2e4b5' whole).", FetchIn),
    ToolSpec("inventory", "Every unit (file) in the root, no relevance match; paged.", InventoryIn),
    ToolSpec("run_tool", "Run an allow-listed read-only command inside the root: 'command' is "
             "its argv list (the program, then each argument; no shell line); the full output is "
             "cached and a filtered view with item ids is returned. Fetch an item id for its "
             "full text.", RunToolIn),
    ToolSpec("build", "Let the lazily built layers index for up to timebox seconds. With "
             "generator, build the derived layer (texts written about each file, searched with "
             "layers=['derived']) with the MCP client's own model through sampling ('client') "
             "or offline rules ('extractive').", BuildIn),
)
SPEC_BY_NAME = {s.name: s for s in SPECS}

__all__ = ["SPECS", "SPEC_BY_NAME", "BuildIn", "FetchIn", "InventoryIn", "RunToolIn", "SearchIn",
           "StatusIn", "layer_forms"]
