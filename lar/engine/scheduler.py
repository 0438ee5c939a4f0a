"""Lazy building: which units each building layer indexes next, and when.

Priority (seed section 8): the units of the last request's candidates and of fetched hits first,
then the rest of the scope by usage (hits and fetches recorded in the file index), then the
rest. ``run(timebox)`` builds in the caller's thread; ``start_background()`` builds in a daemon
thread (in-process, so it works inside a Jupyter kernel) that pauses while a search runs and
stops cleanly. Every unit is one atomic step: stopping loses at most the unit in progress (or,
for a layer whose encoder pass serves a batch of units, ``lar.engine.batching``, that batch's
pass: its units stay pending).

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

from lar.core.deadline import work_limit
from lar.core.errors import DeadlineExceeded
from lar.core.layer import BaseLayer, ScopeView, Unit
from lar.engine import collector
from lar.engine.batching import (BACKGROUND_BATCH_UNITS, PassRate, batches, can_prepare,
                                 fitted_batches, prepare)
from lar.engine.share import BuildShare
from lar.engine.warmup import LOADING_REASON, load_within

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


def repair_count(layer) -> int:
    """How many damaged files of ``layer`` were set aside so far (0 for a layer without)."""
    repairs = getattr(layer, "repairs", None)
    return len(repairs()) if callable(repairs) else 0


class Builder:
    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        self.recent: list[str] = []  # hashes of the last request's candidates (best first)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.built_in_background = 0
        self.built_in_spare_time = 0
        self.busy_with: str | None = None  # the layer the background build works through now
        self.unit_seconds: dict[str, float] = {}  # per layer: moving average of one unit's build
        self._spare_lock = threading.Lock()
        self.cancel_spare = threading.Event()  # set when the engine closes
        self.share = BuildShare()  # the background builder's share while searches run
        self.pass_rates: dict[str, PassRate] = {}  # per layer: its batched pass speed (batching)

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

    def build_unit(self, name: str, layer, unit: Unit, deadline: float | None = None,
                   cancel=None, shared_s: float = 0.0) -> str:
        """Build one unit under ``deadline`` and ``cancel`` (the work limit the encoders check
        between batches, ``lar.core.deadline``) and keep the layer's time per unit (what spare
        time plans with). Returns the unit's state, or "aborted" when it was abandoned at the
        limit (it stays pending; its time so far is a lower bound of its cost). ``shared_s``:
        its share of a batch's encoder pass (``lar.engine.batching``), counted in its time."""
        t0 = time.monotonic()
        try:
            with work_limit(deadline, cancel):
                state = layer.build_one(unit)
        except DeadlineExceeded:
            state = "aborted"
        dt = time.monotonic() - t0 + shared_s
        old = self.unit_seconds.get(name)
        self.unit_seconds[name] = (dt if old is None else 0.8 * old + 0.2 * dt) \
            if state != "aborted" else max(dt, old or 0.0)
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
                    state = self.build_unit(name, layer_of[name], unit, deadline,
                                            (cancel, self.cancel_spare))
                    spent[name] += time.monotonic() - t
                    built += state != "aborted"
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
            if todo and not self.loaded(name, layer) and not load_within(layer, deadline):
                report["layers"][name] = {"state": "aborted", **counts, "pending": len(todo),
                                          "coverage": round(layer.coverage(view), 4),
                                          "reason": LOADING_REASON}
                continue
            repairs = repair_count(layer)
            if progress is not None:
                progress(name, 0, len(todo))
            extra: dict[str, Any] = {}
            state = "ran"
            if executor is not None and todo and executor.accepts(layer):
                def tally(st: str, name=name, n=len(todo)) -> None:
                    counts[st] += 1
                    if progress is not None:
                        progress(name, sum(counts.values()), n)

                state, extra = executor.build(layer, todo, deadline, cancel, tally)
            if not extra:  # what the executor built is done; else build here
                state = self._pass(name, layer, todo, 0, counts, deadline, cancel, progress)
            # a damaged file set aside during the pass (lar.core.sqlite_repair) made units
            # pending again: plan once more
            while state == "ran" and repair_count(layer) != repairs:
                repairs = repair_count(layer)
                more = self.plan(layer, scope)
                todo = todo + more
                state = self._pass(name, layer, more, len(todo) - len(more), counts, deadline,
                                   cancel, progress, total=len(todo))
            done = sum(counts.values())
            if done == len(todo):
                layer.collect_garbage(live)
                self.ctx.index.set_cursor(name, layer.build_version, seq)
            report["layers"][name] = {"state": state, **counts, "pending": len(todo) - done,
                                      "coverage": round(layer.coverage(self.ctx.scope_view(scope)), 4),
                                      **extra}
        report["elapsed"] = time.monotonic() - t0
        return report

    def _pass(self, name: str, layer, todo: list[Unit], start: int, counts: dict[str, int],
              deadline: float, cancel: threading.Event, progress, total: int | None = None) -> str:
        """Build ``todo`` unit by unit until the deadline; 'ran' or 'aborted'."""
        total = len(todo) if total is None else total
        i = start
        rate = self.pass_rates.setdefault(name, PassRate())
        for run in fitted_batches(todo, deadline, rate) if can_prepare(layer) else ([u] for u in todo):
            if time.monotonic() >= deadline or cancel.is_set():
                return "aborted"
            shared = prepare(layer, run, deadline, cancel) if len(run) > 1 else 0.0
            if shared is None:  # the timebox ended inside the batch's encoder pass
                rate.missed()
                return "aborted"
            if len(run) > 1:
                rate.observe(sum(u.size for u in run), shared)
            for u in run:
                i += 1
                got = self.build_unit(name, layer, u, deadline, cancel, shared / len(run))
                if got == "aborted":  # the timebox ended inside this unit
                    return "aborted"
                counts[got] += 1
                if progress is not None:
                    progress(name, i, total)
        return "ran"

    def build_changed(self, layer, paths: Iterable[str], deadline: float) -> int:
        """Index the units of just-changed ``paths`` now (the edit-to-search path)."""
        recs = self.ctx.index.get_many(list(paths))
        units = [Unit(r.path, r.hash, r.size, r.mtime_ns) for r in recs.values() if not r.deleted]
        n = 0
        for u in layer.pending(units):
            if time.monotonic() >= deadline:
                break
            if self.build_unit(layer.name, layer, u, deadline) == "aborted":
                break
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
        self.busy_with = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _next(self):
        for name, layer in self.layers():
            todo = self.plan(layer)
            if todo:
                if can_prepare(layer):
                    return name, layer, next(batches(todo, max_units=BACKGROUND_BATCH_UNITS))
                return name, layer, todo[:1]
        return None

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.share.wait_turn(self.ctx.idle, self._stop):  # yield to searches, for a while
                continue
            t0 = time.monotonic()  # the builder's step: planning and the unit
            try:
                nxt = self._next()
            except Exception:  # the engine is closing or the index is busy: try again later
                nxt = None
            if nxt is None:
                if self.busy_with is not None and self.ctx.idle.is_set():
                    collector.settle()  # done building: freeze what it left, between searches
                self.busy_with = None
                self._wake.clear()
                self._wake.wait(timeout=2.0)
                continue
            name, layer, run = nxt
            self.busy_with = name
            shared = prepare(layer, run, None, self._stop) if len(run) > 1 else 0.0
            for unit in run if shared is not None else ():
                if self._stop.is_set():
                    break
                if self.build_unit(name, layer, unit, cancel=self._stop,
                                   shared_s=shared / len(run)) != "aborted":
                    self.built_in_background += 1
            self.share.built(time.monotonic() - t0)
