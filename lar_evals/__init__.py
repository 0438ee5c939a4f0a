"""lar's evaluation harness: score routes, fusion policies and the default search with ranx.

``python -m lar_evals beir DIR --split test`` (or ``lar eval beir ...``); in Python::

    from lar_evals import load_beir, run_beir
    data = load_beir("/data/scifact", "test")
    summary = run_beir(data, routes=["bm25", "grep"], max_queries=100)

Modules: ``data`` (BEIR loading, corpus as files), ``run`` (the run and its JSON summary),
``metrics`` (ranx scoring, TREC run files), ``compare`` (paired tests with Holm correction,
route-unique relevant documents, per-type breakdown), ``attribution`` (why a relevant document
was missed), ``anytime`` (quality against the timebox), ``cli``. The harness uses lar's public
API (and ``lar.fusion.grouping`` / ``lar.fusion.policies`` for offline fusion); ranx comes with ``lar[eval]``.
"""
from __future__ import annotations

from lar_evals.anytime import DEFAULT_TIMEBOXES, anytime_curve
from lar_evals.data import BeirData, load_beir, materialise
from lar_evals.errors import EvalConfigError, EvalDataError, EvalError
from lar_evals.run import DEFAULT_FUSION, DEFAULT_METRICS, BeirEvaluation, evaluate_beir, run_beir

__all__ = [
    "DEFAULT_FUSION", "DEFAULT_METRICS", "DEFAULT_TIMEBOXES", "BeirData", "BeirEvaluation",
    "EvalConfigError", "EvalDataError", "EvalError", "anytime_curve", "evaluate_beir", "load_beir",
    "materialise", "run_beir",
]
