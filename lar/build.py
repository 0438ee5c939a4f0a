"""Catching building layers up with the file index, under a timebox.

Each layer keeps a cursor (layer version, seq) in the file index. A new layer version restarts
from seq 0. Changes are handed over in small batches of units; the cursor advances only after a
batch's ``build`` returns, so an abort loses at most the batch in progress (layers write each
unit atomically). Always-current layers (``always_current = True``) have nothing to build.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from .layer import Unit

BATCH_UNITS = 16


async def run_build(engine, timebox: float) -> dict[str, Any]:
    t0 = time.monotonic()
    deadline = t0 + timebox
    cancel = threading.Event()
    report: dict[str, Any] = {"timebox": timebox, "layers": {}}
    for name, layer in engine.layers.items():
        if getattr(layer, "always_current", True):
            report["layers"][name] = {"state": "skipped", "reason": "always current: nothing to build"}
            continue
        cur = engine.index.get_cursor(name)
        seq = cur[1] if cur and cur[0] == layer.version else 0
        changes = [r for r in engine.index.changes_since(seq) if not r.deleted and r.hash]
        done, state = 0, "ran"
        for i in range(0, len(changes), BATCH_UNITS):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                state = "aborted"
                break
            batch = changes[i:i + BATCH_UNITS]
            units = [Unit(r.path, r.hash, r.size, r.mtime_ns) for r in batch]
            try:
                await asyncio.wait_for(layer.build(units, cancel), timeout=remaining)
            except asyncio.TimeoutError:
                cancel.set()
                state = "aborted"
                break
            engine.index.set_cursor(name, layer.version, batch[-1].seq)
            done += len(batch)
        report["layers"][name] = {"state": state, "units": done, "pending": len(changes) - done}
    report["elapsed"] = time.monotonic() - t0
    return report
