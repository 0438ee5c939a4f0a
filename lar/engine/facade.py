"""The engine: opens a folder, keeps its file index current, runs layers under a timebox.

``lar.open(root)`` returns an ``Engine``; see the README for a first search. Searches run on a private
asyncio loop in a background thread, so the same sync API works in scripts and inside a Jupyter
kernel (whose own loop is already running); ``await eng.asearch(...)`` is the async form.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import re
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from lar.core.errors import (ConfigError, HitNotFoundError, LarError, ScopeError, StaleSpanError,
                     UnknownLayerError)
from lar.core.layer import BaseLayer, LayerContext, ScopeView, Unit, as_layer, implements
from lar.core.config import EngineConfig
from lar.core.request import DEFAULT_K, DEFAULT_RRF_C, DEFAULT_TIMEBOX, SearchRequest, as_request
from lar.fusion.pipeline import FusionSettings
from lar.fusion.policies import DEFAULT_POLICY
from lar.engine.excerpts import EXCERPT_CHARS, make_excerpt, within_tokens
from lar.engine.loop import LoopThread
from lar.engine.orchestrator import orchestrate, run_order
from lar.engine.variants import declared_keys, layer_variants
from lar.record.recording import Recording, search_params, seconds
from lar.core.registry import registered_layers
from lar.core.result import Fetched, InventoryItem, Result, Status
from lar.core.scope import Scope, normalize_relpath
from lar.store import ContentStore, FileIndex, UnitReader
from lar.store.reader import decode_span, expand_to_lines, line_range
from lar.store.extract import DERIVED_KINDS, kind_for, versions_fingerprint
from lar.store.scanner import DEFAULT_MAX_BYTES, Scanner
from lar.core.timebox import DeadlineReserve, parse_duration
from lar.core.types import Hit, LayerRun, RunState, Span, parse_hit_id

_HEX = re.compile(r"^[0-9a-f]{8,64}$")
# a search builds in its spare time until this fraction of its timebox is left (enrichment's share)
SPARE_RESERVE = 0.1
# spare time shorter than this is not worth starting a build for
SPARE_MIN_S = 0.01
ENV_SPARE_BUILD = "LAR_SPARE_BUILD"  # "0" turns spare-time building off by default
# "0" keeps the interactive entry points (the MCP server, %lar open PATH) from building in the
# background by default
ENV_BACKGROUND_BUILD = "LAR_BACKGROUND_BUILD"
OFF_WORDS = frozenset({"0", "false", "no", "off"})


def env_flag(name: str, default: bool = True) -> bool:
    """An on/off setting from the environment (``0``, ``false``, ``no``, ``off`` mean off)."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in OFF_WORDS


def interactive_background() -> bool:
    """Whether an interactive process (the MCP server, a notebook's ``%lar open PATH``) builds in
    the background by default: yes, unless ``LAR_BACKGROUND_BUILD=0``."""
    return env_flag(ENV_BACKGROUND_BUILD)


def default_state_dir(root: Path) -> Path:
    """``<root>/.lar`` when the root is writable, else a per-user cache dir keyed by the root."""
    if os.access(root, os.W_OK):
        return root / ".lar"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lar"
    return base / hashlib.blake2b(str(root).encode(), digest_size=8).hexdigest()


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
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = int(max_bytes)
        self.refresh_interval = float(refresh_interval)
        self.index = FileIndex(self.state_dir, lock_timeout=lock_timeout)
        self.store = ContentStore(self.state_dir / "objects")
        self.reader = UnitReader(self.root, self.index, self.store)
        excludes = []
        try:
            rel_state = self.state_dir.relative_to(self.root).as_posix()
            excludes.append(rel_state + "/**")
        except ValueError:
            pass
        self.scanner = Scanner(self.root, self.index, max_bytes=self.max_bytes, exclude=excludes)
        self._changed: list[str] = []  # queue of paths for building layers (lazy build)
        self.recent_fetches: list[str] = []  # hashes fetched, for build priority
        self._units_cache: tuple[int, list[Unit]] | None = None
        self._changed_lock = threading.Lock()
        self._last_scan: dict[str, Any] = {}
        self._last_scan_at = 0.0
        self._scan_future: concurrent.futures.Future | None = None
        self._bg = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lar-bg")
        self._loop: LoopThread | None = None
        self.ctx = LayerContext(root=self.root, state_dir=self.state_dir, index=self.index,
                                reader=self.reader, config=dict(self.config.raw), detect=self._detect,
                                max_bytes=self.max_bytes, extractor_versions=versions_fingerprint())
        self.layers: dict[str, BaseLayer] = {
            name: as_layer(factory(self.ctx), self.ctx) for name, factory in sorted(factories.items())}
        from lar.engine.scheduler import BuildContext, Builder

        if spare_build is None:
            spare_build = env_flag(ENV_SPARE_BUILD)
        self.spare_build = bool(spare_build)
        self._spare_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                                 thread_name_prefix="lar-spare")
        self.idle = threading.Event()  # set while no search runs (the background builder waits)
        self.idle.set()
        self.builder = Builder(BuildContext(
            layers=lambda: self.layers, scope_view=self.scope_view, index=self.index,
            recent_fetches=lambda: self.recent_fetches, idle=self.idle))
        self._active = 0
        self._active_lock = threading.Lock()
        self.freshness = self.config.freshness
        # the measured cost of fusion + enrichment after the layers, kept back from their deadline
        self.post_reserve = DeadlineReserve()
        self._init_recording(trace, session)
        if scan:
            self.index_now(initial=True)
        if background:
            self.start_background_build()

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        self._close_recording()
        self.builder.stop_background()
        self.builder.cancel_spare.set()
        self._spare_pool.shutdown(wait=True)
        self._bg.shutdown(wait=True)
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
        report = self.scanner.scan()
        if not initial:
            self._queue(report.changed_paths)
        self._last_scan = report.to_dict()
        self._last_scan_at = time.monotonic()
        return self._last_scan

    def _detect(self, paths: Sequence[str]) -> dict[str, str | None]:
        report = self.scanner.refresh(paths)
        self._queue(report.changed_paths)
        return {p: report.current.get(p) for p in paths}

    def _queue(self, paths: Iterable[str]) -> None:
        paths = list(paths)
        if paths:
            with self._changed_lock:
                self._changed.extend(paths)

    def _maybe_rescan(self) -> None:
        stale = time.monotonic() - self._last_scan_at > self.refresh_interval
        busy = self._scan_future is not None and not self._scan_future.done()
        if stale and not busy:
            self._scan_future = self._bg.submit(self.index_now)

    def pending_changes(self) -> list[str]:
        with self._changed_lock:
            return list(dict.fromkeys(self._changed))

    # -- scope and layers -------------------------------------------------------------------
    def _units(self) -> list[Unit]:
        """Live units, cached until the file index changes (its sequence number moves)."""
        seq = self.index.max_seq()
        cached = self._units_cache
        if cached is not None and cached[0] == seq:
            return cached[1]
        units = [Unit(r.path, r.hash, r.size, r.mtime_ns) for r in self.index.live()]
        self._units_cache = (seq, units)
        return units

    def scope_view(self, scope: Any = None) -> ScopeView:
        return ScopeView(Scope.parse(scope), self._units, self.root)

    def _select(self, query: Any, layers, exclude) -> tuple[list[tuple[str, Any]], list[LayerRun]]:
        known = list(self.layers)
        for n in list(layers or []) + list(exclude or []):
            if n not in self.layers:
                raise UnknownLayerError(n, known)
        if isinstance(query, Mapping):
            for n in query:
                if n not in self.layers:
                    raise UnknownLayerError(n, known)
        chosen, skipped = [], []
        for n in known:
            role = "generate" if "generate" in self.layers[n].roles else "refine"
            if layers is not None and n not in layers:
                skipped.append(LayerRun(n, RunState.SKIPPED, "not selected (layers=...)", role=role))
            elif exclude and n in exclude:
                skipped.append(LayerRun(n, RunState.SKIPPED, "excluded by the caller", role=role))
            elif isinstance(query, Mapping) and n not in query:
                skipped.append(LayerRun(n, RunState.SKIPPED, "not named in the query mapping", role=role))
            else:
                chosen.append((n, self.layers[n]))
        return chosen, skipped

    # -- the API ----------------------------------------------------------------------------
    def status(self, scope: Any = None) -> Status:
        return self._recorded("status", {"scope": scope}, lambda: self._status(scope))

    def _status(self, scope: Any = None) -> Status:
        view = self.scope_view(scope)
        n, distinct = self.index.counts()
        return Status(
            root=str(self.root), state_dir=str(self.state_dir), units=len(view) if scope else n,
            distinct_hashes=len(view.hashes()) if scope else distinct,
            skipped=tuple(self.index.skipped()),
            layers=tuple(layer.status(view) for layer in self.layers.values()),
            last_scan=dict(self._last_scan))

    def warm(self, layers: Sequence[str] | None = None) -> dict[str, str]:
        """Load the models of the model layers now (``layer.warm()``), so that a first search
        does not spend its timebox loading them. Returns {layer: "ok" or the reason it failed}."""
        out = {}
        for name, layer in self.layers.items():
            if implements(layer, "warm") and (layers is None or name in layers):
                try:
                    layer.warm()
                    out[name] = "ok"
                except LarError as exc:
                    out[name] = str(exc)
        return out

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
        t_call = time.monotonic()
        settings = self.fusion_settings(request)
        chosen, skipped = self._select(request.query, request.layers, request.exclude)
        view = self.scope_view(request.scope)
        tb = request.timebox
        # shared change detection is needed only by building layers that have built something
        building = [n for n, l in chosen if not l.always_current and l.has_built()]
        if not building:
            self._maybe_rescan()
        prepare = None
        if building:
            def prepare():
                return self._prepare_building(building, inline_budget=0.25 * tb)
        with self._active_lock:
            self._active += 1
            self.idle.clear()
        try:
            out = await orchestrate(request, chosen, view, timebox=tb - (time.monotonic() - t_call),
                                    settings=settings, skipped=skipped, prepare=prepare,
                                    reserve=self.post_reserve.reserve(tb))
            fused_at = time.monotonic()
            self.builder.note_request(out.candidates)
            if self.spare_build:
                await self._spare_build(chosen, t_call + tb * (1.0 - SPARE_RESERVE))
        finally:
            with self._active_lock:
                self._active -= 1
                if self._active == 0:
                    self.idle.set()
        runs = self._coverage_reasons(out.runs, view)
        enrich_from = time.monotonic()
        hits = self.enrich(out.hits, view.scope)
        if request.tokens is not None:
            hits = within_tokens(hits, request.tokens)
        hits = [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(hits, 1)]
        now = time.monotonic()
        elapsed = now - t_call
        if out.layers_done is not None:  # fusion after the layers, then enrichment (not the spare build)
            self.post_reserve.observe((fused_at - out.layers_done) + (now - enrich_from))
        if hits:
            self._bg.submit(self._after_search, [h.hash for h in hits])
        query = dict(request.query) if isinstance(request.query, Mapping) else request.query
        return Result(query=query, hits=tuple(hits), runs=runs, timebox=tb,
                      elapsed=elapsed, k=request.k, fusion=settings.policy, emphasis=request.emphasis,
                      first_result=(out.first_result + (out.started - t_call))
                      if out.first_result is not None else None,
                      pool=dict(out.pool), layer_hits=out.layer_hits, score_scale=out.score_scale,
                      layers=tuple(request.layers) if request.layers is not None else None)

    async def _spare_build(self, chosen: Sequence[tuple[str, Any]], deadline: float) -> None:
        """Spend what is left of the timebox (up to ``deadline``) building the chosen layers'
        units that matter for this search (``Builder.spare``: its candidates' units first). The
        call returns at the deadline even if a unit is still being built: that unit finishes in
        the builder's thread and the next call reuses it."""
        names = [n for n, l in chosen if not l.always_current]
        left = deadline - time.monotonic()
        if not names or left < SPARE_MIN_S:
            return
        cancel = threading.Event()
        job = asyncio.get_running_loop().run_in_executor(
            self._spare_pool, self.builder.spare, names, deadline, cancel)
        try:
            await asyncio.wait_for(asyncio.shield(job), timeout=max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            cancel.set()
        except Exception:  # building is a courtesy of spare time; never fail a search on it
            cancel.set()

    def _coverage_reasons(self, runs: Sequence[LayerRun], view: ScopeView) -> tuple[LayerRun, ...]:
        """Runs of building layers that answered from part of the scope say so in their reason:
        how much is built, of how many units, and what builds the rest."""
        from dataclasses import replace

        out = []
        for r in runs:
            layer = self.layers.get(r.name)
            if (layer is not None and not layer.always_current and r.coverage is not None
                    and r.coverage < 1.0 and r.state in (RunState.RAN, RunState.ABORTED)):
                try:
                    n = len(layer.applicable(view))
                except Exception:
                    n = 0
                how = ("building in the background" if self.builder.running else
                       "searches build it in their spare time; run `lar build` (eng.build()) to finish")
                note = f"built {100 * r.coverage:.0f} % of {n:,} units; {how}"
                r = replace(r, reason=f"{r.reason}; {note}" if r.reason else note)
            out.append(r)
        return tuple(out)

    def _after_search(self, hashes: list[str]) -> None:
        for h in dict.fromkeys(hashes):
            self.reader.snapshot(h)  # keeps returned ids fetchable after edits
        try:
            self.index.touch_usage(list(dict.fromkeys(hashes)))
        except Exception:  # usage is a hint for build priority; never fail a call on it
            pass

    def enrich(self, hits: Sequence[Hit], scope: Any = None) -> list[Hit]:
        """``hits`` with paths, lines and excerpt filled from the current state of their units;
        a hit whose unit is gone, changed or out of ``scope`` is left out (what a search
        returns of its fused hits)."""
        sc = scope if isinstance(scope, Scope) or scope is None else Scope.parse(scope)
        out = (self._enrich(h, sc) for h in hits)
        return [h for h in out if h is not None]

    def _enrich(self, hit: Hit, scope: Scope | None = None) -> Hit | None:
        """Fill paths, lines and excerpt from the current state of the unit."""
        from dataclasses import replace

        try:
            data = self.reader.unit_text(hit.hash)
        except (HitNotFoundError, StaleSpanError):
            return None
        if hit.span.end > len(data):
            return None
        paths = tuple(self.index.paths_for_hash(hit.hash)) or hit.paths
        if scope is not None and not scope.is_everything:
            paths = tuple(p for p in paths if scope.matches(p, hit.hash))
            if not paths:
                return None  # the unit is no longer in scope (e.g. moved since the layer ran)
        subs = [s for ev in hit.evidence.values() for s in ev.sub_spans]
        excerpt = hit.excerpt or make_excerpt(data, hit.span, subs)
        if len(excerpt) > EXCERPT_CHARS:
            excerpt = excerpt[: EXCERPT_CHARS - 1] + "…"
        context = dict(hit.context)
        context.update(self._context_for(hit.hash, hit.span, paths[0] if paths else None))
        return replace(hit, paths=paths, lines=line_range(data, hit.span.start, hit.span.end),
                       excerpt=excerpt, context=context)

    def _context_for(self, h: str, span: Span, path: str | None) -> dict[str, Any]:
        """Match-time metadata: where the span sits in its source (page, cell, line of an
        extracted format) and what layers that describe structure say (e.g. the enclosing
        symbol). Layers opt in by defining ``context_for(hash, span, path) -> dict``."""
        out: dict[str, Any] = {}
        if path and kind_for(path) in DERIVED_KINDS:
            try:
                loc = self.reader.document(h, path).locate(span.start, span.end)
            except (HitNotFoundError, StaleSpanError):
                loc = {}
            if loc:
                out["source"] = loc
        for layer in self.layers.values():
            try:
                extra = layer.context_for(h, span, path)
            except Exception:  # context is a courtesy; never fail a call on it
                extra = None
            if extra:
                out.update(extra)
        return out

    def _resolve_hash(self, prefix: str) -> str:
        try:
            return self.index.resolve_prefix(prefix)
        except HitNotFoundError:
            found = self.store.find_prefix(prefix)
            if len(found) == 1:
                return found[0]
            raise

    def fetch(self, hit_id: str, context: int = 0) -> Fetched:
        """The full text of a hit's span (plus ``context`` lines), from any earlier call."""
        return self._recorded("fetch", {"id": hit_id, "context": context},
                              lambda: self._fetch(hit_id, context))

    def _fetch(self, hit_id: str, context: int = 0) -> Fetched:
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise ConfigError(f"context must be a number of lines >= 0, got {context!r}")
        prefix, start, end = parse_hit_id(hit_id)
        h = self._resolve_hash(prefix)
        known_paths = self.index.paths_for_hash(h)
        if known_paths:
            self._detect(known_paths)  # stat check: did the file change since the hit?
        current_paths = self.index.paths_for_hash(h)
        try:
            old = self.reader.unit_text(h)
        except StaleSpanError:
            old = None
        if old is not None and end > len(old):
            raise HitNotFoundError(f"hit {hit_id!r} ends at byte {end} but the unit has {len(old)} bytes")
        if current_paths and old is not None:
            return self._fetched(hit_id, current_paths[0], h, old, start, end, context)
        # the unit changed since the hit: re-anchor the span's text in the current file
        if old is None:
            raise StaleSpanError(
                f"hit {hit_id!r}: its file changed and no copy of the old text was kept; search again")
        needle = old[start:end]
        for path in self.index.past_paths(h):
            try:
                new_hash, _ = self.reader.read_path(path)
                self._detect([path])
                data = self.reader.unit_text(new_hash, path)
            except (HitNotFoundError, ScopeError, StaleSpanError):
                continue
            positions = [m.start() for m in re.finditer(re.escape(needle), data)] if needle else []
            if positions:
                pos = min(positions, key=lambda p: abs(p - start))
                self._detect([path])
                new_id = Span(new_hash, pos, pos + len(needle)).id
                note = (f"{path} changed since this hit; its text was found again at bytes "
                        f"{pos}-{pos + len(needle)} (id {new_id})")
                return self._fetched(hit_id, path, new_hash, data, pos, pos + len(needle), context,
                                     changed=True, current_id=new_id, note=note)
        raise StaleSpanError(
            f"hit {hit_id!r}: the file it came from changed and the hit's text no longer exists "
            f"in it (paths it had: {', '.join(self.index.past_paths(h)) or 'none'}); search again")

    def _fetched(self, hit_id, path, h, data, start, end, context, **kw) -> Fetched:
        cs, ce = expand_to_lines(data, start, end, context)
        self._bg.submit(self._touch_fetch, h)
        self.recent_fetches.append(h)
        src = self._context_for(h, Span(h, start, end), path)
        return Fetched(id=hit_id, path=path, hash=h, start=start, end=end, source=src,
                       lines=line_range(data, start, end), text=decode_span(data, start, end),
                       context_lines=line_range(data, cs, ce), context_text=decode_span(data, cs, ce), **kw)

    def _touch_fetch(self, h: str) -> None:
        try:
            self.reader.snapshot(h)
            self.index.touch_usage([h], kind="fetches")
        except Exception:
            pass

    def inventory(self, scope: Any = None) -> list[InventoryItem]:
        """Every permitted unit in scope, with no relevance match (the independent enumerator)."""
        return self._recorded("inventory", {"scope": scope}, lambda: [
            InventoryItem(u.path, u.hash, u.size, u.mtime_ns) for u in self.scope_view(scope).units()])

    def read_bytes(self, path_or_hash: str, span: tuple[int, int] | None = None, *,
                   raw: bool = False) -> bytes:
        """The unit's text (extracted text for PDF, notebooks, HTML; ``raw=True`` for the file's
        own bytes), or the byte ``span`` of it: the coordinates hits use."""
        return self._read_unit(path_or_hash, span, raw=raw)[3]

    def _read_unit(self, path_or_hash: str, span: tuple[int, int] | None = None, *,
                   raw: bool = False) -> tuple[str, int, int, bytes]:
        """(hash, start, end, bytes) of what ``read_bytes`` returns."""
        if isinstance(path_or_hash, str) and _HEX.match(path_or_hash) and not (self.root / path_or_hash).exists():
            h = self._resolve_hash(path_or_hash)
            data = self.reader.read(h) if raw else self.reader.unit_text(h)
        else:
            h, data = self.reader.read_path(path_or_hash)
            if not raw:
                data = self.reader.unit_text(h, normalize_relpath(self.root, path_or_hash))
        if span is not None:
            s, e = span
            if not (0 <= s <= e <= len(data)):
                raise ConfigError(f"span {span} is outside the unit (0..{len(data)} bytes)")
            return h, s, e, data[s:e]
        return h, 0, len(data), data

    def read(self, path_or_hash: str, span: tuple[int, int] | None = None) -> str:
        """Read any unit (by path inside the root, or by content hash), optionally a byte span."""
        got: list[str] = []

        def run() -> str:
            h, s, e, data = self._read_unit(path_or_hash, span)
            got.append(f"{h[:12]}:{s}-{e}")
            return data.decode("utf-8", errors="replace")

        return self._recorded("read", {"path_or_hash": path_or_hash, "span": span}, run,
                              describe=lambda out: (got[-1:], []))

    def document(self, path_or_hash: str):
        """The unit's ``lar.store.extract.Document``: its text plus structure and source map."""
        if _HEX.match(path_or_hash) and not (self.root / path_or_hash).exists():
            h = self._resolve_hash(path_or_hash)
            return self.reader.document(h)
        h, _ = self.reader.read_path(path_or_hash)
        return self.reader.document(h, normalize_relpath(self.root, path_or_hash))

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
            for n in layers or []:
                if n not in self.layers:
                    raise UnknownLayerError(n, list(self.layers))
            return self.builder.run(parse_duration(timebox), layers=layers, scope=scope,
                                    progress=progress, executor=ex)

        return self._recorded("build", {"timebox": seconds(timebox), "layers": layers,
                                        "scope": scope}, run)

    def start_background_build(self) -> None:
        """Build lazily in a background thread that yields to searches (``stop_...`` ends it)."""
        self.builder.start_background()

    def stop_background_build(self) -> None:
        self.builder.stop_background()

    async def _prepare_building(self, names: list[str], inline_budget: float) -> dict[str, Any]:
        """Shared change detection for building layers: a stat pass over the folder, then the
        units of changed files are indexed at once (within ``inline_budget`` seconds)."""
        t0 = time.monotonic()
        if time.monotonic() - self._last_scan_at >= self.freshness:
            await asyncio.to_thread(self.index_now)
        changed = self.pending_changes()
        deadline = time.monotonic() + inline_budget
        built = 0
        for name in names:
            layer = self.layers[name]
            built += await asyncio.to_thread(self.builder.build_changed, layer, changed, deadline)
        self._prune_changes()
        return {"stat_pass_s": time.monotonic() - t0, "inline_built": built}

    def _prune_changes(self) -> None:
        """Drop queued paths that every building layer has caught up with."""
        layers = [l for l in self.layers.values() if not l.always_current]
        with self._changed_lock:
            paths = list(dict.fromkeys(self._changed))
        if not paths:
            return
        recs = self.index.get_many(paths)
        keep = []
        for p in paths:
            r = recs.get(p)
            if r is None or r.deleted:
                continue
            unit = [Unit(p, r.hash, r.size)]
            if any(l.pending(unit) for l in layers):
                keep.append(p)
        with self._changed_lock:
            self._changed = keep


def open(root: str | os.PathLike = ".", state: str | os.PathLike | None = None, **kw) -> Engine:  # noqa: A001
    """Open an engine on ``root`` (state in ``<root>/.lar`` unless ``state`` is given)."""
    return Engine(root, state, **kw)
