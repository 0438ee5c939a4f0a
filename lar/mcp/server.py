"""``lar mcp``: the tools of ``lar.mcp.tools`` served over stdio with the MCP Python SDK
(low-level ``Server``; every tool result is one text block of compact JSON, ``isError`` set on a
tool error)."""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from ..errors import require
from .tools import SPECS, LarTools

INSTRUCTIONS = (
    "lar searches the folder it serves. search returns hits {id, path, lines, excerpt, signals}; "
    "fetch(id) returns a hit's full text. run_tool runs an allow-listed read-only command "
    "(argv list, no shell) and returns a filtered view whose items have ids (t<key>:<n>); fetch "
    "an item id, a range 't<key>:2-5' or lines 't<key>:L10-40' for the full text. Nothing is "
    "lost by filtering: anything left out of a view can be fetched.")


def build_server(tools: LarTools):
    """The low-level MCP ``Server`` for ``tools`` (not yet running)."""
    require("mcp", "agent")
    import anyio
    import anyio.to_thread
    from mcp import types
    from mcp.server.lowlevel import Server

    import lar

    listed = [types.Tool(name=s.name, description=s.description, input_schema=s.input_schema())
              for s in SPECS]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        reply = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=reply.text)],
                                    is_error=not reply.ok)

    return Server("lar", version=lar.__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(root: str | os.PathLike, *, state: str | os.PathLike | None = None,
          allowed_commands: Sequence[str] | None = None, config: Mapping[str, Any] | None = None,
          layers: Sequence[str] | None = None) -> None:
    """Serve ``root`` over stdio until the client closes the connection."""
    require("mcp", "agent")
    import anyio
    from mcp.server.stdio import stdio_server

    tools = LarTools(root, state=state, allowed_commands=allowed_commands, config=config,
                     layers=layers)
    server = build_server(tools)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        tools.close()
