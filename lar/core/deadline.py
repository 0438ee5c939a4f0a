"""The work deadline of the call in progress, for work that cannot be cancelled from outside.

A search cancels its layers' tasks at its deadline, and a build stops between units; but the
work a layer hands to a thread (an encoder's batches, waiting for the writer lock) goes on after
its task is cancelled: it then holds a core, keeps the process from exiting (interpreter exit
joins worker threads) and overruns ``build --timebox``. So the caller sets a *work limit* (a
deadline and/or a cancel event) in a context variable with :func:`work_limit`, and long-running
loops call :func:`check` between steps (an encoder between batches) or bound their waits with
:func:`remaining`. ``asyncio.to_thread`` copies the context, so a layer's thread sees the
search's limit; threads started otherwise set their own (the builder does, per unit).

Limits nest: an inner limit never extends an outer one (the earlier deadline holds, and either
cancel event stops the work).
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence, Union

from lar.core.errors import DeadlineExceeded

__all__ = ["WorkLimit", "check", "current", "expired", "remaining", "work_limit"]


Cancels = Union[threading.Event, Sequence[Optional[threading.Event]], None]


@dataclass(frozen=True)
class WorkLimit:
    """A deadline (``time.monotonic()`` seconds; None: none) and cancel events (any set stops)."""

    deadline: float | None = None
    cancels: tuple[threading.Event, ...] = ()

    def left(self) -> float:
        """Seconds left (``inf`` without a deadline, 0 when cancelled)."""
        if any(e.is_set() for e in self.cancels):
            return 0.0
        if self.deadline is None:
            return float("inf")
        return max(0.0, self.deadline - time.monotonic())

    def joined(self, deadline: float | None, cancel: "Cancels" = None) -> "WorkLimit":
        """This limit narrowed by ``deadline`` and ``cancel`` (an event or several)."""
        d = self.deadline if deadline is None else (
            deadline if self.deadline is None else min(self.deadline, deadline))
        more = () if cancel is None else (cancel,) if isinstance(cancel, threading.Event) \
            else tuple(c for c in cancel if c is not None)
        return WorkLimit(d, self.cancels + more)


_LIMIT: contextvars.ContextVar[WorkLimit] = contextvars.ContextVar("lar_work_limit",
                                                                   default=WorkLimit())


@contextlib.contextmanager
def work_limit(deadline: float | None = None, cancel: "Cancels" = None) -> Iterator[WorkLimit]:
    """Run the block under ``deadline`` (monotonic seconds) and ``cancel`` (an event, or a
    sequence of events: any one set ends the work), narrowing any limit already in force."""
    token = _LIMIT.set(_LIMIT.get().joined(deadline, cancel))
    try:
        yield _LIMIT.get()
    finally:
        _LIMIT.reset(token)


def current() -> WorkLimit:
    """The limit in force (``WorkLimit()``, no limit, outside any :func:`work_limit`)."""
    return _LIMIT.get()


def remaining(cap: float) -> float:
    """Seconds a wait may last: ``cap``, or less when the work limit ends sooner (>= 0)."""
    return max(0.0, min(float(cap), _LIMIT.get().left()))


def expired() -> bool:
    """Whether the work limit in force has ended (its deadline passed or it was cancelled)."""
    return _LIMIT.get().left() <= 0.0


def check(what: str = "the work") -> None:
    """Raise :class:`DeadlineExceeded` when the work limit in force has ended."""
    lim = _LIMIT.get()
    if lim.left() <= 0.0:
        why = "was cancelled" if any(e.is_set() for e in lim.cancels) else "passed its deadline"
        raise DeadlineExceeded(f"{what} {why} and was abandoned; nothing of it was stored")
