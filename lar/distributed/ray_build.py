"""Building on Ray: the layers' model passes run in Ray tasks, the writes stay in this process.

``eng.build(..., executor="ray")`` (or ``lar build --ray [ADDRESS]``) hands every building layer
that has a remote pass (``BuildingLayer.remote_pass()``: ``static``, ``dense``, ``late``) to
:class:`RayExecutor`. The driver reads each unit's document, sends batches of ``(unit, document)``
to Ray tasks that run the layer's pass (the same chunking and encoder call as a local build) and
return what it computed, and writes every result through the layer's own ``build_one(unit,
payload)``: one writer, each unit written atomically then marked in the manifest, in the plan's
order, so the state is the one a local build of the same units writes (the same sidecar bytes,
the same vector pack). Units that need no pass (skipped, or already encoded by a layer sharing
the pass) are built here at once.

Failures: a task whose worker dies is retried by Ray (``max_retries``), then re-queued by the
driver (``requeue`` times); a unit whose pass raised is recorded 'skipped' or 'failed' with the
reason, as locally. At the deadline or on cancel the driver stops sending, writes what came back,
cancels the tasks in flight and leaves their units pending: a killed build loses at most the
units in flight. Progress and coverage are reported as for a local build, plus the executor's
figures (``tasks``, ``retried_by_driver``, ``lost``).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lar.core.building import RemoteUnitError, SkipUnit
from lar.core.errors import ConfigError
from lar.distributed.cluster import check_address, connect

__all__ = ["RayExecutor", "executor_for", "run_pass"]


def run_pass(pass_, items: list) -> list:
    """The Ray task: the pass of each ``(unit, document)``; per unit its result, or the
    ``SkipUnit``/``RemoteUnitError`` it raised (a unit's failure never fails the batch)."""
    out = []
    for unit, doc in items:
        try:
            out.append(pass_.run(unit, doc))
        except SkipUnit as exc:
            out.append(SkipUnit(str(exc)))
        except Exception as exc:  # recorded as the unit's failure, as a local build does
            out.append(RemoteUnitError(f"{type(exc).__name__}: {exc}"))
    return out


@dataclass(frozen=True)
class RayExecutor:
    """Build on the Ray cluster at ``address`` (None: the running one, else a local one).
    ``batch``: units per task; ``in_flight``: tasks out at once (0: twice the cluster's CPUs);
    ``max_retries``: Ray's retries of a task whose worker died; ``requeue``: the driver's."""

    address: str | None = None
    batch: int = 4
    in_flight: int = 0
    max_retries: int = 3
    requeue: int = 2
    task_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        check_address(self.address)
        for key in ("batch", "in_flight", "max_retries", "requeue"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "batch" else 0):
                raise ConfigError(f"RayExecutor {key} must be a non-negative integer (batch >= 1), "
                                  f"got {v!r}")

    def accepts(self, layer) -> bool:
        """Whether ``layer`` can build on Ray (it has a remote pass)."""
        fn = getattr(layer, "remote_pass", None)
        return callable(fn) and fn() is not None

    def build(self, layer, todo: Sequence, deadline: float, cancel: threading.Event,
              done: Callable[[str], None]) -> tuple[str, dict[str, Any]]:
        """Build ``todo`` (in order) until ``deadline`` (monotonic) or ``cancel``; ``done(state)``
        after each unit is written. Returns the run's state ('ran' | 'aborted') and figures."""
        ray = connect(self.address)
        task = ray.remote(run_pass).options(max_retries=self.max_retries, **dict(self.task_options))
        pass_ref = ray.put(layer.remote_pass())
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        limit = self.in_flight or 2 * cpus
        queue = deque(enumerate(todo))
        pending: dict[Any, tuple[list, int]] = {}  # task -> ([(slot, unit, doc)], attempts)
        ready: dict[int, tuple[Any, Any]] = {}  # slot -> (unit, payload or None: build here)
        stats = {"executor": "ray", "tasks": 0, "retried_by_driver": 0, "lost": 0}
        nxt = 0  # the next slot to write: results are written in the plan's order

        def write(upto_all: bool = False) -> None:
            nonlocal nxt
            while nxt < len(todo) and (nxt in ready or upto_all):
                unit, payload = ready.pop(nxt, (None, None))
                if unit is not None:  # None: lost with its task, left pending
                    done(layer.build_one(unit, payload))
                nxt += 1

        def submit(batch: list, attempts: int) -> None:
            ref = task.remote(pass_ref, [(u, d) for _, u, d in batch])
            pending[ref] = (batch, attempts)
            stats["tasks"] += 1

        state = "ran"
        while queue or pending:
            if time.monotonic() >= deadline or cancel.is_set():
                state = "aborted"
                break
            while queue and len(pending) < limit:
                batch = []
                while queue and len(batch) < self.batch:
                    slot, unit = queue.popleft()
                    doc = self._document(layer, unit)
                    if doc is None:
                        ready[slot] = (unit, None)  # built here: cheap
                    else:
                        batch.append((slot, unit, doc))
                if batch:
                    submit(batch, 0)
                write()
            if not pending:
                continue
            left = max(0.0, deadline - time.monotonic())
            finished, _ = ray.wait(list(pending), num_returns=1, timeout=min(0.5, left))
            for ref in finished:
                batch, attempts = pending.pop(ref)
                try:
                    outs = ray.get(ref)
                except ray.exceptions.RayError:  # the worker died past Ray's retries, or similar
                    if attempts < self.requeue:
                        stats["retried_by_driver"] += 1
                        submit(batch, attempts + 1)
                    else:
                        stats["lost"] += len(batch)
                        for slot, _, _ in batch:
                            ready[slot] = (None, None)  # left pending: the next build retries
                    continue
                for (slot, unit, _), payload in zip(batch, outs):
                    ready[slot] = (unit, payload)
            write()
        for ref in pending:  # the deadline: what is in flight is lost, nothing half-written
            ray.cancel(ref)
        write(upto_all=True)
        return state, stats

    @staticmethod
    def _document(layer, unit):
        """``unit``'s document when it needs the remote pass, else None (skipped, or its
        encoding is already stored: ``build_one`` here is cheap)."""
        if layer.skip_reason(unit) or not layer.needs_pass(unit):
            return None
        doc = layer.ctx.reader.document(unit.hash, unit.path)
        return None if doc.skipped else doc


def executor_for(spec: Any, address: str | None = None):
    """The executor ``eng.build(executor=...)`` names: None (build here), ``"ray"`` (at
    ``address``, the engine's ``ray_address``), or an executor object (e.g. a
    :class:`RayExecutor` with its own settings)."""
    if spec is None or spec == "local":
        return None
    if spec == "ray":
        return RayExecutor(address=address)
    if hasattr(spec, "accepts") and hasattr(spec, "build"):
        return spec
    raise ConfigError(f"executor must be None, 'local', 'ray' or a RayExecutor, got {spec!r}")
