"""The private asyncio loop the engine runs searches on, in a daemon thread (so the same sync API
works in a script and inside a Jupyter kernel, whose own loop is already running)."""
from __future__ import annotations

import asyncio
import threading

from lar.engine import childwatch


class LoopThread:
    """A private asyncio loop running in a daemon thread."""

    def __init__(self) -> None:
        childwatch.install()  # its children are ripgrep's: see lar.engine.childwatch
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lar-loop", daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()
