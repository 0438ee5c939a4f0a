"""The fused :class:`~lar.core.types.Hit` of one group, built once.

:func:`fused_hit` gives exactly ``replace(with_probe(merged_hit(group, ranks), fits),
score=score, rank=rank)`` (:mod:`lar.fusion.grouping`, :mod:`lar.fusion.probe`) in one
construction instead of three, each of which re-checks and re-freezes the hit: fusion calls it
for every hit it returns. The members' evidence and hits were checked when they were made, so
the copies set their fields directly (the new rank is checked by ``member_ranks``, the score
here); a score that is not a number goes through the checking constructors, which raise.
"""
from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.types import Evidence, Hit
from lar.fusion.grouping import Group, member_ranks, representative

_set = object.__setattr__


def _evidence(ev: Evidence, rank: int, evalue, p_value) -> Evidence:
    """``replace(ev, rank=rank, evalue=evalue, p_value=p_value)`` without re-checking ``ev``."""
    out = object.__new__(Evidence)
    _set(out, "layer", ev.layer)
    _set(out, "rank", rank)
    _set(out, "score", ev.score)
    _set(out, "score_kind", ev.score_kind)
    _set(out, "query", ev.query)
    _set(out, "sub_spans", ev.sub_spans)
    _set(out, "details", ev.details)
    _set(out, "evalue", evalue)
    _set(out, "p_value", p_value)
    return out


def fused_hit(group: Group, ranks: Mapping[str, int] | None, fits: Mapping[str, Any],
              score: float, rank: int) -> Hit:
    """The group as one hit: each member's evidence with its rank in ``ranks`` (else the
    group's) and, where its layer has a background fit in ``fits``, its E-value and p-value;
    ``score`` and ``rank`` are the fused ones."""
    r = member_ranks(group, ranks)
    value = float(score)
    checked = value == value and type(rank) is int and rank >= 1
    evidence = {}
    for layer, hit in group.members.items():
        ev = hit.evidence[layer]
        fit = fits.get(layer)
        e, p = (ev.evalue, ev.p_value) if fit is None else (fit.evalue(ev.score), fit.p_value(ev.score))
        evidence[layer] = _evidence(ev, r[layer], e, p) if checked else replace(ev, rank=r[layer], evalue=e, p_value=p)
    rep_hit, paths = representative(group)
    if not checked:
        return Hit(span=group.span, signals=tuple(group.members), evidence=evidence, paths=paths,
                   lines=rep_hit.lines, excerpt=rep_hit.excerpt, context=rep_hit.context,
                   score=value, rank=rank)
    out = object.__new__(Hit)
    _set(out, "span", group.span)
    _set(out, "signals", tuple(group.members))
    _set(out, "evidence", MappingProxyType(evidence))
    _set(out, "paths", paths)
    _set(out, "lines", rep_hit.lines)
    _set(out, "excerpt", rep_hit.excerpt)
    _set(out, "context", rep_hit.context)
    _set(out, "score", value)
    _set(out, "rank", rank)
    return out


__all__ = ["fused_hit"]
