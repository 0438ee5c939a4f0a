"""A layer's share of a search: its deadline and pool, and the typed report it fills.

``Budget`` is what a layer's ``search`` receives; ``LayerReport`` is what the orchestrator reads
back into the run's :class:`~lar.core.types.LayerRun` (both re-exported by ``lar.core.layer``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.background import ScoreBackground
from lar.core.deferred import Finisher, complete_hits
from lar.core.types import Hit


@dataclass(frozen=True)
class LayerReport:
    """What a layer said about one run, besides its hits (the typed form of what it reported on
    its :class:`Budget`). The orchestrator carries all of it into the run's
    :class:`~lar.core.types.LayerRun`: ``partial`` makes the run ``aborted`` with ``truncated``
    (why it stopped early) and the ``warnings`` in its reason; ``notes`` and ``details`` (e.g. a
    pattern's per-language errors) go to ``run.notes`` / ``run.details``; ``probe`` (the layer's
    own probe features, e.g. hubness) and ``background`` (the moments of every score it computed,
    :mod:`lar.core.background`) to ``run.probe``."""

    partial: bool = False
    truncated: str = ""
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    probe: Mapping[str, Any] = field(default_factory=dict)
    background: ScoreBackground | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "probe", MappingProxyType(dict(self.probe)))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    def reason(self) -> str:
        """The run's reason text: why it stopped early (when partial), then the warnings."""
        parts = list(self.warnings)
        if self.partial:
            parts.insert(0, self.truncated or "timebox ended; returned partial results")
        return "; ".join(x for x in parts if x)


class Budget:
    """A layer's share of the caller's timebox, plus the channel it reports on.

    Layers check ``expired()`` between units of work and return what they have; they call
    ``set_coverage`` so the report says how much of the scope they processed, ``mark_partial``
    when they stopped early, ``warn`` / ``note`` / ``detail`` / ``set_probe`` /
    ``set_background`` for the rest of what they know (:class:`LayerReport`), and ``offer``
    with the hits found so far, which the orchestrator keeps if it has to cancel them.

    ``deferred`` (set by the orchestrator): the layer may return light hits and leave the costly
    per-hit evidence to a finisher run on the hits the search returns (:meth:`settle`,
    :mod:`lar.core.deferred`); ``finisher`` is the one it left.
    """

    def __init__(self, deadline: float, *, pool: int = 100, deferred: bool = False):
        self.deadline = deadline
        self.pool = pool
        self.deferred = deferred
        self.finisher: Finisher | None = None
        self.coverage: float | None = None
        self.offered: list[Hit] = []
        self._partial = False
        self._truncated = ""
        self._warnings: list[str] = []
        self._notes: list[str] = []
        self._probe: dict[str, Any] = {}
        self._background: ScoreBackground | None = None
        self._details: dict[str, Any] = {}

    @classmethod
    def seconds(cls, seconds: float, **kw) -> "Budget":
        return cls(time.monotonic() + seconds, **kw)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    # -- reporting ------------------------------------------------------------------------------
    def offer(self, hits: list[Hit]) -> None:
        """Publish the hits found so far: if the layer is cancelled at the deadline, the
        orchestrator keeps these instead of nothing (anytime behaviour for long scans)."""
        self.offered = list(hits)

    def settle(self, layer: str, hits: list[Hit], finish: Finisher) -> list[Hit]:
        """A layer's light ``hits`` as it returns them: as they are, with ``finish`` kept for
        the hits the search returns, when the budget is ``deferred``; else completed now."""
        if self.deferred:
            self.finisher = finish
            return hits
        return complete_hits(layer, hits, finish)

    def set_coverage(self, fraction: float) -> None:
        self.coverage = min(1.0, max(0.0, float(fraction)))

    def mark_partial(self, why: str = "") -> None:
        """The layer stopped before it had looked at everything (``why``: what it got through)."""
        self._partial = True
        if why:
            self._truncated = why

    @property
    def partial(self) -> bool:
        return self._partial

    def warn(self, text: str) -> None:
        """Something the caller should know about this run (e.g. corrupt artefacts dropped)."""
        self._warnings.append(str(text))

    def note(self, text: str) -> None:
        """Information about this run that is not a warning (e.g. units still being indexed)."""
        self._notes.append(str(text))

    def detail(self, key: str, value: Any) -> None:
        """A structured, layer-specific fact about this run (JSON-able)."""
        self._details[str(key)] = value

    def set_probe(self, **features: Any) -> None:
        """The layer's own probe features for this query (e.g. the hubness of its hits)."""
        self._probe.update(features)

    def set_background(self, background: ScoreBackground | None) -> None:
        """The moments of every score the layer computed for this query (a whole scan; fusion
        uses it only from :data:`lar.core.background.MIN_BACKGROUND` scores on)."""
        if background is not None and not isinstance(background, ScoreBackground):
            raise TypeError(f"set_background takes a ScoreBackground or None, got {type(background).__name__}")
        self._background = background

    def report(self) -> LayerReport:
        return LayerReport(self._partial, self._truncated, tuple(self._warnings), tuple(self._notes),
                           self._probe, self._background, self._details)
