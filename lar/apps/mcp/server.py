"""``lar mcp``: the tools of ``lar.apps.mcp.tools`` served over stdio with the MCP Python SDK
(low-level ``Server``; every tool result is one text block of compact JSON, ``isError`` set on a
tool error; the tools of ``lar.apps.mcp.outputs`` declare an ``outputSchema`` and return the same
JSON as ``structuredContent``). Each tool call runs in a worker thread with a ``SessionSampler``: when the client
declared the sampling capability, ``build(generator="client")`` reaches the client's model
through the request's session (``create_message``, run on the event loop from the worker)."""
from __future__ import annotations

import functools
import json
import os
import warnings
from typing import Any, Mapping, Sequence

from lar.core.errors import require
from lar.apps.mcp.inputs import SPECS
from lar.apps.mcp.tools import LarTools, SamplingUnavailableError

SAMPLE_TIMEOUT_S = 300.0
SAMPLE_SYSTEM = ("You write short search aids for a file index: plain lines starting SUMMARY: or "
                 "QUESTION:, nothing else.")


class SessionSampler:
    """The MCP client of one tool call: ``sample`` asks the client's model (MCP sampling) from a
    worker thread and waits for the reply on the server's event loop (``token``)."""

    def __init__(self, session: Any, token: Any, request_id: Any = None):
        from mcp import types

        self.session, self.token, self.request_id = session, token, request_id
        try:
            self.offers_sampling = bool(session.check_client_capability(
                types.ClientCapabilities(sampling=types.SamplingCapability())))
        except Exception:
            self.offers_sampling = False

    async def _create(self, prompt: str, max_tokens: int) -> Any:
        import anyio
        from mcp import types

        msg = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        with anyio.fail_after(SAMPLE_TIMEOUT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the SDK marks sampling deprecated (SEP-2577)
            return await self.session.create_message(
                [msg], max_tokens=max_tokens, system_prompt=SAMPLE_SYSTEM, temperature=0.0,
                related_request_id=self.request_id)

    def sample(self, prompt: str, max_tokens: int) -> tuple[str, str]:
        import anyio.from_thread

        if not self.offers_sampling:
            raise SamplingUnavailableError("the MCP client did not declare the sampling capability")
        try:
            res = anyio.from_thread.run(self._create, prompt, max_tokens, token=self.token)
        except TimeoutError:
            raise SamplingUnavailableError(f"the MCP client's model did not answer a sampling "
                                           f"request within {SAMPLE_TIMEOUT_S:g} s") from None
        except Exception as exc:
            raise SamplingUnavailableError(f"the MCP client refused or failed a sampling request: "
                                           f"{type(exc).__name__}: {exc}") from None
        content = res.content if isinstance(res.content, list) else [res.content]
        text = "\n".join(c.text for c in content if getattr(c, "type", None) == "text")
        model = (res.model or "").strip() or "unknown-client-model"
        return text, model

INSTRUCTIONS = (
    "lar searches the folder it serves. search returns hits {id, path, lines, excerpt, signals}; "
    "fetch(id) returns a hit's full text. run_tool runs an allow-listed read-only command "
    "(argv list, no shell) and returns a filtered view whose items have ids (t<key>:<n>); fetch "
    "an item id, a range 't<key>:2-5' or lines 't<key>:L10-40' for the full text. Nothing is "
    "lost by filtering: anything left out of a view can be fetched. build(generator='client') "
    "writes derived texts (summaries, questions) with your own model through sampling, for "
    "search with layers=['derived'] ('extractive': offline, no model).")


def build_server(tools: LarTools):
    """The low-level MCP ``Server`` for ``tools`` (not yet running)."""
    require("mcp", "agent")
    import anyio
    import anyio.lowlevel
    import anyio.to_thread
    from mcp import types
    from mcp.server.lowlevel import Server

    import lar

    from lar.apps.mcp.outputs import output_schema

    listed = [types.Tool(name=s.name, description=s.description, input_schema=s.input_schema(),
                         output_schema=output_schema(s.name))
              for s in SPECS]
    structured = {s.name for s in SPECS if output_schema(s.name) is not None}

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: Any) -> Any:
        sampler = SessionSampler(ctx.session, anyio.lowlevel.current_token(),
                                 getattr(ctx, "request_id", None))
        reply = await anyio.to_thread.run_sync(
            functools.partial(tools.call, params.name, params.arguments, client=sampler))
        body = json.loads(reply.text) if reply.ok and params.name in structured else None
        return types.CallToolResult(content=[types.TextContent(text=reply.text)],
                                    structured_content=body, is_error=not reply.ok)

    return Server("lar", version=lar.__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(root: str | os.PathLike, *, state: str | os.PathLike | None = None,
          allowed_commands: Sequence[str] | None = None, config: Mapping[str, Any] | None = None,
          layers: Sequence[str] | None = None, background: bool | None = None) -> None:
    """Serve ``root`` over stdio until the client closes the connection. The engine builds in
    the background (yielding to searches) unless ``background=False`` or the environment sets
    ``LAR_BACKGROUND_BUILD=0``."""
    require("mcp", "agent")
    import anyio
    from mcp.server.stdio import stdio_server

    from lar.engine.settings import interactive_background

    tools = LarTools(root, state=state, allowed_commands=allowed_commands, config=config,
                     layers=layers,
                     background=interactive_background() if background is None else background)
    server = build_server(tools)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        tools.close()
