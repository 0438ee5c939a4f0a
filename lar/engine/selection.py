"""What a search runs over: the layers (the caller's ``layers``/``exclude`` and a query
mapping's names) and the live units a scope resolves against."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from lar.core.errors import UnknownLayerError
from lar.core.layer import BaseLayer, Unit
from lar.store import FileIndex
from lar.core.types import LayerRun, RunState


class LiveUnits:
    """The live units of the file index, cached until its sequence number moves (a callable:
    what a ``ScopeView`` resolves a scope against)."""

    def __init__(self, index: FileIndex):
        self.index = index
        self._cache: tuple[int, list[Unit]] | None = None

    def __call__(self) -> list[Unit]:
        seq = self.index.max_seq()
        cached = self._cache
        if cached is not None and cached[0] == seq:
            return cached[1]
        units = [Unit(r.path, r.hash, r.size, r.mtime_ns) for r in self.index.live()]
        self._cache = (seq, units)
        return units

    def forget(self) -> None:
        """Read the index again next time (it was replaced)."""
        self._cache = None


def select_layers(layers: Mapping[str, BaseLayer], query: Any, names: Sequence[str] | None,
                  exclude: Sequence[str] | None) -> tuple[list[tuple[str, BaseLayer]], list[LayerRun]]:
    """(chosen (name, layer) pairs in the engine's order, a skipped run for each of the rest).
    A name the engine does not have is an ``UnknownLayerError`` that lists the known ones."""
    known = list(layers)
    asked = list(names or []) + list(exclude or []) + (list(query) if isinstance(query, Mapping) else [])
    for n in asked:
        if n not in layers:
            raise UnknownLayerError(n, known)
    chosen, skipped = [], []
    for n in known:
        role = "generate" if "generate" in layers[n].roles else "refine"
        if names is not None and n not in names:
            skipped.append(LayerRun(n, RunState.SKIPPED, "not selected (layers=...)", role=role))
        elif exclude and n in exclude:
            skipped.append(LayerRun(n, RunState.SKIPPED, "excluded by the caller", role=role))
        elif isinstance(query, Mapping) and n not in query:
            skipped.append(LayerRun(n, RunState.SKIPPED, "not named in the query mapping", role=role))
        else:
            chosen.append((n, layers[n]))
    return chosen, skipped
