"""The fused :class:`~lar.core.types.Hit` of one group, built once.

:func:`fused_hit` gives exactly ``replace(with_probe(merged_hit(group, ranks), fits),
score=score, rank=rank)`` (:mod:`lar.fusion.grouping`, :mod:`lar.fusion.probe`) in one
construction instead of three, each of which re-checks and re-freezes the hit: fusion calls it
for every hit it returns.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from lar.core.types import Hit
from lar.fusion.grouping import Group, member_ranks, representative


def fused_hit(group: Group, ranks: Mapping[str, int] | None, fits: Mapping[str, Any],
              score: float, rank: int) -> Hit:
    """The group as one hit: each member's evidence with its rank in ``ranks`` (else the
    group's) and, where its layer has a background fit in ``fits``, its E-value and p-value;
    ``score`` and ``rank`` are the fused ones."""
    r = member_ranks(group, ranks)
    evidence = {}
    for layer, hit in group.members.items():
        ev = hit.evidence[layer]
        fit = fits.get(layer)
        if fit is None:
            evidence[layer] = replace(ev, rank=r[layer])
        else:
            evidence[layer] = replace(ev, rank=r[layer], evalue=fit.evalue(ev.score),
                                      p_value=fit.p_value(ev.score))
    rep_hit, paths = representative(group)
    return Hit(span=group.span, signals=tuple(group.members), evidence=evidence, paths=paths,
               lines=rep_hit.lines, excerpt=rep_hit.excerpt, context=rep_hit.context,
               score=float(score), rank=rank)


__all__ = ["fused_hit"]
