"""The engine: opens a folder, keeps its file index current, runs layers under a timebox.

``lar.open(root)`` returns an ``Engine``; see the README for a first search. Searches run on a private
asyncio loop in a background thread, so the same sync API works in scripts and inside a Jupyter
kernel (whose own loop is already running); ``await eng.asearch(...)`` is the async form.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from lar.core.errors import ConfigError, ScopeError, UnknownLayerError
from lar.core.layer import BaseLayer, LayerContext, ScopeView, as_layer
from lar.core import deadline
from lar.core.config import EngineConfig
from lar.core.request import DEFAULT_K, DEFAULT_RRF_C, DEFAULT_TIMEBOX, SearchRequest, as_request
from lar.fusion.pipeline import FusionSettings
from lar.fusion.policies import DEFAULT_POLICY
from lar.engine import collector, currency, freshness, lifecycle
from lar.engine.activity import SearchActivity
from lar.engine.assembly import ranked, search_result
from lar.engine.changes import ChangeTracker
from lar.engine.enrichment import Enricher
from lar.engine.loop import LoopThread
from lar.engine.orchestrator import orchestrate, run_order
from lar.engine.reading import UnitAccess
from lar.engine.selection import LiveUnits, select_layers
from lar.engine.settings import ENV_SPARE_BUILD, default_state_dir, env_flag
from lar.engine.spare import SPARE_RESERVE, SpareBuild, coverage_reasons
from lar.engine.warmup import warm_layers
from lar.engine.variants import declared_keys, layer_variants
from lar.record.recording import Recording, search_params, seconds
from lar.core.registry import registered_layers
from lar.core.result import Fetched, InventoryItem, Result, Status
from lar.core.scope import Scope
from lar.store import ContentStore, FileIndex, UnitReader
from lar.store.extract import versions_fingerprint
from lar.store.scanner import DEFAULT_MAX_BYTES, Scanner
from lar.store.watch import FolderWatch
from lar.core.timebox import DeadlineReserve, parse_duration
from lar.core.types import Hit
from lar.distributed.shards import close_layer_shards

class Engine(Recording):
    def __init__(
        self,
        root: str | os.PathLike,
        state: str | os.PathLike | None = None,
        *,
        scan: bool = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
        refresh_interval: float = 2.0,
        lock_timeout: float = 10.0,
        config: Mapping[str, Any] | None = None,
        trace: str | os.PathLike | None = None,
        session: str | None = None,
        background: bool = False,
        spare_build: bool | None = None,
    ):
        """``background=True`` builds lazily in a background thread from the start (yielding
        to searches; what the MCP server and ``%lar open PATH`` do); ``spare_build`` lets each
        search spend the rest of its timebox building what its query needs (default: on,
        unless the environment sets ``LAR_SPARE_BUILD=0``, as the test suite does)."""
        root_path = Path(root).expanduser()
        if not root_path.is_dir():
            raise ScopeError(f"{str(root)!r} is not a folder; give lar.open() a directory to search")
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of settings, got {type(config).__name__}")
        # the configuration is checked before anything is written: a bad one loses nothing
        factories = dict(registered_layers())
        factories.update(layer_variants(config or {}, factories))
        self.config = EngineConfig.read(config, {n: declared_keys(f) for n, f in factories.items()})
        self.root = root_path.resolve()
        self.state_dir = Path(state).expanduser().resolve() if state else default_state_dir(self.root)
        self.max_bytes = int(max_bytes)
        self.refresh_interval = float(refresh_interval)
        self._bg = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lar-bg")
        self.recent_fetches: list[str] = []  # hashes fetched, for build priority
        self._loop: LoopThread | None = None
        if spare_build is None:
            spare_build = env_flag(ENV_SPARE_BUILD)
        self.spare_build = bool(spare_build)
        self.activity = SearchActivity()
        self.idle = self.activity.idle  # set while no search runs (the background builder waits)
        self.freshness = self.config.freshness
        # the measured cost of fusion + enrichment after the layers, kept back from their deadline
        self.post_reserve = DeadlineReserve()
        self._factories, self._lock_timeout = factories, lock_timeout
        self._state_lock = threading.Lock()
        self.watch = FolderWatch(self.root)  # the change token that spares searches the stat pass
        self._open_state()
        self.spare = SpareBuild(lambda: self.builder)
        self._init_recording(trace, session)
        lifecycle.register(self)  # closed at interpreter exit if the caller does not
        if scan:
            self.index_now(initial=True)
        if background:
            self.start_background_build()
        collector.settle()  # what opening allocated is frozen: no search pays to walk it

    def _open_state(self) -> None:
        """The state folder and what lives in it: file index, content store, reader, scanner,
        change tracker, layers, enricher, unit access and builder (at open, and again when the
        folder went away: ``_check_state``)."""
        from lar.engine.scheduler import BuildContext, Builder

        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.index = FileIndex(self.state_dir, lock_timeout=self._lock_timeout)
        self.index.on_repair = self._index_replaced
        self.state_watch = currency.StateWatch(self.state_dir, self.index.db_path)
        self.store = ContentStore(self.state_dir / "objects")
        self.reader = UnitReader(self.root, self.index, self.store)
        excludes = []
        try:
            excludes.append(self.state_dir.relative_to(self.root).as_posix() + "/**")
        except ValueError:
            pass
        self.scanner = Scanner(self.root, self.index, max_bytes=self.max_bytes, exclude=excludes)
        self.changes = ChangeTracker(self.scanner, self.index, self.refresh_interval, self._bg.submit,
                                     self.watch)
        self.live_units = LiveUnits(self.index)
        self.ctx = LayerContext(root=self.root, state_dir=self.state_dir, index=self.index,
                                reader=self.reader, config=dict(self.config.raw), detect=self.changes.detect,
                                max_bytes=self.max_bytes, extractor_versions=versions_fingerprint())
        self.layers: dict[str, BaseLayer] = {
            name: as_layer(factory(self.ctx), self.ctx) for name, factory in sorted(self._factories.items())}
        self.enricher = Enricher(self.reader, self.index, lambda: self.layers)
        self.units = UnitAccess(self.root, self.reader, self.index, self.store,
                                detect=self.changes.detect, rescan=self.index_now,
                                context_for=self.enricher.context_for, on_fetch=self._note_fetch)
        self.builder = Builder(BuildContext(
            layers=lambda: self.layers, scope_view=self.scope_view, index=self.index,
            recent_fetches=lambda: self.recent_fetches, idle=self.idle))

    def _check_state(self) -> None:
        """A state folder deleted (or replaced) under the open engine is noticed: a new one is
        made, the folder re-scanned, and the layers rebuild lazily; status and the next search
        say so (``currency.StateWatch``)."""
        if self.state_watch.lost() is None:
            return
        with self._state_lock:
            why = self.state_watch.lost()
            if why is None:
                return
            running = self.builder.running
            self.builder.stop_background()
            old = (self.index, self.state_watch)
            self._open_state()
            old[0].close()
            self.state_watch.inherit(old[1], why)
        self.index_now(initial=True)
        if running:
            self.start_background_build()

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        lifecycle.forget(self)
        self._close_recording()
        self.watch.close()
        self.builder.stop_background()
        self.spare.close()
        self._bg.shutdown(wait=True)
        close_layer_shards(self.layers.values())  # the sharded layers' Ray actors (docs/ray.md)
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self.index.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<lar.Engine root={str(self.root)!r} layers={list(self.layers)}>"

    # -- change detection -------------------------------------------------------------------
    def index_now(self, initial: bool = False) -> dict[str, Any]:
        """Full scan: bring the file index in line with the folder. Returns the scan report.
        Changes found after the first scan are queued for building layers with high priority."""
        return self.changes.scan(initial)

    @property
    def last_scan(self) -> dict[str, Any]:
        """The report of the last full scan (``index_now``'s)."""
        return dict(self.changes.last_scan)

    def _index_replaced(self) -> None:
        """A damaged file index was set aside (lar.core.sqlite_repair): rescan at the next call."""
        changes, live = getattr(self, "changes", None), getattr(self, "live_units", None)
        if changes is not None:  # (neither exists yet while the state is being opened)
            changes.forget_scan()
        if live is not None:
            live.forget()

    def pending_changes(self) -> list[str]:
        """Paths changed since the building layers last caught up, oldest first."""
        return self.changes.pending()

    # -- scope and layers -------------------------------------------------------------------
    def scope_view(self, scope: Any = None) -> ScopeView:
        return ScopeView(Scope.parse(scope), self.live_units, self.root)

    # -- the API ----------------------------------------------------------------------------
    def status(self, scope: Any = None) -> Status:
        return self._recorded("status", {"scope": scope}, lambda: self._status(scope))

    def _status(self, scope: Any = None) -> Status:
        self._check_state()
        view = self.scope_view(scope)
        n, distinct = self.index.counts()
        return Status(
            root=str(self.root), state_dir=str(self.state_dir), units=len(view) if scope else n,
            distinct_hashes=len(view.hashes()) if scope else distinct,
            skipped=tuple(self.index.skipped()),
            layers=tuple(layer.status(view) for layer in self.layers.values()),
            last_scan={**self.last_scan, **self.state_watch.report()})

    def warm(self, layers: Sequence[str] | None = None) -> dict[str, str]:
        """Load the models of the model layers now (``layer.warm()``), so that a first search
        does not spend its timebox loading them. Returns {layer: "ok" or the reason it failed}."""
        return warm_layers(self.layers, layers)

    def search(self, query: Any, timebox: Any = DEFAULT_TIMEBOX, k: int = DEFAULT_K,
               emphasis: str = "balanced", layers: Sequence[str] | None = None,
               exclude: Sequence[str] | None = None, scope: Any = None, fusion: str | None = None,
               rrf_c: float = DEFAULT_RRF_C, strict: bool = False, tokens: int | None = None) -> Result:
        """Run the layers under ``timebox`` (seconds or '200ms') and fuse what they found.
        ``k`` bounds the number of hits; ``tokens`` (optional) also bounds the compact result's
        estimated size in tokens (~4 characters each). ``query`` may also be a
        :class:`lar.core.request.SearchRequest` (then give no other argument)."""
        if self._loop is None:
            self._loop = LoopThread()
        given = dict(query=query, timebox=timebox, k=k, emphasis=emphasis, layers=layers,
                     exclude=exclude, scope=scope, fusion=fusion, rrf_c=rrf_c, strict=strict,
                     tokens=tokens)
        return self._recorded("search", search_params(given),
                              lambda: self._loop.run(self._asearch(as_request(given))))

    async def asearch(self, query: Any, timebox: Any = DEFAULT_TIMEBOX, k: int = DEFAULT_K,
                      emphasis: str = "balanced", layers: Sequence[str] | None = None,
                      exclude: Sequence[str] | None = None, scope: Any = None,
                      fusion: str | None = None, rrf_c: float = DEFAULT_RRF_C, strict: bool = False,
                      tokens: int | None = None) -> Result:
        given = dict(query=query, timebox=timebox, k=k, emphasis=emphasis, layers=layers,
                     exclude=exclude, scope=scope, fusion=fusion, rrf_c=rrf_c, strict=strict,
                     tokens=tokens)
        return await self._arecorded("search", search_params(given),
                                     lambda: self._asearch(as_request(given)))

    def fusion_settings(self, request: SearchRequest) -> FusionSettings:
        """How ``request`` is fused: its policy (or the engine's default) with the engine's
        fusion configuration (model, partial guard, fusion by unit)."""
        return FusionSettings(request.fusion or self.config.fusion or DEFAULT_POLICY, k=request.k,
                              c=request.rrf_c, model=self.config.fusion_model,
                              partial_guard=self.config.partial_guard, by_unit=self.config.by_unit)

    def layer_order(self, names: Sequence[str]) -> list[str]:
        """``names`` in the order the orchestrator runs and fuses them (generate layers by
        cost, then refine layers by cost)."""
        return [n for n, _ in run_order([(n, self.layers[n]) for n in names])]

    async def _asearch(self, request: SearchRequest) -> Result:
        """The search under its work limit: waits and abandoned work end at its deadline
        (``lar.core.deadline``), change detection included (``lar.engine.freshness``)."""
        t_call = time.monotonic()
        with deadline.work_limit(t_call + request.timebox), freshness.search_detection() as skips:
            result = await self._search_within(request, t_call)
        return replace(result, runs=freshness.annotate(result.runs, skips)) if skips else result

    async def _search_within(self, request: SearchRequest, t_call: float) -> Result:
        self._check_state()
        settings = self.fusion_settings(request)
        chosen, skipped = select_layers(self.layers, request.query, request.layers, request.exclude)
        view = self.scope_view(request.scope)
        tb = request.timebox
        # shared change detection is needed only by building layers that have built something
        building = [n for n, l in chosen if not l.always_current and l.has_built()]
        if not building:
            self.changes.maybe_rescan()
        prepare = None
        if building:
            async def prepare():
                report = await self.changes.catch_up(
                    [self.layers[n] for n in building], self.builder, inline_budget=0.25 * tb,
                    freshness_s=self.freshness, scan=self.index_now,
                    all_layers=list(self.layers.values()))
                view.refresh()  # the building layers search the units the stat pass found
                return report
        with self.activity.searching():
            reserve = self.post_reserve.reserve(tb)
            out = await orchestrate(request, chosen, view, timebox=tb - (time.monotonic() - t_call),
                                    settings=settings, skipped=skipped, prepare=prepare,
                                    reserve=reserve)
            self.builder.note_request(out.candidates)
            spare_s = 0.0
            if self.spare_build:  # until the slice kept for the work on the hits that follows
                spare_from = time.monotonic()
                await self.spare.run(chosen, t_call + tb - max(tb * SPARE_RESERVE, reserve))
                spare_s = time.monotonic() - spare_from
        runs = coverage_reasons(out.runs, self.layers, view, background=self.builder.running)
        fused, stale = currency.current_hits(out.hits, self.index)
        runs = currency.note_runs(runs, currency.run_notes(
            stale, self.state_watch.take_notice(), [n for n, l in chosen if not l.always_current]))
        hits = ranked(self.enrich(fused, view.scope), request.tokens)
        now = time.monotonic()
        elapsed = now - t_call
        if out.layers_done is not None:  # all the work after the layers but the spare build
            self.post_reserve.observe(now - out.layers_done - spare_s)
        if hits:
            self._bg.submit(self.enricher.after_search, [h.hash for h in hits])
        return search_result(request, settings.policy, out, hits, runs, elapsed, t_call)

    def enrich(self, hits: Sequence[Hit], scope: Any = None) -> list[Hit]:
        """``hits`` with paths, lines and excerpt filled from the current state of their units;
        a hit whose unit is gone, changed or out of ``scope`` is left out (what a search
        returns of its fused hits)."""
        return self.enricher.enrich(hits, scope)

    def fetch(self, hit_id: str, context: int = 0) -> Fetched:
        """The full text of a hit's span (plus ``context`` lines), from any earlier call."""
        return self._recorded("fetch", {"id": hit_id, "context": context},
                              lambda: self._check_state() or self.units.fetch(hit_id, context))

    def _note_fetch(self, h: str) -> None:
        """A fetched unit: its text is kept and its use counted (in the background), and it
        goes first in the build order."""
        self._bg.submit(self.enricher.after_fetch, h)
        self.recent_fetches.append(h)

    def inventory(self, scope: Any = None) -> list[InventoryItem]:
        """Every permitted unit in scope, with no relevance match (the independent enumerator)."""
        return self._recorded("inventory", {"scope": scope}, lambda: self._check_state() or [
            InventoryItem(u.path, u.hash, u.size, u.mtime_ns) for u in self.scope_view(scope).units()])

    def read_bytes(self, path_or_hash: str, span: tuple[int, int] | None = None, *,
                   raw: bool = False) -> bytes:
        """The unit's text (extracted text for PDF, notebooks, HTML; ``raw=True`` for the file's
        own bytes), or the byte ``span`` of it: the coordinates hits use."""
        self._check_state()
        return self.units.read_unit(path_or_hash, span, raw=raw)[3]

    def read(self, path_or_hash: str, span: tuple[int, int] | None = None) -> str:
        """Read any unit (by path inside the root, or by content hash), optionally a byte span."""
        got: list[str] = []

        def run() -> str:
            self._check_state()
            h, s, e, data = self.units.read_unit(path_or_hash, span)
            got.append(f"{h[:12]}:{s}-{e}")
            return data.decode("utf-8", errors="replace")

        return self._recorded("read", {"path_or_hash": path_or_hash, "span": span}, run,
                              describe=lambda out: (got[-1:], []))

    def document(self, path_or_hash: str):
        """The unit's ``lar.store.extract.Document``: its text plus structure and source map."""
        return self.units.document(path_or_hash)

    def build(self, timebox: Any = 30.0, layers: Sequence[str] | None = None,
              scope: Any = None, progress=None, executor: Any = None) -> dict[str, Any]:
        """Give building layers up to ``timebox`` to catch up (priority: the last request's
        candidates and fetched units, then the scope by usage, then the rest). ``progress``
        (optional): called as ``progress(layer, done, total)`` as units are built (e.g.
        ``lar.apps.progress.BuildProgress``, the bars ``lar build`` shows). ``executor``:
        None (here), ``"ray"`` (model passes on Ray workers at ``ray_address``, docs/ray.md) or
        a ``lar.distributed.ray_build.RayExecutor``."""
        from lar.distributed.ray_build import executor_for

        ex = executor_for(executor, self.config.get("ray_address"))

        def run() -> dict[str, Any]:
            self._check_state()
            for n in layers or []:
                if n not in self.layers:
                    raise UnknownLayerError(n, list(self.layers))
            report = self.builder.run(parse_duration(timebox), layers=layers, scope=scope,
                                      progress=progress, executor=ex)
            collector.settle()
            return report

        return self._recorded("build", {"timebox": seconds(timebox), "layers": layers,
                                        "scope": scope}, run)

    def start_background_build(self) -> None:
        """Build lazily in a background thread that yields to searches (``stop_...`` ends it)."""
        self.builder.start_background()

    def stop_background_build(self) -> None:
        self.builder.stop_background()


def open(root: str | os.PathLike = ".", state: str | os.PathLike | None = None, **kw) -> Engine:  # noqa: A001
    """Open an engine on ``root`` (state in ``<root>/.lar`` unless ``state`` is given)."""
    return Engine(root, state, **kw)
