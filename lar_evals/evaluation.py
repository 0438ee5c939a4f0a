"""What a harness run keeps per query for its comparisons (:class:`BeirEvaluation`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class BeirEvaluation:
    """A run's summary plus what the comparisons need, per query.

    Labels: ``"route:<name>"``, ``"fusion:<policy>"`` and ``"default"``. ``rankings[label][qid]``:
    documents of the first ``k`` hits, best first; ``top[label][qid]``: documents of the first
    ``attribution_k`` hits (a policy fused again with ``k=attribution_k``, as a caller asking
    for that many hits gets it); ``pools[route][qid]``: every document the route returned (its
    whole candidate list); ``per_query[label][metric][qid]``: ranx values; ``scores[label][qid]``:
    ``{doc: score}`` for the documents of ``rankings`` (what the TREC run files carry).
    """

    summary: dict[str, Any]
    qids: list[str]
    qrels: dict[str, dict[str, int]]
    rankings: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    top: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    pools: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # label -> qid -> {doc: score}: a route's own score, a policy's fused score (None: none known)
    scores: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    scored: dict[str, dict[str, list[list]]] = field(default_factory=dict)
    # qid -> route -> the route's score background for the query (lar.core.background), when reported
    backgrounds: dict[str, dict[str, dict]] = field(default_factory=dict)
    root: Path | None = None
    path_to_doc: dict[str, str] = field(default_factory=dict)


__all__ = ["BeirEvaluation"]
