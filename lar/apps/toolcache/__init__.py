"""The two-stage tool-output cache (spec 4.5): run any command or Python callable once, keep
its full output, hand back a deterministic filtered view with an id per item, and fetch any
item or line range in full later. Whether an item was filtered or never requested makes no
difference to the caller. Cached outputs are a corpus like any other (``ToolCache.engine()``).

    from lar.apps.toolcache import ToolCache
    tc = ToolCache(".lar/tools")
    view = tc.run(["rg", "-n", "TODO", "src"])
    print(view.text)                 # items with ids such as t3fa9c1d2e4b5:2
    tc.fetch("t3fa9c1d2e4b5:2").text # the whole item; ":L10-20" for lines

The view format and the id format are documented in ``lar.apps.toolcache.view``; the guard used by
the MCP server (allow-list, path checks, withheld lines) in ``lar.apps.toolcache.security``.
"""
from __future__ import annotations

from lar.apps.toolcache.cache import DEFAULT_ENV_KEYS, ToolCache
from lar.apps.toolcache.errors import (OutOfScopeError, ToolCacheError, ToolIdError, ToolNotAllowedError,
                     ToolRunError, ToolTimeoutError)
from lar.apps.toolcache.security import DEFAULT_ALLOWED, GIT_SUBCOMMANDS, Guard
from lar.apps.toolcache.store import ToolRecord
from lar.apps.toolcache.ids import ToolFetched, ToolId, is_tool_id, parse_tool_id
from lar.apps.toolcache.view import ITEM_MAX_LINES, ToolView, ViewItem, count_tokens

__all__ = [
    "DEFAULT_ALLOWED", "DEFAULT_ENV_KEYS", "GIT_SUBCOMMANDS", "Guard", "ITEM_MAX_LINES",
    "OutOfScopeError", "ToolCache", "ToolCacheError", "ToolFetched", "ToolId", "ToolIdError",
    "ToolNotAllowedError", "ToolRecord", "ToolRunError", "ToolTimeoutError", "ToolView",
    "ViewItem", "count_tokens", "is_tool_id", "parse_tool_id",
]
