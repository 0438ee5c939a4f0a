"""The Layer protocol (seed section 5.4), its base class and what the engine hands a layer.

A layer is one module that registers a factory in the ``lar.layers`` entry-point group. The
factory is called with a ``LayerContext`` and returns an object satisfying ``Layer``.
Chunking, model, index format and tokenisation are private to each layer.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence, runtime_checkable

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


@dataclass(frozen=True, slots=True)
class Candidate:
    """A span handed to a refine layer, with the path it was found at."""

    span: Span
    path: str | None = None


class Budget:
    """A layer's share of the caller's timebox, plus the channel it reports progress on.

    Layers check ``expired()`` between units of work and return what they have; they may call
    ``set_coverage`` so the report says how much of the scope they processed.
    """

    def __init__(self, deadline: float, *, pool: int = 100, cancel: threading.Event | None = None):
        self.deadline = deadline
        self.pool = pool
        self.cancel = cancel or threading.Event()
        self.coverage: float | None = None
        self.notes: dict[str, Any] = {}
        self.first_hit_at: float | None = None
        self.offered: list[Hit] = []

    def offer(self, hits: list[Hit]) -> None:
        """Publish the hits found so far: if the layer is cancelled at the deadline, the
        orchestrator keeps these instead of nothing (anytime behaviour for long scans)."""
        self.offered = list(hits)

    @classmethod
    def seconds(cls, seconds: float, **kw) -> "Budget":
        return cls(time.monotonic() + seconds, **kw)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return self.cancel.is_set() or time.monotonic() >= self.deadline

    def set_coverage(self, fraction: float) -> None:
        self.coverage = min(1.0, max(0.0, float(fraction)))


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
    implement ``search``; always-current layers need no ``build``."""

    name: str = ""
    version: str = "1"
    roles: frozenset[str] = frozenset({"generate"})
    origin: str = "text"
    granularity: str = "line"
    query_format: str = "free text"
    cost: str = "cheap"
    cost_rank: int = 50  # lower runs first
    always_current: bool = True

    def __init__(self, ctx: LayerContext):
        self.ctx = ctx

    def applies(self, scope: ScopeView) -> bool:
        return True

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
        """How this layer reads a plain string query (its advertised default form)."""
        return query

    async def search(self, query, scope, budget, candidates=None) -> list[Hit]:  # pragma: no cover
        raise NotImplementedError

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        return None
