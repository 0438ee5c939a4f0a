"""Score lar's routes, fusion policies and default search on a BEIR split.

:func:`run_beir` (and :func:`evaluate_beir`, which also returns the per-query lists):

1. writes the corpus as files (:func:`lar_evals.data.materialise`) and opens ``lar.open(root)``;
2. builds the selected building layers, one after the other, within ``build_timebox`` seconds
   in all, and records each layer's build time and coverage (``eng.status()``);
3. for every query (:func:`lar_evals.query.run_query`): (a) each route alone, ``eng.search(text,
   layers=[route], k=pool, timebox=timebox)`` with ``pool = max(20, 5 k)``, the depth the
   orchestrator takes from each layer; (b) each fusion policy computed offline from those
   per-route hit lists with ``lar.fusion.grouping.group_hits`` + ``runs_for_fusion`` +
   ``lar.fusion.policies.fuse(policy, runs, k=k, c=rrf_c)``: exactly the orchestrator's last step, routes
   in the orchestrator's order (generate layers by cost, then refine layers); (c) "default": one
   real ``eng.search(text, layers=routes, k=k, timebox=timebox)`` with the engine's default
   fusion;
4. maps hits to documents (every path of a hit; a document keeps its best rank) and scores the
   first ``k`` hits of each list with ranx; a route alone is cut to its first ``k`` hits, like a
   caller asking it for ``k`` hits;
5. adds the comparisons (:mod:`lar_evals.compare`), the miss attribution (:mod:`lar_evals.attribution`),
   the per-query-type breakdown and, when asked, the anytime curve (:mod:`lar_evals.anytime`), and
   writes TREC run files (``runs/route-<name>.trec``, ``runs/fusion-<policy>.trec``,
   ``runs/default.trec``).

Each route alone gets the whole timebox, while the default search shares one timebox among the
routes; offline fusion therefore shows what fusion does with complete route lists.

Summary (``"schema": 1``; documented in ``lar_evals/README.md``)::

    {"schema", "dataset", "split", "n_queries", "settings": {...},
     "routes": {route: {metric: value}}, "fusion": {policy: {metric: value}},
     "default": {metric: value},
     "timing": {"build_s": {layer: s}, "query_ms": {route | policy | "default": {"mean", "p95"}}},
     "coverage": {layer: fraction}, "run_states": {"routes": {...}, "default": {...}},
     "data_report": {...}, "comparisons": {...}, "attribution": {...}, "per_type": {...},
     "anytime": [...] (only when asked), "runs_dir": path | null}
"""
from __future__ import annotations

import inspect
import math
import random
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lar.core.errors import UnknownLayerError
from lar.fusion.policies import POLICIES

from lar_evals.data import BeirData, materialise
from lar_evals.errors import EvalConfigError
from lar_evals.evaluation import BeirEvaluation
from lar_evals.metrics import check_metrics, check_trec_ids, evaluate, latency, rounded, write_trec
from lar_evals.query import docs_of_hits, run_query, scored_docs  # noqa: F401  (re-exported)

SCHEMA_VERSION = 2
DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10", "map")
DEFAULT_FUSION: tuple[str, ...] = ("adaptive", "rrf", "route-unique", "combsum", "combmnz")


# -- validation -------------------------------------------------------------------------------
def check_policies(fusion: Sequence[str] | str) -> list[str]:
    if isinstance(fusion, str):
        fusion = [p.strip() for p in fusion.split(",") if p.strip()]
    out = []
    for p in fusion:
        if p not in POLICIES:
            raise EvalConfigError(f"unknown fusion policy {p!r}; valid policies: {', '.join(POLICIES)}")
        if p not in out:
            out.append(p)
    return out


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EvalConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


def _positive_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
        raise EvalConfigError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)


def resolve_routes(eng, routes: Sequence[str] | str | None) -> list[str]:
    """The routes to score, in the engine's order; unknown names raise ``UnknownLayerError``."""
    known = list(eng.layers)
    if routes is None:
        return known
    if isinstance(routes, str):
        routes = [r.strip() for r in routes.split(",") if r.strip()]
    for r in routes:
        if r not in eng.layers:
            raise UnknownLayerError(r, known)
    if not routes:
        raise EvalConfigError(f"give at least one route; known layers: {', '.join(known)}")
    return [n for n in known if n in routes]


def select_queries(data: BeirData, max_queries: int | None, seed: int) -> list[str]:
    """Scored queries in file order; ``max_queries`` draws a seeded random sample of them."""
    qids = data.scored_queries()
    if max_queries is not None:
        _positive_int(max_queries, "max_queries")
        if max_queries < len(qids):
            keep = set(random.Random(seed).sample(qids, max_queries))
            qids = [q for q in qids if q in keep]
    return qids


# -- building and timing ----------------------------------------------------------------------
def build_layers(eng, routes: Sequence[str], timebox: float,
                 progress: Callable[[str, int, int], None] | None = None,
                 slice_s: float = 2.0) -> tuple[dict[str, float], dict[str, Any]]:
    """Build each selected building layer in turn within ``timebox`` seconds in all.

    With ``progress`` each layer is built in slices of ``slice_s`` seconds (the builder resumes
    where it stopped) and ``progress(layer, units built, units in all)`` is called after each;
    the report sums the slices' counts and takes the rest (state, pending, coverage, reason)
    from the last slice alone: an early slice's "model still loading" is not the outcome."""
    deadline = time.monotonic() + timebox
    seconds: dict[str, float] = {}
    reports: dict[str, Any] = {}
    for name in routes:
        if getattr(eng.layers[name], "always_current", True):
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            reports[name] = {"state": "not started: build timebox spent"}
            seconds[name] = 0.0
            continue
        t0 = time.perf_counter()
        if progress is None:
            rep = eng.build(timebox=left, layers=[name])
            reports[name] = rep.get("layers", {}).get(name, {})
        else:
            total: dict[str, Any] = {"ok": 0, "skipped": 0, "failed": 0}
            first_pending = None
            while True:
                left = deadline - time.monotonic()
                got = eng.build(timebox=max(0.001, min(slice_s, left)), layers=[name]
                                ).get("layers", {}).get(name, {})
                if first_pending is None:
                    first_pending = sum(got.get(k, 0) for k in ("ok", "skipped", "failed")) + got.get("pending", 0)
                counts = {k: total[k] + got.get(k, 0) for k in ("ok", "skipped", "failed")}
                total = {**counts, **{k: v for k, v in (got or total).items() if k not in counts}}
                done = total["ok"] + total["skipped"] + total["failed"]
                progress(name, done, max(first_pending, done))
                if not got or got.get("pending", 0) == 0 or deadline - time.monotonic() <= 0:
                    break
            reports[name] = total
        seconds[name] = round(time.perf_counter() - t0, 3)
    return seconds, reports


def write_route_lists(path: Path, ev: "BeirEvaluation") -> None:
    """One JSON line per query, ``{"qid", "routes": {route: [[doc, score], ...]}, "backgrounds":
    {route: {"n", "mean", "std"}}}`` (gzip): every route's whole list with the layers' own scores
    and each scanning route's score background, for fusion studies and fits without re-running."""
    import gzip
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for qid in ev.qids:
            fh.write(json.dumps({"qid": qid, "routes": ev.scored.get(qid, {}),
                                 "backgrounds": ev.backgrounds.get(qid, {})}) + "\n")


def _count_states(per_query: Sequence[Mapping[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for states in per_query:
        for name, state in states.items():
            out.setdefault(name, {})
            out[name][state] = out[name].get(state, 0) + 1
    return out


# -- the whole run ----------------------------------------------------------------------------
def evaluate_beir(data: BeirData, *, routes: Sequence[str] | str | None = None,
                  fusion: Sequence[str] | str = DEFAULT_FUSION, rrf_c: float = 60.0, k: int = 100,
                  timebox: float = 5.0, build_timebox: float = 600.0,
                  metrics: Sequence[str] | str = DEFAULT_METRICS, max_queries: int | None = None,
                  seed: int = 0, state_dir: str | Path | None = None,
                  config: Mapping[str, Any] | None = None, out_dir: str | Path | None = None,
                  runs_dir: str | Path | None = None, cache_root: str | Path | None = None,
                  ext: str = "auto", scope: Any = None, attribution_k: int = 10,
                  anytime: Sequence[float] | None = None, anytime_queries: int | None = None,
                  anytime_stages: bool = False, checkpoint: str | Path | None = None,
                  stat_test: str = "student", correction: str = "holm",
                  comparisons: Sequence[str] | str | None = None, alpha: float = 0.05,
                  per_query_table: str | Path | None = None,
                  anchors: Sequence[str] | str | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  build_progress: Callable[[str, int, int], None] | None = None) -> BeirEvaluation:
    """Run the evaluation (see the module docstring) and keep the per-query lists.
    ``checkpoint``: a JSONL file each finished query is appended to; a rerun with the same file
    and settings skips the queries it holds (:mod:`lar_evals.checkpoint`). ``stat_test``
    (``student``, ``fisher``), ``correction`` (``holm``, ``bonferroni``, ``fdr_bh``, ``none``),
    ``comparisons`` (``["adaptive/best", ...]``, default: :func:`lar_evals.compare.default_comparisons`)
    and ``alpha``: the significance tests (:mod:`lar_evals.significance`). ``progress(done,
    total)`` after each query and ``build_progress(layer, built, total)`` during the build
    (:class:`lar_evals.progress.Bars` gives both)."""
    import lar

    from lar_evals.significance import check_test

    from lar_evals.anytime import anytime_curve, check_timeboxes, stage_curves
    from lar_evals.attribution import attribute
    from lar_evals.compare import compare_all, per_type_breakdown
    from lar_evals.per_query import per_query_section, wins_losses, write_table

    metrics = check_metrics(metrics)
    fusion = check_policies(fusion)
    check_test(stat_test, correction)
    if anchors is not None:
        from lar_evals.anchors import check_anchors

        anchors = check_anchors(anchors)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise EvalConfigError(f"alpha must be between 0 and 1, got {alpha!r}")
    k = _positive_int(k, "k")
    attribution_k = _positive_int(attribution_k, "attribution_k")
    timebox = _positive_float(timebox, "timebox")
    build_timebox = _positive_float(build_timebox, "build_timebox")
    if isinstance(rrf_c, bool) or not isinstance(rrf_c, (int, float)) or not rrf_c > 0:
        raise EvalConfigError(f"rrf_c must be a positive number (usually 60), got {rrf_c!r}")
    anytime = check_timeboxes(anytime) if anytime is not None else None
    if anytime_queries is not None:
        anytime_queries = _positive_int(anytime_queries, "anytime_queries")
    qids = select_queries(data, max_queries, seed)
    if out_dir is not None and runs_dir is None:
        runs_dir = Path(out_dir) / "runs"
    if runs_dir is not None:
        check_trec_ids(qids, "query")
        check_trec_ids(data.corpus, "document")
    root, path_to_doc = materialise(data, cache_root, ext)
    # the harness's searches are not an agent's calls: no call log (its writer would tokenise
    # every result beside the timed searches); config={"call_log": True} keeps it
    eng = lar.open(root, state=state_dir, config={"call_log": False, **dict(config or {})})
    try:
        routes = resolve_routes(eng, routes)
        order = eng.layer_order(routes)  # the orchestrator's order: fusion reads lists in it
        build_s, build_reports = build_layers(eng, routes, build_timebox, build_progress)
        status = {ls.name: ls for ls in eng.status(scope).layers}
        coverage = {r: round(status[r].coverage, 4) for r in routes}
        ev = BeirEvaluation(summary={}, qids=qids, qrels={q: data.qrels[q] for q in qids},
                            root=root, path_to_doc=path_to_doc)
        times: dict[str, list[float]] = {}
        route_states, default_states = [], []
        ckpt = None
        if checkpoint is not None:
            from lar_evals.checkpoint import Checkpoint

            ckpt = Checkpoint(checkpoint, data.name, data.split, {
                "routes": routes, "fusion": fusion, "rrf_c": float(rrf_c), "k": k,
                "attribution_k": attribution_k, "timebox": timebox, "max_queries": max_queries,
                "seed": seed, "scope": None if scope is None else str(scope),
                "config": dict(config or {})})
        for i, qid in enumerate(qids):
            text = data.queries[qid]["text"]
            if ckpt is not None and qid in ckpt.done:
                got = ckpt.done[qid]
            elif text.strip():
                got = run_query(eng, text, routes=routes, order=order, fusion=fusion, k=k,
                                attribution_k=attribution_k, rrf_c=rrf_c, timebox=timebox,
                                scope=scope, path_to_doc=path_to_doc)
            else:  # an empty query retrieves nothing (and scores 0)
                got = {"rankings": {}, "top": {}, "pools": {}, "times": {}, "states": {},
                       "default_states": {}}
            if ckpt is not None and qid not in ckpt.done:
                ckpt.add(qid, got)
            ev.scored[qid] = got.get("scored", {})
            ev.backgrounds[qid] = got.get("backgrounds", {})
            for label, doc_score in got.get("scores", {}).items():
                ev.scores.setdefault(label, {})[qid] = doc_score
            for part in ("rankings", "top", "pools"):
                store = getattr(ev, part)
                for label, docs in got[part].items():
                    store.setdefault(label, {})[qid] = docs
            for label, s in got["times"].items():
                times.setdefault(label, []).append(s)
            route_states.append(got["states"])
            default_states.append(got["default_states"])
            if progress is not None:
                progress(i + 1, len(qids))
        if ckpt is not None:
            ckpt.close()
        labels = [f"route:{r}" for r in routes] + [f"fusion:{p}" for p in fusion] + ["default"]
        scores: dict[str, dict[str, float]] = {}
        for label in labels:
            means, per_q = evaluate(ev.qrels, ev.rankings.get(label, {}), metrics, name=label)
            scores[label] = means
            ev.per_query[label] = per_q
        summary: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "dataset": data.name,
            "split": data.split,
            "n_queries": len(qids),
            "settings": {"routes": routes, "fusion": fusion, "rrf_c": float(rrf_c), "k": k,
                         "timebox": timebox, "build_timebox": build_timebox, "metrics": metrics,
                         "max_queries": max_queries, "seed": seed, "attribution_k": attribution_k,
                         "scope": scope, "corpus_root": str(root), "state_dir": str(eng.state_dir),
                         "lar_version": getattr(lar, "__version__", None),
                         "stat_test": stat_test, "correction": correction, "alpha": float(alpha),
                         "anchors": anchors,
                         "comparisons": comparisons,
                         "checkpoint": None if ckpt is None else str(ckpt.path),
                         "resumed_queries": 0 if ckpt is None else len(ckpt.resumed)},
            "routes": {r: rounded(scores[f"route:{r}"]) for r in routes},
            "fusion": {p: rounded(scores[f"fusion:{p}"]) for p in fusion},
            "default": rounded(scores["default"]),
            "timing": {"build_s": build_s,
                       "query_ms": {label.split(":", 1)[-1]: latency(times.get(label, []))
                                    for label in labels}},
            "coverage": coverage,
            "build": build_reports,
            "run_states": {"routes": _count_states(route_states),
                           "default": _count_states(default_states)},
            "data_report": dict(data.report),
        }
        ev.summary = summary
        anchor_labels: list[str] = []
        if anchors:
            from lar_evals.anchors import run_anchors

            got = run_anchors(data.corpus, {q: data.queries[q]["text"] for q in qids}, ev.qrels,
                              anchors, metrics, k)
            summary["anchors"] = {}
            for name, res in got.items():
                if "skipped" in res:
                    summary["anchors"][name] = res
                    continue
                label = f"anchor:{name}"
                anchor_labels.append(label)
                ev.per_query[label] = res["per_query"]
                ev.rankings[label] = res["rankings"]
                ev.scores[label] = res["scores"]
                summary["anchors"][name] = {"metrics": res["metrics"], "build_s": res["build_s"],
                                            "query_ms": res["query_ms"], "settings": res["settings"]}
        summary["comparisons"] = compare_all(ev, routes, fusion, metrics, attribution_k,
                                             comparisons=comparisons, stat_test=stat_test,
                                             correction=correction, alpha=float(alpha), seed=seed,
                                             extra_labels=anchor_labels)
        summary["attribution"] = attribute(eng, ev, routes, k=attribution_k, scope=scope)
        summary["per_type"] = per_type_breakdown(ev, data, labels, metrics)
        summary["per_query"] = per_query_section(ev, data, labels + anchor_labels, metrics)
        best = summary["comparisons"]["significance"].get("best_route")
        if best is not None:
            summary["wins_losses"] = {"a": "default", "b": f"route:{best}", "metric": metrics[0],
                                      **wins_losses(summary["per_query"], "default",
                                                    f"route:{best}", metrics[0], n=10)}
        if anytime:
            curve_qids = qids
            if anytime_queries is not None and anytime_queries < len(qids):
                keep = set(random.Random(seed).sample(qids, anytime_queries))
                curve_qids = [q for q in qids if q in keep]
            summary["settings"]["anytime_queries"] = len(curve_qids)
            summary["anytime"] = anytime_curve(eng, data, timeboxes=anytime, routes=routes,
                                               metrics=metrics, k=k, qids=curve_qids, scope=scope,
                                               path_to_doc=path_to_doc)
            if anytime_stages:
                summary["anytime_stages"] = stage_curves(eng, data, timeboxes=anytime, routes=routes,
                                                         metrics=metrics, k=k, qids=curve_qids,
                                                         scope=scope, path_to_doc=path_to_doc)
        summary["runs_dir"] = None
        if runs_dir is not None:
            runs_dir = Path(runs_dir)
            files = {}
            for label in labels + anchor_labels:
                name = label.replace(":", "-")
                files[label] = write_trec(runs_dir / f"{name}.trec", ev.rankings.get(label, {}),
                                          f"lar-{name}", qids, ev.scores.get(label))
            write_route_lists(runs_dir / "route-lists.jsonl.gz", ev)
            summary["runs_dir"] = str(runs_dir)
            summary["run_files"] = files
            if per_query_table is None:
                per_query_table = runs_dir / "per-query.tsv"
        summary["per_query_table"] = None
        if per_query_table is not None:
            summary["per_query_table"] = str(write_table(per_query_table, summary["per_query"]))
        if out_dir is not None:
            from lar_evals.io import write_json

            write_json(Path(out_dir) / "summary.json", summary)
        return ev
    finally:
        eng.close()


def run_beir(data: BeirData, **options: Any) -> dict[str, Any]:
    """Run the evaluation and return the JSON summary; options as :func:`evaluate_beir`."""
    return evaluate_beir(data, **options).summary


run_beir.__signature__ = inspect.signature(evaluate_beir).replace(  # type: ignore[attr-defined]
    return_annotation="dict[str, Any]")


__all__ = ["DEFAULT_FUSION", "DEFAULT_METRICS", "SCHEMA_VERSION", "BeirEvaluation", "build_layers",
           "check_policies", "docs_of_hits", "evaluate_beir", "latency",
           "resolve_routes", "run_beir", "run_query", "select_queries"]
