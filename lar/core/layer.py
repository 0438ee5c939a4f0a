"""The Layer protocol (seed section 5.4), its base class and what the engine hands a layer.

A layer is one module that registers a factory in the ``lar.layers`` entry-point group. The
factory is called with a ``LayerContext`` and returns an object satisfying ``Layer``.
Chunking, model, index format and tokenisation are private to each layer.
"""
from __future__ import annotations

import asyncio

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from lar.core.budget import Budget, LayerReport
from lar.core.errors import DeadlineExceeded
from lar.core.scope import Scope
from lar.core.types import Hit, LayerStatus, Span

if TYPE_CHECKING:  # pragma: no cover
    from lar.store.fileindex import FileIndex
    from lar.store.reader import UnitReader


@dataclass(frozen=True, slots=True)
class Unit:
    """One indexed file: its path relative to the root and the hash of its bytes."""

    path: str
    hash: str
    size: int
    mtime_ns: int = 0


__all__ = ["Budget", "Candidate", "Layer", "LayerContext", "LayerReport", "ScopeView", "Unit",
           "BaseLayer", "ProtocolLayer", "as_layer", "implements"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A span handed to a refine layer, with the path it was found at."""

    span: Span
    path: str | None = None


class ScopeView:
    """The units a call may see: the scope applied to the current file index, resolved lazily."""

    def __init__(self, scope: Scope, units_fn: Callable[[], Iterable[Unit]], root: Path):
        self.scope = scope
        self.root = root
        self._units_fn = units_fn
        self._units: list[Unit] | None = None

    def units(self) -> list[Unit]:
        if self._units is None:
            self._units = [u for u in self._units_fn() if self.scope.matches(u.path, u.hash)]
        return self._units

    def hashes(self) -> set[str]:
        return {u.hash for u in self.units()}

    def all_units(self) -> list[Unit]:
        """Every live unit, whatever the scope (for corpus-wide statistics; do not change it)."""
        units = self._units_fn()
        return units if isinstance(units, list) else list(units)

    def refresh(self) -> None:
        """Resolve the units again at the next ``units()`` (after a stat pass changed the
        index); lists already handed out are left as they were."""
        self._units = None

    def __len__(self) -> int:
        return len(self.units())


@dataclass
class LayerContext:
    """What the engine gives a layer factory: where things are and how to read units."""

    root: Path
    state_dir: Path
    index: "FileIndex"
    reader: "UnitReader"
    config: dict[str, Any] = field(default_factory=dict)
    detect: Callable[[Sequence[str]], dict[str, str | None]] | None = None
    """Change detector: stat-check paths, re-hash the changed ones, queue them for building
    layers; returns {path: current hash or None if gone/skipped}."""
    max_bytes: int = 16 * 1024 * 1024
    extractor_versions: str = ""
    """The versions of the text extractors (``lar.store.extract.versions_fingerprint()``): part
    of every building layer's build version, so a changed extractor rebuilds what it made."""

    def layer_dir(self, name: str) -> Path:
        d = self.state_dir / "layers" / name
        d.mkdir(parents=True, exist_ok=True)
        return d


@runtime_checkable
class Layer(Protocol):
    """The contract (seed section 5.4): what every layer has. The optional parts, with their
    defaults, are the attributes and methods of :class:`BaseLayer`; a layer that implements only
    these members is used with those defaults (the engine wraps it, :class:`ProtocolLayer`)."""

    name: str
    version: str
    roles: frozenset[str]

    def applies(self, scope: ScopeView) -> bool: ...

    def status(self, scope: ScopeView) -> LayerStatus: ...

    async def search(
        self, query: Any, scope: ScopeView, budget: Budget, candidates: Sequence[Candidate] | None = None
    ) -> list[Hit]: ...

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None: ...


class BaseLayer:
    """Defaults for the optional parts of the protocol. Subclasses set the class attributes and
    implement ``search``; always-current layers need no ``build``.

    Optional parts (each with the default below): ``origin``, ``granularity``,
    ``query_format``, ``cost`` (status text); ``cost_rank`` (lower runs first, and builds
    first); ``always_current`` (reads files as they are now; False: built lazily);
    ``early_candidates`` (a scanning layer that wants the cheap layers' candidates first);
    ``default_query(text)``; ``why_not(scope)``; ``has_built()``; ``warm()``;
    ``context_for(hash, span, path)``; ``pending(units)``; the class methods
    ``config_keys()``, ``default_variants()`` and ``variant(name, options)``."""

    name: str = ""
    version: str = "1"
    roles: frozenset[str] = frozenset({"generate"})
    origin: str = "text"
    granularity: str = "line"
    query_format: str = "free text"
    cost: str = "cheap"
    cost_rank: int = 50  # lower runs first
    always_current: bool = True
    early_candidates: bool = False

    def __init__(self, ctx: LayerContext):
        self.ctx = ctx

    # -- the configuration a layer reads ------------------------------------------------------
    @classmethod
    def config_keys(cls) -> frozenset[str] | None:
        """The engine config keys this layer reads (``<name>_<option>``); None: every key that
        starts with ``<name>_`` (the engine refuses other unknown keys at open)."""
        return None

    @classmethod
    def default_variants(cls) -> dict[str, dict[str, Any]]:
        """Separately named variants every engine gets unless configured away:
        ``{name: {"base": cls.name, **options}}`` (e.g. ``dense-e5``)."""
        return {}

    @classmethod
    def can_vary(cls) -> bool:
        """Whether :meth:`variant` makes separately named layers of this one."""
        return cls.variant.__func__ is not BaseLayer.variant.__func__  # type: ignore[attr-defined]

    @classmethod
    def variant(cls, name: str, options: dict[str, Any]) -> type:
        """A separately named layer class with other options (layers that support it)."""
        from lar.core.errors import ConfigError

        raise ConfigError(f"layer {cls.name!r} has no variants")

    # -- the protocol, with defaults ----------------------------------------------------------
    def applies(self, scope: ScopeView) -> bool:
        return True

    def why_not(self, scope: ScopeView) -> str | None:
        """Why the layer does not apply to ``scope`` (None: the generic reason)."""
        return None

    def coverage(self, scope: ScopeView) -> float:
        return 1.0 if self.always_current else 0.0

    def status(self, scope: ScopeView) -> LayerStatus:
        n = len(scope)
        cov = self.coverage(scope)
        return LayerStatus(
            name=self.name,
            version=self.version,
            roles=self.roles,
            origin=self.origin,
            granularity=self.granularity,
            coverage=cov,
            query_format=self.query_format,
            cost=self.cost,
            units=n,
            built_units=round(cov * n),
        )

    def default_query(self, query: str) -> Any:
        """How this layer reads a plain string query (its advertised default form); None: plain
        text is not this layer's query form (the layer is skipped with that reason)."""
        return query

    def has_built(self) -> bool:
        """Whether the layer has built anything (cheap): an empty index needs no change detection."""
        return True

    def warm(self) -> None:
        """Load what a first search would otherwise load inside its timebox (models)."""

    def context_for(self, h: str, span: Span, path: str | None) -> Mapping[str, Any] | None:
        """Match-time metadata this layer adds to any hit on ``span`` (e.g. its enclosing symbol)."""
        return None

    def pending(self, units: Sequence[Unit]) -> list[Unit]:
        """Of ``units``, those the layer has still to build (always-current layers: none)."""
        return []

    def build_stamp(self) -> Any:
        """A cheap value that, while it stays equal (read on one thread), keeps ``pending`` of
        the same units equal; None (the default): unknown, so callers look at ``pending``."""
        return None

    @property
    def build_version(self) -> str:
        """The version of what the layer builds (the scheduler's cursors are per version)."""
        return self.version

    def build_one(self, unit: Unit) -> str:
        """Build one unit now and say how it went ('ok', 'skipped' or 'failed'). The default
        goes through the protocol's ``build([unit], cancel)``; a layer that raises there has
        failed that unit (the scheduler goes on with the next)."""
        try:
            asyncio.run(self.build([unit], threading.Event()))
        except DeadlineExceeded:  # abandoned at the caller's deadline: still pending
            raise
        except Exception:  # one bad unit never fails the build
            return "failed"
        return "ok"

    def collect_garbage(self, live_hashes: set[str]) -> int:
        """Drop what was built for units that are no longer live; returns how many went."""
        return 0

    async def search(self, query, scope, budget, candidates=None) -> list[Hit]:  # pragma: no cover
        raise NotImplementedError

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        return None


#: the optional parts a protocol-only layer may lack, taken from :class:`BaseLayer`
OPTIONAL_HOOKS: tuple[str, ...] = (
    "origin", "granularity", "query_format", "cost", "cost_rank", "always_current",
    "early_candidates", "why_not", "default_query", "has_built", "warm", "context_for", "pending",
    "coverage", "collect_garbage",
)


class ProtocolLayer(BaseLayer):
    """A layer that implements only the protocol, with :class:`BaseLayer`'s defaults for the
    rest: the engine wraps such layers in this, so it can use every optional part directly.
    Whatever optional part the layer does have is its own; any other attribute is forwarded.

    A built layer (``always_current = False``) without its own ``pending`` is fed by the file
    index's change cursor: it has to build every unit whose content changed since the cursor
    the scheduler set after its last complete pass (all units before the first, or after a
    version change), less those built since in this process."""

    def __init__(self, inner: Any, ctx: LayerContext):
        super().__init__(ctx)
        self.inner = inner
        self.name, self.version, self.roles = inner.name, inner.version, frozenset(inner.roles)
        self._built: set[str] = set()
        for hook in OPTIONAL_HOOKS:
            if hasattr(inner, hook):
                setattr(self, hook, getattr(inner, hook))

    def pending(self, units: Sequence[Unit]) -> list[Unit]:
        if self.always_current:
            return []
        cursor = self.ctx.index.get_cursor(self.name)
        changed = None
        if cursor is not None and cursor[0] == self.build_version:
            changed = {r.hash for r in self.ctx.index.changes_since(cursor[1])}
        seen: set[str] = set()
        out = []
        for u in units:
            if u.hash in self._built or u.hash in seen or (changed is not None and u.hash not in changed):
                continue
            seen.add(u.hash)
            out.append(u)
        return out

    def coverage(self, scope: ScopeView) -> float:
        if self.always_current:
            return 1.0
        hashes = scope.hashes()
        return 1.0 - len(self.pending(scope.units())) / len(hashes) if hashes else 1.0

    def build_one(self, unit: Unit) -> str:
        state = super().build_one(unit)
        if state == "ok":
            self._built.add(unit.hash)
        return state

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def applies(self, scope: ScopeView) -> bool:
        return self.inner.applies(scope)

    def status(self, scope: ScopeView) -> LayerStatus:
        return self.inner.status(scope)

    async def search(self, query, scope, budget, candidates=None) -> list[Hit]:
        return await self.inner.search(query, scope, budget, candidates)

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        await self.inner.build(units, cancel)



def implements(layer: BaseLayer, hook: str) -> bool:
    """Whether ``layer`` has its own ``hook`` rather than :class:`BaseLayer`'s default."""
    if isinstance(layer, ProtocolLayer):
        return hasattr(layer.inner, hook)
    return getattr(type(layer), hook, None) is not getattr(BaseLayer, hook, None)


def as_layer(obj: Any, ctx: LayerContext) -> BaseLayer:
    """``obj`` itself when it is a :class:`BaseLayer`, else wrapped in :class:`ProtocolLayer`."""
    return obj if isinstance(obj, BaseLayer) else ProtocolLayer(obj, ctx)
