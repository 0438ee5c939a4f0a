"""How much of the scope each partial route saw, and what that does to its say in the fusion.

A route *covers part* of the scope when the timebox cut its scan short or its index is partly
built (:func:`lar.fusion.pipeline.covers_part`); a refine route that rescored a pool drawn from
such routes covers part too (its pool is no better than theirs). ``partial`` arguments of the
fusion are either route names or ``{route: coverage}`` (the share of the units it scored, None
when not known).

The rule (issue 22: a missing, partial or weak layer contributes less, never something wrong):

* :func:`coverage_factors`: each partial route's weight is multiplied by how much of the
  evidence it could have seen. With complete routes to compare against, that is the share of
  their leading keys it scored (a scan that reranked the right pool keeps its weight), never
  less than its coverage squared; with none, its coverage squared. Squared because a partial
  list is short of evidence twice: it scored a share ``c`` of the units, and its best are the
  best of that share only, so they stand out more in their own list than they would among all
  units (measured, ``benchmarks/bench_partial_coverage.py``: with grep cut at 40 %, bm25 at
  5 % and derived at 3 % built, the default was 0.6-0.7 point below grep alone with the factor
  ``c``, 0.0 to +3.4 above it with ``c ** 2``). A route at 5 % coverage no longer outvotes one
  at 40 % because its few units stand out in its own short list.
* :func:`weighted_rrf_scores`: the fallback when no route's list carries a background fit, RRF
  with each route's ranks counted by the same factor, so a partial list is not read as a whole one.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from lar.core.types import LayerRun, RunState
from lar.fusion.table import CandidateTable, Key

Lists = Mapping[str, Sequence[tuple[Key, float]]]


def coverages(partial: Iterable[str] | Mapping[str, float | None]) -> dict[str, float | None]:
    """``{route: coverage or None}`` of a ``partial`` argument (names alone: coverage unknown)."""
    if isinstance(partial, Mapping):
        return {r: (None if c is None else min(1.0, max(0.0, float(c)))) for r, c in partial.items()}
    return {r: None for r in partial}


def coverage_factors(lists: Lists, partial: Iterable[str] | Mapping[str, float | None],
                     depth: int) -> dict[str, float]:
    """The weight factor of each partial route of ``lists`` (see the module's docstring).

    The complete routes' leading keys are the union of their first ``depth`` keys; a route
    scoring a share ``o`` of them gets ``max(o, coverage ** 2)`` (``o`` when its coverage is not
    known). With no complete route listing anything, its coverage squared (1 when not known)."""
    cov = coverages(partial)
    cut = [r for r in lists if r in cov]
    top = {key for r, items in lists.items() if r not in cov for key, _ in items[:depth]}
    out = {}
    for r in cut:
        c = cov[r]
        if not top:
            out[r] = 1.0 if c is None else c * c
            continue
        seen = len(top.intersection(key for key, _ in lists[r])) / len(top)
        out[r] = seen if c is None else max(seen, c * c)
    return out


def weighted_rrf_scores(table: CandidateTable, factors: Mapping[str, float], c: float) -> dict[Key, float]:
    """RRF with route ``r``'s ranks counted ``factors.get(r, 1)`` times."""
    return {key: math.fsum(factors.get(r, 1.0) / (c + rank) for r, rank in cand.ranks.items())
            for key, cand in table.cands.items()}


def run_coverages(runs: Mapping[str, LayerRun], names: Iterable[str]) -> dict[str, float | None]:
    """``{name: coverage}`` of the runs among ``names`` that cover part of the scope: a generate
    run cut short by the timebox (its coverage, None when not reported) or partly built (coverage
    below 1), and, when some generate run covers part, every refine run (it rescored their pool:
    the largest coverage among those generate runs, None when unknown)."""
    names = [n for n in names if n in runs]

    def own(run: LayerRun) -> tuple[bool, float | None]:
        short = run.coverage is not None and run.coverage < 1.0
        return run.state is RunState.ABORTED or short, run.coverage if short else None

    out: dict[str, float | None] = {}
    for n in names:
        part, c = own(runs[n])
        if part and runs[n].role != "refine":
            out[n] = c
    known = [c for c in out.values() if c is not None]
    pool = max(known) if out and len(known) == len(out) else None
    fed_by_partial = bool(out)
    for n in names:
        if runs[n].role != "refine":
            continue
        part, c = own(runs[n])
        if fed_by_partial:
            part, c = True, (pool if c is None else c if pool is None else min(c, pool))
        if part:
            out[n] = c
    return out


__all__ = ["coverage_factors", "coverages", "run_coverages", "weighted_rrf_scores"]
