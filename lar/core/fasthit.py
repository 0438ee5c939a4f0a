"""A layer's own hit, built without re-checking what is already known to hold.

:func:`layer_hit` returns exactly what :meth:`lar.core.types.Hit.single` returns (an equal,
frozen hit) for the common case a layer produces by the hundred per query: a ``Span``, an ``int``
rank >= 1, a finite number score and well-formed sub-spans. It checks those few facts cheaply
and sets the fields directly, skipping the per-field validation and re-freezing of the two
dataclass constructors (about half of a bm25 call's hit-building time); anything else goes
through ``Hit.single``, which raises as usual.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Sequence

from lar.core.types import Evidence, Hit, Span

_set = object.__setattr__
# one read-only empty mapping shared by every fast hit's ``details`` and ``context`` (nothing
# holds the dict behind it, so it stays empty; equal to the fresh empty proxy Hit.single makes)
_EMPTY = MappingProxyType({})


def layer_hit(layer: str, span: Span, *, rank: int, score: float, score_kind: str,
              query: Any = None, sub_spans: Sequence[tuple[int, int]] = ()) -> Hit:
    """``Hit.single(layer, span, rank=..., score=..., score_kind=..., query=..., sub_spans=...)``."""
    try:
        value = float(score)
        if sub_spans:
            subs = tuple(tuple(x) for x in sub_spans)
            ok = all(0 <= s <= e for s, e in subs)
        else:  # most of a pool: no sub-spans to check
            subs, ok = (), True
    except (TypeError, ValueError):
        ok = False
    if not ok or type(span) is not Span or type(rank) is not int or rank < 1 or value != value:
        return Hit.single(layer, span, rank=rank, score=score, score_kind=score_kind, query=query,
                          sub_spans=tuple(sub_spans))
    ev = object.__new__(Evidence)
    _set(ev, "layer", layer)
    _set(ev, "rank", rank)
    _set(ev, "score", value)
    _set(ev, "score_kind", score_kind)
    _set(ev, "query", query)
    _set(ev, "sub_spans", subs)
    _set(ev, "details", _EMPTY)
    _set(ev, "evalue", None)
    _set(ev, "p_value", None)
    hit = object.__new__(Hit)
    _set(hit, "span", span)
    _set(hit, "signals", (layer,))
    _set(hit, "evidence", MappingProxyType({layer: ev}))
    _set(hit, "paths", ())
    _set(hit, "lines", None)
    _set(hit, "excerpt", "")
    _set(hit, "context", _EMPTY)
    _set(hit, "score", None)
    _set(hit, "rank", None)
    return hit


__all__ = ["layer_hit"]
