"""Typed errors of the tool-output cache. Each message says what was wrong and what to do."""
from __future__ import annotations

from lar.core.errors import LarError


class ToolCacheError(LarError):
    """Base class of the tool cache's errors."""


class ToolNotAllowedError(ToolCacheError, PermissionError):
    """The command is not on the allow-list, or uses a refused option or path."""


class ToolTimeoutError(ToolCacheError, TimeoutError):
    """The command (or callable) did not finish within its timeout; nothing was cached."""


class ToolRunError(ToolCacheError, RuntimeError):
    """The command could not be started, or a callable returned something that is not text."""


class ToolIdError(ToolCacheError, KeyError):
    """A tool id is malformed, names no cached output, or names items/lines it does not have."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class OutOfScopeError(ToolCacheError, PermissionError):
    """A cached output was not produced inside the configured root, so it is not served."""
