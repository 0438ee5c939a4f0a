"""Scoring with ranx: metric-name validation, ranked doc lists to ranx runs, TREC run files.

A ranking here is a best-first list of document ids (``{query_id: [doc_id, ...]}``); it becomes
a ranx run with strictly decreasing rank-derived scores (``n - position``) for scoring, so ranx
scores exactly the order lar returned (own scores can tie). The TREC run files carry each list's
own scores (:func:`write_trec`). A query with nothing retrieved gets a placeholder document that
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


def write_trec(path: Path, ranking: Ranking, tag: str, qids: Sequence[str],
               scores: Mapping[str, Mapping[str, float | None]] | None = None) -> dict[str, int | str]:
    """Write ``qid Q0 docid rank score tag`` lines (rank from 1) and return what was written.

    ``scores[qid][doc]`` is the list's own score (a route's, the fused one for a policy): a
    query whose every document has one is written with those scores (``repr`` of the float, so
    they read back exactly); any other query gets rank-derived scores (``n - position``).
    Returns ``{"lines", "queries", "own_scores", "rank_scores", "tied", "unordered", "scores"}``:
    how many queries carry own and rank-derived scores, how many of the own-scored ones hold
    equal scores at adjacent ranks (``tied``: trec_eval and ranx break ties by document id, so
    they may reorder those) or a score above the one before (``unordered``), and ``scores``
    (``own``, ``rank`` or ``mixed``). Queries with nothing retrieved have no line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = {"lines": 0, "queries": 0, "own_scores": 0, "rank_scores": 0, "tied": 0, "unordered": 0}
    with path.open("w", encoding="utf-8") as fh:
        for q in qids:
            docs = list(dict.fromkeys(ranking.get(q, ())))
            if not docs:
                continue
            stats["queries"] += 1
            own = [(scores or {}).get(q, {}).get(d) for d in docs]
            if all(isinstance(v, (int, float)) and math.isfinite(v) for v in own):
                values = [repr(float(v)) for v in own]
                stats["own_scores"] += 1
                stats["tied"] += any(a == b for a, b in zip(own, own[1:]))
                stats["unordered"] += any(b > a for a, b in zip(own, own[1:]))
            else:
                values = [f"{len(docs) - i:.1f}" for i in range(len(docs))]
                stats["rank_scores"] += 1
            for i, (d, v) in enumerate(zip(docs, values)):
                fh.write(f"{q} Q0 {d} {i + 1} {v} {tag}\n")
                stats["lines"] += 1
    kinds = [name for name, n in (("own", stats["own_scores"]), ("rank", stats["rank_scores"])) if n]
    return {**stats, "scores": "mixed" if len(kinds) > 1 else (kinds[0] if kinds else "none")}


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


def read_trec_scores(path: Path) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}`` of a TREC run file, the scores as written."""
    read_trec(path)  # validates the lines
    out: dict[str, dict[str, float]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, _, doc, _, score, _ = line.split()
            out.setdefault(qid, {})[doc] = float(score)
    return out


__all__ = ["METRIC_FAMILIES", "PLACEHOLDER_DOC", "check_metrics", "check_trec_ids", "evaluate",
           "read_trec", "read_trec_scores", "rounded", "to_run_dict", "write_trec"]


def latency(seconds: Sequence[float]) -> dict[str, float | None]:
    """Mean and 95th percentile (nearest rank) in milliseconds."""
    xs = sorted(seconds)
    if not xs:
        return {"mean": None, "p95": None}
    p95 = xs[max(0, math.ceil(0.95 * len(xs)) - 1)]
    return {"mean": round(1000 * statistics.fmean(xs), 3), "p95": round(1000 * p95, 3)}
