"""Typed errors of the evaluation harness. Each is a ``lar.core.errors.LarError``, so the ``lar`` and
``python -m lar_evals`` commands print it as one line and exit with status 2."""
from __future__ import annotations

from lar.core.errors import LarError


class EvalError(LarError):
    """Base class of every error the harness raises on purpose."""


class EvalDataError(EvalError, ValueError):
    """A data file is missing or malformed; the message names the file and the 1-based line."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}, line {line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


class EvalConfigError(EvalError, ValueError):
    """An option of the harness is invalid (unknown metric, fusion policy, bad timebox list)."""


__all__ = ["EvalConfigError", "EvalDataError", "EvalError"]
