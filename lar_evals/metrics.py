"""Scoring with ranx: metric-name validation, ranked doc lists to ranx runs, TREC run files.

A ranking here is a best-first list of document ids (``{query_id: [doc_id, ...]}``); it becomes
a ranx run with strictly decreasing rank-derived scores (``n - position``), because fused hits
have no score on a shared scale. A query with nothing retrieved gets a placeholder document that
is never relevant, so ranx scores it 0 instead of rejecting the run.
"""
from __future__ import annotations

import math
import statistics
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from lar_evals.errors import EvalConfigError, EvalDataError

# ranx metric families (ranx.metrics.metric_switch); each takes an optional cutoff "@k" and an
# optional relevance level "-l<n>"; rank-biased precision is written "rbp.<persistence>".
METRIC_FAMILIES: tuple[str, ...] = (
    "hits", "hit_rate", "precision", "recall", "f1", "r-precision", "mrr", "map", "ndcg",
    "ndcg_burges", "dcg", "dcg_burges", "bpref", "rbp",
)
_METRIC_RE = re.compile(r"^(?P<family>[a-z_-]+?)(?:@(?P<k>[1-9]\d*)|\.(?P<p>\d+))?(?:-l(?P<lvl>[1-9]\d*))?$")
PLACEHOLDER_DOC = "__no_result__"
Ranking = Mapping[str, Sequence[str]]


def check_metrics(metrics: Iterable[str] | str) -> list[str]:
    """The metric names, validated against ranx's metric families (error lists the valid ones)."""
    if isinstance(metrics, str):
        metrics = [m for m in metrics.split(",") if m.strip()]
    out: list[str] = []
    for m in metrics:
        if not isinstance(m, str):
            raise EvalConfigError(f"metric names are strings such as 'ndcg@10', got {m!r}")
        name = m.strip()
        match = _METRIC_RE.match(name)
        family = match.group("family") if match else None
        ok = match is not None and family in METRIC_FAMILIES
        if ok and family == "rbp":
            ok = match.group("p") is not None  # rbp needs its persistence: rbp.95
        elif ok:
            ok = match.group("p") is None
        if not ok:
            raise EvalConfigError(
                f"unknown metric {name!r}; valid ranx metrics: {', '.join(METRIC_FAMILIES)}, each "
                "optionally with a cutoff @k (e.g. ndcg@10, recall@100) and a relevance level "
                "-l<n>; rank-biased precision is written rbp.<persistence> (e.g. rbp.95)")
        if name not in out:
            out.append(name)
    if not out:
        raise EvalConfigError("give at least one metric, e.g. ndcg@10")
    return out


def to_run_dict(ranking: Ranking, qids: Iterable[str]) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` for exactly ``qids``; scores fall with the position."""
    out: dict[str, dict[str, float]] = {}
    for q in qids:
        docs = list(dict.fromkeys(ranking.get(q, ())))
        n = len(docs)
        out[q] = {d: float(n - i) for i, d in enumerate(docs)} or {PLACEHOLDER_DOC: 0.0}
    return out


def _ranx():
    from lar.core.errors import require

    return require("ranx", "eval")


def evaluate(qrels: Mapping[str, Mapping[str, int]], ranking: Ranking, metrics: Sequence[str],
             name: str = "run") -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Mean and per-query values of ``metrics`` over the queries of ``qrels``.

    Returns ``({metric: mean}, {metric: {qid: value}})``; an empty ``qrels`` gives NaN means."""
    ranx = _ranx()
    qids = sorted(qrels)
    if not qids:
        return {m: math.nan for m in metrics}, {m: {} for m in metrics}
    q = ranx.Qrels.from_dict({k: dict(qrels[k]) for k in qids})
    r = ranx.Run.from_dict(to_run_dict(ranking, qids), name=name)
    ranx.evaluate(q, r, list(metrics), return_mean=False, save_results_in_run=True)
    per_query = {m: {qid: float(r.scores[m][qid]) for qid in qids} for m in metrics}
    means = {m: float(sum(per_query[m].values()) / len(qids)) for m in metrics}
    return means, per_query


def rounded(values: Mapping[str, float], digits: int = 4) -> dict[str, float | None]:
    """Rounded copies for the JSON summary (NaN becomes None)."""
    return {k: (None if v is None or math.isnan(v) else round(float(v), digits)) for k, v in values.items()}


# -- TREC run files ---------------------------------------------------------------------------
def check_trec_ids(ids: Iterable[str], what: str) -> None:
    """TREC run lines are whitespace-separated: an id with whitespace cannot be written."""
    for i in ids:
        if not i or any(c.isspace() for c in i):
            raise EvalDataError(f"{what} id {i!r} is empty or contains whitespace; it cannot be "
                                "written to a TREC run file (leave out --runs-dir / out_dir)")


def write_trec(path: Path, ranking: Ranking, tag: str, qids: Sequence[str]) -> int:
    """Write ``qid Q0 docid rank score tag`` lines (rank from 1, rank-derived score); returns the
    number of lines. Queries with nothing retrieved have no line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for q in qids:
            docs = list(dict.fromkeys(ranking.get(q, ())))
            for i, d in enumerate(docs):
                fh.write(f"{q} Q0 {d} {i + 1} {len(docs) - i:.1f} {tag}\n")
                n += 1
    return n


def read_trec(path: Path) -> dict[str, list[str]]:
    """``{qid: [doc ids by rank]}`` of a TREC run file (for checks and the report)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for no, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise EvalDataError(f"expected 6 fields (qid Q0 docid rank score tag), got {len(parts)}",
                                path=str(path), line=no)
        try:
            rank = int(parts[3])
            float(parts[4])
        except ValueError:
            raise EvalDataError("rank must be an integer and score a number",
                                path=str(path), line=no) from None
        out.setdefault(parts[0], []).append((rank, parts[2]))
    return {q: [d for _, d in sorted(v)] for q, v in out.items()}


__all__ = ["METRIC_FAMILIES", "PLACEHOLDER_DOC", "check_metrics", "check_trec_ids", "evaluate",
           "read_trec", "rounded", "to_run_dict", "write_trec"]


def latency(seconds: Sequence[float]) -> dict[str, float | None]:
    """Mean and 95th percentile (nearest rank) in milliseconds."""
    xs = sorted(seconds)
    if not xs:
        return {"mean": None, "p95": None}
    p95 = xs[max(0, math.ceil(0.95 * len(xs)) - 1)]
    return {"mean": round(1000 * statistics.fmean(xs), 3), "p95": round(1000 * p95, 3)}
