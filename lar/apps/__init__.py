"""Applications on top of the engine: the CLI, the demo, the MCP server, the tool-output cache
and the screening route. Nothing in the core or the engine imports these."""
