"""Lazy building: which units each building layer indexes next, and when.

Priority (seed section 8): the units of the last request's candidates and of fetched hits first,
then the rest of the scope by usage (hits and fetches recorded in the file index), then the
rest. ``run(timebox)`` builds in the caller's thread; ``start_background()`` builds in a daemon
thread (in-process, so it works inside a Jupyter kernel) that pauses while a search runs and
stops cleanly. Every unit is one atomic step: stopping loses at most the unit in progress.

The builder sees the engine through a narrow :class:`BuildContext` (the layers, scope views,
the file index, recent fetches and the idle signal), and builds every layer through the
protocol's parts (``pending``, ``build_one`` — by default the protocol's ``build`` —,
``collect_garbage``, ``coverage``); after a complete pass it moves the layer's change cursor
in the file index, which is what feeds a protocol-only layer's next pass.

``spare(names, deadline, cancel)`` is a search's spare time: what is left of its timebox after
its layers answered goes to the units its candidates came from (every selected building layer,
unit by unit), then to the rest of each layer, the layers sharing the time equally. It starts a
unit only when the layer's measured time per unit fits before the deadline, and it builds a
model layer only once that layer has built a unit in this process (its model is loaded):
loading a model takes seconds, which a search's timebox does not have (the background builder
or ``eng.build`` loads it).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from lar.core.layer import BaseLayer, ScopeView, Unit

if TYPE_CHECKING:
    from lar.store.fileindex import FileIndex


@dataclass(frozen=True)
class BuildContext:
    """What the builder may use of the engine, and nothing else."""

    layers: Callable[[], Mapping[str, BaseLayer]]
    scope_view: Callable[[Any], ScopeView]
    index: "FileIndex"
    recent_fetches: Callable[[], Sequence[str]]
    idle: threading.Event


class Builder:
    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        self.recent: list[str] = []  # hashes of the last request's candidates (best first)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.built_in_background = 0
        self.built_in_spare_time = 0
        self.unit_seconds: dict[str, float] = {}  # per layer: moving average of one unit's build
        self._spare_lock = threading.Lock()
        self.cancel_spare = threading.Event()  # set when the engine closes

    # -- what to build ----------------------------------------------------------------------
    def layers(self, names: Iterable[str] | None = None) -> list[tuple[str, Any]]:
        chosen = [(n, l) for n, l in self.ctx.layers().items()
                  if not getattr(l, "always_current", True) and (names is None or n in names)]
        return sorted(chosen, key=lambda t: getattr(t[1], "cost_rank", 50))

    def note_request(self, hashes: Iterable[str]) -> None:
        self.recent = list(dict.fromkeys(hashes))
        self._wake.set()

    def order(self, units: list[Unit]) -> list[Unit]:
        pri = {h: i for i, h in enumerate(self.recent)}
        for i, h in enumerate(reversed(list(self.ctx.recent_fetches())[-200:])):
            pri.setdefault(h, -1 - i)  # fetched units outrank candidates
        usage = self.ctx.index.usage()

        def key(u: Unit):
            if u.hash in pri:
                return (0, pri[u.hash], u.path)
            hits, fetches, _ = usage.get(u.hash, (0, 0, 0.0))
            return (1, -(hits + 3 * fetches), u.path)

        return sorted(units, key=key)

    def plan(self, layer, scope: Any = None) -> list[Unit]:
        view = self.ctx.scope_view(scope)
        return self.order(layer.pending(view.units()))

    def build_unit(self, name: str, layer, unit: Unit) -> str:
        """Build one unit and keep the layer's time per unit (what spare time plans with)."""
        t0 = time.monotonic()
        state = layer.build_one(unit)
        dt = time.monotonic() - t0
        old = self.unit_seconds.get(name)
        self.unit_seconds[name] = dt if old is None else 0.8 * old + 0.2 * dt
        return state

    def loaded(self, name: str, layer) -> bool:
        """Whether ``layer`` can build a unit without first loading a model: it has no model
        (no ``warm``), or it already built a unit in this process."""
        from lar.core.layer import implements

        return name in self.unit_seconds or not implements(layer, "warm")

    # -- a search's spare time --------------------------------------------------------------
    def spare(self, names: Iterable[str], deadline: float,
              cancel: threading.Event | None = None) -> int:
        """Build what matters for the last request until ``deadline`` (monotonic): the units of
        its candidates in every layer named, then each layer's other pending units in
        priority order. Returns the number of units built."""
        cancel = cancel or threading.Event()
        if not self._spare_lock.acquire(blocking=False):
            return 0  # an earlier search's spare build is still finishing its unit
        try:
            chosen = [(n, l) for n, l in self.layers(names) if self.loaded(n, l)]
            if not chosen:
                return 0
            units = self.ctx.scope_view(None).units()
            recent = set(self.recent)
            first = [u for u in units if u.hash in recent]
            built = 0

            def fits(name: str) -> bool:
                est = self.unit_seconds.get(name, 0.0)
                return (not cancel.is_set() and not self.cancel_spare.is_set()
                        and time.monotonic() + est < deadline)

            # the candidates' units first, then the rest; the layers share the time equally
            # (the one that has spent least builds next), so a slow layer does not starve the rest
            for stage in (lambda l: self.order(l.pending(first)), self.plan):
                queues = {name: deque(todo) for name, todo in ((n, stage(l)) for n, l in chosen)
                          if todo}
                spent = dict.fromkeys(queues, 0.0)
                layer_of = dict(chosen)
                while queues:
                    name = min(queues, key=lambda n: spent[n])
                    if not fits(name):
                        del queues[name]
                        continue
                    unit = queues[name].popleft()
                    if not queues[name]:
                        del queues[name]
                    t = time.monotonic()
                    self.build_unit(name, layer_of[name], unit)
                    spent[name] += time.monotonic() - t
                    built += 1
            self.built_in_spare_time += built
            return built
        finally:
            self._spare_lock.release()

    # -- building now -----------------------------------------------------------------------
    def run(self, timebox: float, layers: Iterable[str] | None = None, scope: Any = None,
            cancel: threading.Event | None = None, progress=None, executor=None) -> dict[str, Any]:
        """Build until ``timebox`` seconds are spent or every layer caught up. ``progress``
        (optional) is called as ``progress(layer, done, total)`` when a layer starts (done 0)
        and after each of its units. ``executor`` (optional, e.g.
        ``lar.distributed.ray_build.RayExecutor``) builds the layers it accepts elsewhere."""
        t0 = time.monotonic()
        deadline = t0 + timebox
        cancel = cancel or threading.Event()
        report: dict[str, Any] = {"timebox": timebox, "layers": {}}
        live = {u.hash for u in self.ctx.scope_view(None).units()}
        for name, layer in self.layers(layers):
            counts = {"ok": 0, "skipped": 0, "failed": 0}
            view = self.ctx.scope_view(scope)
            if not layer.applies(view):  # e.g. a model layer with no model configured
                report["layers"][name] = {"state": "skipped", **counts, "pending": 0,
                                          "coverage": 0.0,
                                          "reason": layer.why_not(view) or "does not apply here"}
                continue
            seq = self.ctx.index.max_seq()  # the cursor a complete pass may move to
            todo = self.plan(layer, scope)
            state = "ran"
            if progress is not None:
                progress(name, 0, len(todo))
            extra: dict[str, Any] = {}
            if executor is not None and todo and executor.accepts(layer):
                def tally(st: str, name=name, n=len(todo)) -> None:
                    counts[st] += 1
                    if progress is not None:
                        progress(name, sum(counts.values()), n)

                state, extra = executor.build(layer, todo, deadline, cancel, tally)
            here = () if extra else todo  # what the executor built is done
            for i, u in enumerate(here, 1):
                if time.monotonic() >= deadline or cancel.is_set():
                    state = "aborted"
                    break
                counts[self.build_unit(name, layer, u)] += 1
                if progress is not None:
                    progress(name, i, len(todo))
            done = sum(counts.values())
            if done == len(todo):
                layer.collect_garbage(live)
                self.ctx.index.set_cursor(name, layer.build_version, seq)
            report["layers"][name] = {"state": state, **counts, "pending": len(todo) - done,
                                      "coverage": round(layer.coverage(self.ctx.scope_view(scope)), 4),
                                      **extra}
        report["elapsed"] = time.monotonic() - t0
        return report

    def build_changed(self, layer, paths: Iterable[str], deadline: float) -> int:
        """Index the units of just-changed ``paths`` now (the edit-to-search path)."""
        recs = self.ctx.index.get_many(list(paths))
        units = [Unit(r.path, r.hash, r.size, r.mtime_ns) for r in recs.values() if not r.deleted]
        n = 0
        for u in layer.pending(units):
            if time.monotonic() >= deadline:
                break
            self.build_unit(layer.name, layer, u)
            n += 1
        return n

    # -- in the background ------------------------------------------------------------------
    def start_background(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="lar-builder", daemon=True)
        self._thread.start()

    def stop_background(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _next(self):
        for name, layer in self.layers():
            todo = self.plan(layer)
            if todo:
                return name, layer, todo[0]
        return None

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.ctx.idle.wait(timeout=0.5):  # a search is running: yield to it
                continue
            try:
                nxt = self._next()
            except Exception:  # the engine is closing or the index is busy: try again later
                nxt = None
            if nxt is None:
                self._wake.clear()
                self._wake.wait(timeout=2.0)
                continue
            name, layer, unit = nxt
            self.build_unit(name, layer, unit)
            self.built_in_background += 1
