"""The last step of a search: the returned hits ranked (within a token budget when asked) and
the ``Result`` made from the orchestrator's outcome."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from lar.core.request import SearchRequest
from lar.core.result import Result
from lar.core.types import Hit, LayerRun
from lar.engine.excerpts import within_tokens


def ranked(hits: Sequence[Hit], tokens: int | None) -> list[Hit]:
    """``hits`` cut to ``tokens`` (when given), ranked 1, 2, ... in their order."""
    if tokens is not None:
        hits = within_tokens(list(hits), tokens)
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(hits, 1)]


def search_result(request: SearchRequest, policy: str, out, hits: Sequence[Hit],
                  runs: Sequence[LayerRun], elapsed: float, t_call: float) -> Result:
    """The ``Result`` of ``request`` from the orchestrator's outcome ``out``
    (``lar.engine.orchestrator.SearchOutcome``) and the hits and runs made from it."""
    query = dict(request.query) if isinstance(request.query, Mapping) else request.query
    first = out.first_result + (out.started - t_call) if out.first_result is not None else None
    return Result(query=query, hits=tuple(hits), runs=tuple(runs), timebox=request.timebox,
                  elapsed=elapsed, k=request.k, fusion=policy, emphasis=request.emphasis,
                  first_result=first, pool=dict(out.pool), layer_hits=out.layer_hits,
                  score_scale=out.score_scale,
                  layers=tuple(request.layers) if request.layers is not None else None)


__all__ = ["ranked", "search_result"]
