"""Typed errors of the notebook workbench. Each message says what to do next."""
from __future__ import annotations

from lar.core.errors import LarError


class MagicError(LarError):
    """A ``%lar`` magic or a widget could not do what was asked."""


class MagicUsageError(MagicError):
    """A magic got a flag or argument it does not know; ``usage`` is the magic's usage line."""

    def __init__(self, message: str, usage: str = ""):
        self.usage = usage.strip()
        super().__init__(message)


class NoEngineError(MagicError):
    """A magic or widget needs an engine and none is open in this notebook."""

    def __init__(self) -> None:
        super().__init__(
            "no lar engine is open in this notebook; open one with `%lar open PATH` "
            "(or `%lar open --demo` for the demo corpus), or attach an engine you made with "
            "`lar_magics.use(engine)`")


class ViewUnavailableError(MagicError):
    """A view (explain, replay) is not installed or cannot be built here."""


__all__ = ["MagicError", "MagicUsageError", "NoEngineError", "ViewUnavailableError"]
