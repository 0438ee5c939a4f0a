"""Per-hit work done for the hits a search returns, not for a layer's whole pool (issue 26).

A layer's list is read by fusion for its spans, ranks and scores only; the costly rest of each
hit's evidence (bm25's sub-spans, late interaction's per-token explanation) is needed only for
the few hits the search returns. A layer that defers it returns *light* hits (every field but
the evidence's ``sub_spans`` and ``details`` already final) and hands its budget a
:data:`Finisher`: given one of its own light hits, the full :class:`~lar.core.types.Evidence`
that hit would have carried. The orchestrator runs it on the fused hits it returns
(``lar.engine.finishing``); a caller that runs a layer directly gets full hits, as before
(:meth:`lar.core.budget.Budget.settle`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from lar.core.types import Evidence, Hit

#: ``finish(light_hit) -> Evidence | None``: the full evidence of the layer's own hit (None: it
#: cannot be completed any more, e.g. its unit vanished; the hit is kept as it is)
Finisher = Callable[[Hit], "Evidence | None"]


def completed(ev: Evidence, full: Evidence | None) -> Evidence:
    """``ev`` (a light evidence, possibly re-ranked by fusion) with ``full``'s deferred parts."""
    if full is None or (full.sub_spans == ev.sub_spans and full.details == ev.details):
        return ev
    return replace(ev, sub_spans=full.sub_spans, details=full.details)


def complete_hits(layer: str, hits: Sequence[Hit], finish: Finisher) -> list[Hit]:
    """A layer's own light ``hits`` made full (what the layer returned before deferring)."""
    out = []
    for h in hits:
        ev = h.evidence[layer]
        new = completed(ev, finish(h))
        out.append(h if new is ev else replace(h, evidence={**h.evidence, layer: new}))
    return out


__all__ = ["Finisher", "complete_hits", "completed"]
