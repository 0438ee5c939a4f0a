"""Which layers a search runs: the caller's ``layers``/``exclude`` and a query mapping's names."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from lar.core.errors import UnknownLayerError
from lar.core.layer import BaseLayer
from lar.core.types import LayerRun, RunState


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
