"""The asyncio child watcher's false alarm ("Unknown child process pid N") is dropped once an
engine's loop exists; every other asyncio record still gets through (lar.engine.childwatch)."""
from __future__ import annotations

import inspect
import logging

from lar.engine import childwatch
from lar.engine.loop import LoopThread


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def test_the_message_is_cpythons_own():
    import asyncio.unix_events as ue

    assert f'"{childwatch.MESSAGE}"' in inspect.getsource(ue)  # the text the filter matches


def test_the_loop_installs_the_filter_which_drops_only_that_message():
    loop = LoopThread()
    try:
        logger = logging.getLogger("asyncio")
        assert sum(isinstance(f, childwatch.UnknownChildFilter) for f in logger.filters) == 1
        assert childwatch.install() is childwatch.install()  # once, whoever asks
        handler = Collect()
        logger.addHandler(handler)
        try:
            logger.warning(childwatch.MESSAGE, 4242)
            logger.warning("Loop %r that handles pid %r is closed", "loop", 4242)
        finally:
            logger.removeHandler(handler)
        assert handler.records == ["Loop 'loop' that handles pid 4242 is closed"]
    finally:
        loop.close()
