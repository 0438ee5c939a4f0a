"""The deferred per-hit evidence, filled in for the fused hits a search returns (issue 26).

The layers run under deferring budgets (:attr:`DEFER`): each returns light hits and leaves a
finisher (:mod:`lar.core.deferred`). After the final fusion :func:`finish_fused` runs, for each
returned hit and each member layer that left one, that layer's finisher on the layer's own hit
(the fusion group's member) and puts the sub-spans and details it gives into the fused
evidence, whose fused rank, E-value and p-value stay. The rest of the pool is never completed:
fusion reads spans, ranks and scores only.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from lar.core.deferred import Finisher, completed
from lar.core.types import Hit

#: whether the orchestrator's layers defer their per-hit work (False: every layer completes its
#: whole pool, the path before issue 26; kept as the reference the tests compare with)
DEFER = True


def finish_fused(hits: Sequence[Hit], groups: Sequence, finishers: Mapping[str, Finisher]) -> tuple[Hit, ...]:
    """``hits`` (fused, from ``groups``: :class:`lar.fusion.grouping.Group`) with the deferred
    evidence of every layer in ``finishers`` completed; a finisher that fails leaves its
    evidence light (its unit is gone: enrichment drops the hit)."""
    if not finishers or not hits:
        return tuple(hits)
    by_key = {g.key: g for g in groups}
    out = []
    for hit in hits:
        group = by_key.get(hit.span.id)
        changed = {}
        for layer in hit.signals:
            finish = finishers.get(layer)
            member = group.members.get(layer) if group is not None else None
            if finish is None or member is None:
                continue
            try:
                full = finish(member)
            except Exception:  # a courtesy; never fail a call on it
                full = None
            ev = hit.evidence[layer]
            new = completed(ev, full)
            if new is not ev:
                changed[layer] = new
        out.append(replace(hit, evidence={**hit.evidence, **changed}) if changed else hit)
    return tuple(out)


__all__ = ["DEFER", "finish_fused"]
