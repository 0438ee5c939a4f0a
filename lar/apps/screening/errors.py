"""Typed errors of the screening route. Each says what was wrong and what to do about it."""
from __future__ import annotations

from lar.core.errors import ConfigError, LarError


class ScreeningError(LarError):
    """Base class of the errors the screening route raises on purpose."""


class ScreeningConfigError(ScreeningError, ConfigError):
    """An argument of ``screen()`` is invalid, or contradicts the run being resumed."""


class CandidateError(ScreeningError, ValueError):
    """A ``ScreenCandidate`` or ``Unknown`` was built with values of the wrong kind."""


class RunNotFoundError(ScreeningError, KeyError):
    """No screening run of that name exists in the engine's state folder."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class RunLockedError(ScreeningError, TimeoutError):
    """Another process (or thread) is screening the same run right now."""


class CorruptRunError(ScreeningError):
    """A run's record file is unreadable or was written by a newer lar."""


class ScreenerFailedError(ScreeningError, RuntimeError):
    """Raised by ``screen(..., stop_on_error=True)`` after a batch failed (it is recorded first)."""

    def __init__(self, run: str, batch: int, error: str):
        self.run = run
        self.batch = batch
        self.error = error
        super().__init__(
            f"batch {batch} of screening run {run!r} failed: {error}. It is recorded as failed; "
            f"fix the screener, then resume with screen(engine, screener, run={run!r}, "
            "retry_failed=True)")
