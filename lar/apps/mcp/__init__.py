"""The MCP server (``lar mcp --root DIR``): tools status, search, fetch, inventory, run_tool and
build over stdio (``build(generator="client")`` derives texts with the client's model when it
offers sampling). ``LarTools`` holds the tools without the SDK; ``serve`` runs them with it
(the optional ``mcp`` package: ``pip install 'lar[agent]'``). See docs/agents.md."""
from __future__ import annotations

from lar.apps.mcp.args import ToolArgumentError
from lar.apps.mcp.inputs import SPECS
from lar.apps.mcp.tools import (ClientGenerator, LarTools, Reply, SamplingUnavailableError,
                                UnknownToolError)


def serve(*args, **kwargs) -> None:
    """Serve a root over stdio (see ``lar.apps.mcp.server.serve``)."""
    from lar.apps.mcp.server import serve as _serve

    _serve(*args, **kwargs)


__all__ = ["SPECS", "ClientGenerator", "LarTools", "Reply", "SamplingUnavailableError",
           "ToolArgumentError", "UnknownToolError", "serve"]
