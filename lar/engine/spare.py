"""Building in a search's spare time, and the coverage a building layer's run reports.

A search whose layers answered before its deadline spends what is left (less the share kept
for enrichment, ``SPARE_RESERVE``) building the units that matter for its query
(``Builder.spare``: the cheap layers' candidates first). The search returns at its deadline even
if a unit is still being built: that unit finishes in the builder's thread and the next call
reuses it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from lar.core.layer import BaseLayer, ScopeView
from lar.core.types import LayerRun, RunState

# a search builds in its spare time until this fraction of its timebox is left (enrichment's share)
SPARE_RESERVE = 0.1
# spare time shorter than this is not worth starting a build for
SPARE_MIN_S = 0.01


class SpareBuild:
    """One worker thread that builds for searches (``builder().spare(names, deadline, cancel)``;
    ``builder`` gives the engine's current builder, which a new state folder replaces)."""

    def __init__(self, builder: Callable[[], Any]):
        self._builder = builder
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                           thread_name_prefix="lar-spare")

    async def run(self, chosen: Sequence[tuple[str, BaseLayer]], deadline: float) -> None:
        """Build the chosen building layers' units for this search until ``deadline``."""
        names = [n for n, l in chosen if not l.always_current]
        if not names or deadline - time.monotonic() < SPARE_MIN_S:
            return
        cancel = threading.Event()
        job = asyncio.get_running_loop().run_in_executor(
            self._pool, self._builder().spare, names, deadline, cancel)
        try:
            await asyncio.wait_for(asyncio.shield(job), timeout=max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            cancel.set()
        except Exception:  # building is a courtesy of spare time; never fail a search on it
            cancel.set()

    def close(self) -> None:
        self._builder().cancel_spare.set()
        self._pool.shutdown(wait=True)


def coverage_reasons(runs: Sequence[LayerRun], layers: Mapping[str, BaseLayer], view: ScopeView,
                     background: bool) -> tuple[LayerRun, ...]:
    """Runs of building layers that answered from part of the scope say so in their reason:
    how much is built, of how many units, and what builds the rest."""
    out = []
    for r in runs:
        layer = layers.get(r.name)
        if (layer is not None and not layer.always_current and r.coverage is not None
                and r.coverage < 1.0 and r.state in (RunState.RAN, RunState.ABORTED)):
            n = applicable_count(layer, view)
            how = ("building in the background" if background else
                   "searches build it in their spare time; run `lar build` (eng.build()) to finish")
            note = f"built {100 * r.coverage:.0f} % of {n:,} units; {how}"
            r = replace(r, reason=f"{r.reason}; {note}" if r.reason else note)
        out.append(r)
    return tuple(out)


def applicable_count(layer: BaseLayer, view: ScopeView) -> int:
    try:
        return len(layer.applicable(view))
    except Exception:  # a count for a message; never fail a call on it
        return 0

