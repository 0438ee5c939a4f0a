"""The anytime curve: quality and latency of the default search as the timebox grows.

For each timebox, every query runs once through ``eng.search(text, layers=routes, k=k,
timebox=tb)`` (the engine's default fusion). A row records the metrics, the mean and 95th
percentile latency, how many layer runs the deadline cut short (``aborted_runs``, summed over
queries and layers) and each layer's mean coverage at call time. Run it after the layers are
built (``run_beir`` does) to see the effect of the deadline rather than of lazy building.

:func:`stage_curves` shows what each stage of the cascade adds: the same curve for cumulative
layer sets in order of cost (:data:`STAGE_TIERS`: the lexical generate layers, then static /
structural / fuzzy, then dense, then late interaction, then the cross-encoder refine layer),
each row labelled with its stage and layers, so the gain of a stage at a given timebox is the
difference between its row and the previous stage's.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from lar.core.errors import LarError
from lar.core.timebox import parse_duration

from lar_evals.data import BeirData, doc_paths
from lar_evals.errors import EvalConfigError
from lar_evals.metrics import check_metrics, evaluate, rounded

DEFAULT_TIMEBOXES: tuple[float, ...] = (0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5)
# (stage name, highest layer cost_rank it adds): cumulative stages of the cascade
STAGE_TIERS: tuple[tuple[str, int], ...] = (("lexical", 39), ("+static", 69), ("+dense", 79),
                                            ("+late", 89), ("+rerank", 10 ** 6))


def check_timeboxes(values: Iterable[Any] | str) -> list[float]:
    """Seconds, from numbers or strings such as ``"200ms"``; a string may be comma-separated."""
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    out: list[float] = []
    for v in values:
        try:
            secs = parse_duration(v.strip() if isinstance(v, str) else v)
        except LarError as exc:
            raise EvalConfigError(f"anytime timeboxes: {exc}") from None
        if secs not in out:
            out.append(secs)
    if not out:
        raise EvalConfigError("give at least one timebox for the anytime curve, e.g. 0.025,0.1,1")
    return out


def _paths_from_engine(eng, data: BeirData) -> dict[str, str]:
    """The materialised layout of ``data`` under ``eng.root`` (extension read from the files)."""
    for unit in eng.inventory():
        suffix = Path(unit.path).suffix
        if suffix:
            return doc_paths(data, suffix)
    return {}


def anytime_curve(eng, data: BeirData, timeboxes: Sequence[Any] = DEFAULT_TIMEBOXES,
                  routes: Sequence[str] | None = None, metrics: Sequence[str] = ("ndcg@10",),
                  k: int = 100, *, qids: Sequence[str] | None = None, scope: Any = None,
                  path_to_doc: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per timebox: ``{"timebox_s", <metric>: value, "mean_ms", "p95_ms",
    "aborted_runs", "mean_coverage": {layer: x}}``. ``eng`` is open on the corpus written by
    :func:`lar_evals.data.materialise` (``path_to_doc`` is read from its files when not given)."""
    from lar_evals.query import docs_of_hits
    from lar_evals.metrics import latency

    metrics = check_metrics(metrics)
    boxes = check_timeboxes(timeboxes)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise EvalConfigError(f"k must be a positive integer, got {k!r}")
    qids = list(qids) if qids is not None else data.scored_queries()
    qrels = {q: data.qrels[q] for q in qids if data.qrels.get(q)}
    mapping = dict(path_to_doc) if path_to_doc is not None else _paths_from_engine(eng, data)
    layers = list(routes) if routes is not None else None
    rows = []
    for tb in boxes:
        ranking: dict[str, list[str]] = {}
        times: list[float] = []
        aborted = 0
        coverage: dict[str, list[float]] = {}
        for qid in qids:
            text = data.queries[qid]["text"]
            if not text.strip():
                continue
            t0 = time.perf_counter()
            res = eng.search(text, layers=layers, k=k, timebox=tb, scope=scope)
            times.append(time.perf_counter() - t0)
            ranking[qid] = docs_of_hits([h.paths for h in res.hits], mapping)
            for run in res.runs:
                if run.state.value == "aborted":
                    aborted += 1
                if run.coverage is not None and run.state.value in ("ran", "aborted"):
                    coverage.setdefault(run.name, []).append(run.coverage)
        means, _ = evaluate(qrels, ranking, metrics)
        lat = latency(times)
        rows.append({"timebox_s": tb, **rounded(means), "mean_ms": lat["mean"], "p95_ms": lat["p95"],
                     "aborted_runs": aborted,
                     "mean_coverage": {n: round(sum(v) / len(v), 4) for n, v in sorted(coverage.items())}})
    return rows


def stages_of(eng, routes: Sequence[str] | None = None) -> list[tuple[str, list[str]]]:
    """Cumulative ``(stage, layers)`` of ``routes`` (default: every layer of ``eng``) by
    :data:`STAGE_TIERS`; a stage that adds no layer is left out."""
    names = list(routes) if routes is not None else list(eng.layers)
    rank = {n: getattr(eng.layers[n], "cost_rank", 50) for n in names if n in eng.layers}
    unknown = [n for n in names if n not in rank]
    if unknown:
        raise EvalConfigError(f"unknown layers for the stage curves: {unknown}")
    out: list[tuple[str, list[str]]] = []
    done: list[str] = []
    low = -1
    for stage, top in STAGE_TIERS:
        added = [n for n in names if low < rank[n] <= top]
        low = top
        if added:
            done = done + added
            out.append((stage, list(done)))
    return out


def stage_curves(eng, data: BeirData, timeboxes: Sequence[Any] = DEFAULT_TIMEBOXES,
                 routes: Sequence[str] | None = None, **kw: Any) -> list[dict[str, Any]]:
    """The anytime curve of every cumulative stage (:func:`stages_of`): rows as
    :func:`anytime_curve`'s plus ``"stage"`` and ``"layers"``."""
    rows = []
    for stage, layers in stages_of(eng, routes):
        for row in anytime_curve(eng, data, timeboxes=timeboxes, routes=layers, **kw):
            rows.append({"stage": stage, "layers": layers, **row})
    return rows


__all__ = ["DEFAULT_TIMEBOXES", "STAGE_TIERS", "anytime_curve", "check_timeboxes", "stage_curves",
           "stages_of"]
