"""The exact scan over shards held by Ray actors, with the anytime contract kept across them.

Each of ``n`` actors holds one shard: the units whose hash maps to it (:func:`shards.shard_of`),
loaded by a *source* it was given into its own memory. A source has ``load(hash)`` returning
``(unit, read_now)``, optionally ``load_many(hashes)`` returning ``({hash: unit}, read_now,
[(hash, why)])`` for sources that read in bulk, and ``retain(hashes)`` forgetting the others:
the late layer's is ``lar.layers.late.shard_source.SidecarSource`` (token matrices from the
sidecars), the dense and static layers' ``lar.layers.kits.vectors.chunkshard.StoreSource``
(chunk vectors from the vector store). A search sends the query and each shard's part of the
layer's priority order to every actor at once; each scans its part with the layer's own scan
function (given at construction: ``lar.layers.late.scan.scan_units``,
``lar.layers.kits.vectors.chunkshard.scan_chunk_units``), which reads units through a
:class:`ShardLoader`, until the shared deadline and returns its best ``k`` with what it scanned
(a result with ``scanned`` and ``aborted``). :meth:`ShardedScan.scan` waits for the answers until the deadline and returns
the answered shards' results and a :class:`ShardRun` naming the late and the failed ones.

The deadline travels as wall-clock time (``time.time()``), so a shard that starts late (still
busy with the previous query) still stops at the caller's deadline; across machines it assumes
their clocks agree to a few milliseconds (NTP). A dead actor is restarted by Ray (``max_restarts``)
with an empty shard; the search it died in counts its units as not covered, and the next search
it answers reloads them from storage, the sidecars or the vector store (reported as
``restarted`` and ``loaded``).
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Sequence

from lar.core.errors import ConfigError
from lar.distributed.cluster import connect
from lar.distributed.shards import ShardRun, split

__all__ = ["ShardActor", "ShardLoader", "ShardedScan"]

#: how much sooner than the caller's deadline the shards stop, for their answers to travel back
RETURN_MARGIN_S = 0.02


class ShardLoader:
    """What a shard's scan function reads its units through: ``loader(h)`` one unit,
    ``loader.many(hashes)`` several at once (``({hash: unit}, [(hash, why)])``); counts the
    units this incarnation read from storage (``loaded``)."""

    def __init__(self, source: Any):
        self.source = source
        self.loaded = 0

    def __call__(self, h: str):
        unit, fresh = self.source.load(h)
        self.loaded += int(fresh)
        return unit

    def many(self, hashes: Sequence[str]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        bulk = getattr(self.source, "load_many", None)
        if bulk is not None:
            got, fresh, bad = bulk(hashes)
            self.loaded += int(fresh)
            return got, bad
        got, bad = {}, []
        for h in hashes:
            try:
                got[h] = self(h)
            except (LookupError, OSError) as exc:
                bad.append((h, str(exc)))
        return got, bad


class ShardActor:
    """One shard (run as a Ray actor; usable in-process too, which is how it is unit-tested)."""

    def __init__(self, shard: int, source: Any, scan: Callable[..., Any], arena: Any = None):
        self.shard = shard
        self.source = source
        self.scan_fn = scan
        # this shard's own device arena (an object with ``arena()``, ``prune(keep)`` and
        # ``status()``, made by the layer: ``lar.layers.late.sharded.ShardArena``), or None
        self.arena = arena
        self.loader = ShardLoader(source)  # counts the units read by this incarnation
        self.restarted = False
        ray = sys.modules.get("ray")  # imported in every actor; asked only there (asking with
        try:  # no cluster joined would start one)
            if ray is not None and ray.is_initialized():
                self.restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        except Exception:  # not inside a Ray actor
            pass

    def ping(self) -> int:
        return self.shard

    def echo(self, request: Any, reply: Any) -> Any:
        """``reply``, once ``request`` arrived: the transport of a scan's bytes without the scan
        (the overhead model of ``benchmarks/bench_ray_scale.py``)."""
        return reply

    def pid(self) -> int:
        import os

        return os.getpid()

    @property
    def loaded(self) -> int:
        return self.loader.loaded

    def load(self, h: str):
        return self.loader(h)

    def scan(self, q, weights, hashes: Sequence[str], k: int, deadline: float,
             options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """Scan ``hashes`` (in order) until wall-clock ``deadline``; the scan function's result
        and this shard's figures."""
        t0 = time.time()
        self.source.retain(hashes)
        options = dict(options)
        arena = self.arena.arena() if self.arena is not None else None
        if arena is not None:  # the shard's units stay on its device across searches
            self.arena.prune(set(hashes))
            options["resident"] = arena
        res = self.scan_fn(q, weights, list(hashes), self.loader, k,
                           should_stop=lambda: time.time() >= deadline, **options)
        stats = {"shard": self.shard, "units": len(hashes), "scanned": len(res.scanned),
                 "seconds": round(time.time() - t0, 4), "loaded": self.loaded,
                 "restarted": self.restarted, "aborted": bool(res.aborted)}
        if arena is not None:
            stats["resident"] = self.arena.status()
        return res, stats


class ShardedScan:
    """``n`` shard actors on the Ray cluster at ``address`` (None: the running one, or a local
    one). ``source`` and ``scan`` must pickle (module-level classes and functions). The query
    ``q`` and ``weights`` travel to the shards as they are (the late layer's query token
    vectors and weights; the chunk-vector layers' unit query vector and None). ``arena``: a
    picklable maker of each shard's own device arena (None: the shards scan from host memory);
    ``actor_options`` go to Ray (``num_gpus`` for actors whose arena is on a GPU)."""

    def __init__(self, n: int, source: Any, scan: Callable[..., Any], *, address: str | None = None,
                 max_restarts: int = 4, actor_options: dict[str, Any] | None = None,
                 arena: Any = None):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"the number of shards must be a positive integer, got {n!r}")
        self.ray = connect(address)
        self.n = n
        remote = self.ray.remote(ShardActor)
        opts = {"max_restarts": max_restarts, "max_task_retries": 0, **(actor_options or {})}
        self.actors = [remote.options(**opts).remote(i, source, scan, arena) for i in range(n)]

    def ready(self, timeout: float = 60.0) -> bool:
        """Wait until every actor answers (their start-up is seconds of Python imports)."""
        refs = [a.ping.remote() for a in self.actors]
        done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=timeout)
        return len(done) == len(refs)

    def scan(self, q, weights, ordered: Sequence[str], k: int, seconds: float,
             options: dict[str, Any] | None = None,
             on_sent: Callable[[], None] | None = None) -> tuple[list[Any], ShardRun]:
        """Send the query to every shard and wait until ``seconds`` from now at most. Returns the
        answered shards' scan results (in shard order) and the run's report. ``on_sent`` is
        called once every request is out (a test kills an actor there)."""
        ray = self.ray
        parts = split(ordered, self.n)
        deadline = time.time() + max(0.0, seconds)
        stop_at = deadline - min(RETURN_MARGIN_S, 0.1 * max(0.0, seconds))
        pending = {self.actors[i].scan.remote(q, weights, parts[i], k, stop_at, dict(options or {})): i
                   for i in range(self.n)}
        if on_sent is not None:
            on_sent()
        results: dict[int, Any] = {}
        stats: dict[int, dict] = {}
        failed: list[tuple[int, str]] = []
        while pending:
            left = deadline - time.time()
            if left <= 0:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    res, st = ray.get(ref)
                except ray.exceptions.RayError as exc:  # dead, restarting or failed shard
                    failed.append((i, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
                    continue
                results[i] = res
                stats[i] = st
        late = tuple(sorted(pending.values()))
        answered = tuple(sorted(results))
        run = ShardRun(shards=self.n, answered=answered, late=late, failed=tuple(sorted(failed)),
                       units=len(ordered), scanned=sum(len(results[i].scanned) for i in answered),
                       per_shard=tuple(stats[i] for i in answered))
        return [results[i] for i in answered], run

    def pids(self) -> list[int]:
        return self.ray.get([a.pid.remote() for a in self.actors])

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a, no_restart=True)
            except Exception:
                pass
        self.actors = []
