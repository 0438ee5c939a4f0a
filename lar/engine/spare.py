"""Building in a search's spare time, and the coverage a building layer's run reports.

A search whose layers answered before its deadline spends what is left (less the share kept
for enrichment, ``SPARE_RESERVE``) building the units that matter for its query
(``Builder.spare``: the cheap layers' candidates first). The search returns at its deadline even
if a unit is still being built: that unit finishes in the builder's thread and the next call
reuses it.

With nothing to build the check is O(1): a layer whose whole live scope was found built is
remembered with its stamp (the file index's sequence number and the layer's ``build_stamp``),
and while every chosen layer's stamp is unchanged a search goes straight on, with no thread hop
and no pass over the units (:class:`IdleLayers`).
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


class IdleLayers:
    """The building layers known to have nothing to build in spare time, each with the stamp it
    was seen idle at: ``(builder, file index sequence, layer.build_stamp(), model loaded)``.
    The stamps are read on the search's thread (a layer's stamp is comparable on one thread)."""

    def __init__(self):
        self._idle: dict[tuple[int, str], Any] = {}

    @staticmethod
    def stamps(builder: Any, names: Sequence[str]) -> dict[str, Any]:
        """Each named layer's stamp now (None: the layer has none, it is always looked at)."""
        layers = dict(builder.layers(names))
        seq = builder.ctx.index.max_seq()
        out: dict[str, Any] = {}
        for n in names:
            layer = layers.get(n)
            stamp = layer.build_stamp() if layer is not None else None
            out[n] = None if stamp is None else (id(builder), seq, stamp, builder.loaded(n, layer))
        return out

    def all_idle(self, stamps: Mapping[str, Any]) -> bool:
        me = threading.get_ident()
        return all(s is not None and self._idle.get((me, n)) == s for n, s in stamps.items())

    def note(self, stamps: Mapping[str, Any], idle: Sequence[str]) -> None:
        me = threading.get_ident()
        for n in idle:
            if stamps.get(n) is not None:
                self._idle[(me, n)] = stamps[n]


def idle_layers(builder: Any, names: Sequence[str]) -> list[str]:
    """Of ``names``, the layers spare time has nothing to build for: every live unit built, or a
    model layer whose model is not loaded yet (spare time never loads one, ``Builder.loaded``)."""
    units = builder.ctx.scope_view(None).units()
    return [n for n, layer in builder.layers(names)
            if not builder.loaded(n, layer) or not layer.pending(units)]


class SpareBuild:
    """One worker thread that builds for searches (``builder().spare(names, deadline, cancel)``;
    ``builder`` gives the engine's current builder, which a new state folder replaces)."""

    def __init__(self, builder: Callable[[], Any]):
        self._builder = builder
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                           thread_name_prefix="lar-spare")
        self.idle = IdleLayers()
        self._looked: dict[tuple[int, str], Any] = {}  # the stamp each layer was last looked at

    async def run(self, chosen: Sequence[tuple[str, BaseLayer]], deadline: float) -> None:
        """Build the chosen building layers' units for this search until ``deadline``."""
        names = [n for n, l in chosen if not l.always_current]
        if not names or deadline - time.monotonic() < SPARE_MIN_S:
            return
        builder = self._builder()
        try:
            stamps = self.idle.stamps(builder, names)
        except Exception:  # a stamp is an optimisation: look at the units as before
            stamps = dict.fromkeys(names)
        if self.idle.all_idle(stamps):
            return
        # look for idle layers (a pass over the units) once per stamp, not on every search
        me = threading.get_ident()
        look = [n for n, s in stamps.items() if s is not None and self._looked.get((me, n)) != s]
        cancel = threading.Event()
        job = asyncio.get_running_loop().run_in_executor(
            self._pool, self._work, builder, names, look, deadline, cancel)
        try:
            idle = await asyncio.wait_for(asyncio.shield(job),
                                          timeout=max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            cancel.set()
        except Exception:  # building is a courtesy of spare time; never fail a search on it
            cancel.set()
        else:
            for n in look:
                self._looked[(me, n)] = stamps[n]
            self.idle.note(stamps, idle)

    @staticmethod
    def _work(builder: Any, names: Sequence[str], look: Sequence[str], deadline: float,
              cancel: threading.Event) -> list[str]:
        """The spare build; then, when it built nothing and was not stopped, which of ``look``
        have nothing to build."""
        built = builder.spare(names, deadline, cancel)
        if built or not look or cancel.is_set() or builder.cancel_spare.is_set():
            return []
        return idle_layers(builder, look)

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

