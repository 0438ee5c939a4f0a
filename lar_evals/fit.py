"""Fit and score the adaptive fusion model from recorded route lists, without re-running searches.

``python -m lar_evals fit --set BEIR_DIR SPLIT RUNS_DIR [--set ...] [--holdout BEIR_DIR SPLIT RUNS_DIR]
--out MODEL.json --report REPORT.json``

Each ``RUNS_DIR`` is the run-file folder of a ``beir`` run (its ``route-lists.jsonl.gz`` holds
every route's whole list with the layers' scores), or several such folders, comma-separated,
whose routes are joined per query. The fit is cross-fitted: each training set's
queries are split into ``--folds`` seeded folds; the model fitted on the other folds of *all*
training sets ranks each fold's queries, so every reported figure is held out. Holdout sets are
ranked by the model fitted on all training queries. Single routes, RRF, route-unique, CombSUM,
``pvalue`` (equal weights on the evidence scale) and ``adaptive`` (fitted) are scored with ranx,
with paired t-tests (Holm-corrected) of the fitted policy against the best single route and RRF.
The final model, fitted on every training query, is written to ``--out`` with the names of the
data it saw and its held-out figures.

The model: :class:`lar.fusion.model.FusionModel`, three weights per route (``base``,
``signal``, ``agree``), fitted by a listwise softmax loss pulled towards equal weights
(``--method listwise``, the default, :mod:`lar_evals.fit_listwise`) or by coordinate ascent over
small grids on the mean nDCG@10 (``--method ascent``, :mod:`lar_evals.fit_ascent`), and one score
normalisation (``--norms``: evidence, tailz, minmax, zscore, bgz), the one whose fitted weights
score the best nDCG@10 on the fit's own training queries. One ``--set`` gives a model for that corpus
(its dev split's halves are fitted and scored in turn); several give one joint model.
"""
from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from lar.fusion.policies import fuse
from lar.fusion.model import FusionModel, MODEL_NORMS, RouteWeights

from lar_evals.data import load_beir
from lar_evals.errors import EvalConfigError, EvalDataError
from lar_evals.fit_ascent import GRIDS, MIN_GAIN, fit_params
from lar_evals.fit_data import QueryBatch, QueryData, query_data, query_scores, objective
from lar_evals.fit_listwise import L2, fit_listwise
from lar_evals.metrics import evaluate, rounded

#: how the weights are fitted: the listwise loss (default) or coordinate ascent on nDCG@10
METHODS = ("listwise", "ascent")
#: how the scale is chosen: by the training nDCG@10 of the weights fitted on the training
#: queries (default) or by an inner two-fold cross-fit on them
SELECTS = ("train", "inner")
#: decimals of a fitted weight: the saved model stays readable, the ranking does not change
DECIMALS = 4

METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
BASELINES = ("rrf", "route-unique", "combsum", "pvalue")
NORMS = MODEL_NORMS  # tried by every fit unless --norms narrows them
K = 100


@dataclass
class FitSet:
    name: str
    qrels: dict[str, dict[str, int]]
    lists: dict[str, dict[str, list[tuple[str, float]]]]   # qid -> route -> [(doc, score)]
    types: dict[str, str]
    # qid -> route -> the route's score background (lar.core.background), for the "bgz" norm
    backgrounds: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_set(beir_dir: str, split: str, runs_dir: str) -> FitSet:
    """Qrels (and query types) from the BEIR folder, lists from ``runs_dir/route-lists.jsonl.gz``.
    ``runs_dir`` may name several run folders, comma-separated (runs of different routes over
    the same queries, e.g. the costly routes in one run and the cheap ones in another): their
    routes are joined per query, over the queries every folder holds; a route in two folders
    must have the same lists in both (a deterministic layer run twice), else it is an error."""
    data = load_beir(beir_dir, split)
    lists: dict[str, dict[str, list[tuple[str, float]]]] = {}
    backgrounds: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    qids: set[str] | None = None
    for one in [d.strip() for d in str(runs_dir).split(",") if d.strip()]:
        got, got_bg = _read_route_lists(Path(one) / "route-lists.jsonl.gz")
        for route in {r for per in got.values() for r in per}:
            if route in owner and any(lists.get(q, {}).get(route) != per.get(route)
                                      for q, per in got.items() if q in lists):
                raise EvalConfigError(f"route {route!r} is in both {owner[route]} and {one}, with "
                                      "different lists; give each route's lists once")
            owner.setdefault(route, one)
        for q, per in got.items():
            lists.setdefault(q, {}).update(per)
            backgrounds.setdefault(q, {}).update(got_bg.get(q, {}))
        qids = set(got) if qids is None else qids & set(got)
    if qids is None:
        raise EvalConfigError(f"no runs dir given for {beir_dir} {split}")
    qrels = {q: dict(data.qrels[q]) for q in lists if q in qids and data.qrels.get(q)}
    types = {q: t for q in qrels if (t := data.query_type(q)) is not None}
    name = data.name if data.name.endswith(split) else f"{data.name}-{split}"
    return FitSet(name, qrels, {q: lists[q] for q in qrels}, types,
                  {q: backgrounds.get(q, {}) for q in qrels})


def _read_route_lists(path: Path) -> tuple[dict[str, dict[str, list]], dict[str, dict[str, Any]]]:
    """``({qid: {route: [(doc, score), ...]}}, {qid: {route: background}})`` of one run."""
    if not path.is_file():
        raise EvalConfigError(f"{path} is missing: run `python -m lar_evals beir` with a runs dir first")
    lists: dict[str, dict[str, list[tuple[str, float]]]] = {}
    backgrounds: dict[str, dict[str, Any]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            try:
                row = json.loads(line)
                lists[row["qid"]] = {r: [(d, s) for d, s in items if s is not None]
                                     for r, items in row["routes"].items()}
                backgrounds[row["qid"]] = dict(row.get("backgrounds") or {})
            except (ValueError, KeyError, TypeError) as exc:
                raise EvalDataError(f"not a route-list line ({exc})", path=str(path), line=no) from None
    return lists, backgrounds


def to_model(params: np.ndarray, routes: Sequence[str], **meta: Any) -> FusionModel:
    """The :class:`FusionModel` of fitted ``params``; ``meta`` are its other fields."""
    weights = {r: RouteWeights(float(p[0]), float(p[1]), float(p[2])) for r, p in zip(routes, params)}
    return FusionModel(weights, RouteWeights(1.0), **meta)  # unseen routes: equal weight


def _ticker(progress: Callable[[int, int], None], total: int) -> Callable[[], None]:
    """A callable that reports one more of ``total`` steps done to ``progress`` each call."""
    done = [0]

    def tick() -> None:
        done[0] += 1
        progress(done[0], total)

    return tick


def _rank(q: QueryData, scores: np.ndarray, k: int = K) -> list[str]:
    return [q.docs[i] for i in np.argsort(-scores, kind="stable")[:k]]


def folds_of(qids: Sequence[str], folds: int, seed: int) -> list[list[str]]:
    order = sorted(qids)
    random.Random(seed).shuffle(order)
    return [sorted(order[i::folds]) for i in range(folds)]


def _baselines(fs: FitSet, routes: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {f"route:{r}": {} for r in routes}
    out.update({f"fusion:{p}": {} for p in BASELINES})
    for qid, lists in fs.lists.items():
        for r in routes:
            out[f"route:{r}"][qid] = [d for d, _ in lists.get(r, [])][:K]
        runs = {r: lists[r] for r in routes if lists.get(r)}
        for p in BASELINES:
            out[f"fusion:{p}"][qid] = [it.key for it in fuse(p, runs, k=K)] if runs else []
    return out


def run_fit(train: Sequence[FitSet], holdout: Sequence[FitSet] = (), *, folds: int = 2,
            seed: int = 0, metrics: Sequence[str] = METRICS,
            norms: Sequence[str] = NORMS, min_gain: float | None = None, method: str = "listwise",
            l2: float | None = None, select: str = "train",
            progress: Callable[[int, int], None] | None = None) -> tuple[FusionModel, dict[str, Any]]:
    """Cross-fit on ``train``, score every set, fit the final model on all training queries.
    ``progress(done, total)`` (e.g. ``lar_evals.progress.Bars().fit``) is called after each
    step: each fold's fit, the final fit, each set scored.

    Each fit tries every normalisation in ``norms`` and keeps the one whose fitted weights score
    best on that fit's own training queries, so the choice of scale is held out as well."""
    if not train:
        raise EvalConfigError("fit needs at least one training set (--set BEIR_DIR SPLIT RUNS_DIR)")
    if folds < 2:
        raise EvalConfigError(f"folds must be at least 2, got {folds}")
    gain = MIN_GAIN if min_gain is None else float(min_gain)
    if not 0.0 <= gain < 1.0:
        raise EvalConfigError(f"min_gain must be in [0, 1) (mean nDCG@10), got {min_gain!r}")
    if method not in METHODS:
        raise EvalConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    l2 = L2 if l2 is None else float(l2)
    if not (l2 >= 0 and np.isfinite(l2)):
        raise EvalConfigError(f"l2 must be a finite number >= 0, got {l2!r}")
    if select not in SELECTS:
        raise EvalConfigError(f"select must be one of {', '.join(SELECTS)}; got {select!r}")
    fit = dict(method=method, min_gain=gain, l2=l2, select=select)
    bad = [n for n in norms if n not in MODEL_NORMS]
    if not norms or bad:
        raise EvalConfigError(f"norms must be some of {', '.join(MODEL_NORMS)}; got {list(norms)!r}")
    routes = sorted({r for fs in [*train, *holdout] for lists in fs.lists.values() for r, v in lists.items() if v})
    qdata = {n: {fs.name: {q: query_data(fs.lists[q], routes, fs.qrels[q], n, fs.backgrounds.get(q))
                           for q in fs.lists}
                 for fs in [*train, *holdout]} for n in norms}
    split = {fs.name: folds_of(list(fs.lists), folds, seed) for fs in train}
    held: dict[str, dict[str, list[str]]] = {fs.name: {} for fs in train}
    fold_models = []
    steps = folds + 1 + len(train) + len(holdout)
    tick = (lambda: None) if progress is None else _ticker(progress, steps)
    for i in range(folds):
        picks = [(fs.name, q) for fs in train for j, f in enumerate(split[fs.name]) if j != i for q in f]
        norm, params, _ = best_fit({n: [qdata[n][name][q] for name, q in picks] for n in norms}, routes, **fit)
        fold_models.append(to_model(params, routes, name=f"fold-{i}", norm=norm).to_dict())
        for fs in train:
            for q in split[fs.name][i]:
                qd = qdata[norm][fs.name][q]
                held[fs.name][q] = _rank(qd, query_scores(qd, params))
        tick()
    norm, final, tried = best_fit({n: [qd for fs in train for qd in qdata[n][fs.name].values()] for n in norms},
                                  routes, **fit)
    tick()
    for fs in holdout:
        held[fs.name] = {q: _rank(qd, query_scores(qd, final)) for q, qd in qdata[norm][fs.name].items()}
    report: dict[str, Any] = {"schema": 1, "routes": routes, "folds": folds, "seed": seed, "method": method,
                              **({"l2": l2} if method == "listwise" else {"min_gain": gain}),
                              "train": [fs.name for fs in train], "holdout": [fs.name for fs in holdout],
                              "norm_select": select if len(norms) > 1 else "only one",
                              "norms_tried": {n: round(v, 4) for n, v in tried.items()}, "norm": norm,
                              "sets": {}, "fold_models": fold_models}
    for fs in [*train, *holdout]:
        rankings = _baselines(fs, routes)
        rankings["fusion:adaptive"] = held[fs.name]
        report["sets"][fs.name] = score_set(fs, rankings, routes, metrics)
        tick()
    info = {name: {"adaptive": s["scores"]["fusion:adaptive"], "best_route": s["best_route"]}
            for name, s in report["sets"].items()}
    model = to_model(final, routes, name="adaptive-fitted", norm=norm,
                     trained_on=tuple(f"{fs.name} ({len(fs.lists)} queries)" for fs in train),
                     info={"objective": ("listwise softmax loss; the scale by mean nDCG@10" if method == "listwise"
                                         else "mean nDCG@10"), "held_out": info,
                           "fit": describe_fit(method, gain, l2, select, norms),
                           "norms_tried": report["norms_tried"]})
    report["model"] = model.to_dict()
    return model, report


def describe_fit(method: str, min_gain: float, l2: float, select: str = "train",
                 norms: Sequence[str] = NORMS) -> str:
    """The fit's method in words, for the model's ``info``."""
    if len(norms) == 1:
        chosen = f"on the {norms[0]} scale"
    else:
        chosen = "fitted per norm, " + ("the norm with the best nDCG@10 in an inner two-fold cross-fit kept"
                                        if select == "inner" else "the norm with the best training nDCG@10 kept")
    if method == "ascent":
        return ("coordinate ascent over lar_evals.fit_ascent.GRIDS, 3 rounds, from equal weights and from "
                "the best route alone (kept only when better by the threshold), a move taken when it "
                f"gains more than {min_gain} mean nDCG@10; {chosen}")
    return (f"listwise softmax loss over each query's candidates, L2 {l2} towards equal weights, "
            f"L-BFGS-B (lar_evals.fit_listwise); {chosen}")


def best_fit(by_norm: Mapping[str, Sequence[QueryData]], routes: Sequence[str],
             min_gain: float | None = None, method: str = "listwise", l2: float | None = None,
             select: str = "train") -> tuple[str, np.ndarray, dict[str, float]]:
    """Fit weights on each normalisation's query data (``method``: ``"listwise"``,
    :func:`lar_evals.fit_listwise.fit_listwise`, or ``"ascent"``, :func:`lar_evals.fit_ascent.fit_params`)
    and keep one norm. ``select="train"`` (default) keeps the norm whose weights score the best
    nDCG@10 on the queries they were fitted on; ``"inner"`` scores each norm by an inner
    two-fold cross-fit on these queries (alternate queries; the pooled list is ordered by set,
    so each half holds half of every set) and keeps the best held-out nDCG@10. Ties: the first
    in ``by_norm``. With one norm there is nothing to choose. Returns ``(norm, params, scores)``,
    ``scores`` being each norm's selection score; the weights are rounded to :data:`DECIMALS`
    places, as the saved model holds them (the figures are the saved model's).

    Measured (``benchmarks/study_fit_methods.py``, listwise, SciFact + CoSQA + stdlib, ten
    routes, four fold seeds): "inner" held out +1.9 points over dense on CoSQA on average,
    "train" +2.2, and a fixed zscore +2.3; halving 410 training queries again makes the inner
    scores noisier than the differences between scales.
    """
    if method not in METHODS:
        raise EvalConfigError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if select not in SELECTS:
        raise EvalConfigError(f"select must be one of {', '.join(SELECTS)}; got {select!r}")

    def fit(batch: QueryBatch) -> np.ndarray:
        if method == "ascent":
            return fit_params(batch, routes, min_gain=min_gain)
        return fit_listwise(batch, routes, l2)

    if select == "train" or len(by_norm) == 1:
        batches = {n: QueryBatch(list(qs)) for n, qs in by_norm.items()}
        fitted = {n: fit(b) for n, b in batches.items()}
        tried = {n: objective(batches[n], p) for n, p in fitted.items()}
        norm = max(tried, key=lambda n: (tried[n], -list(by_norm).index(n)))
        return norm, np.round(fitted[norm], DECIMALS), tried
    tried = {}
    for n, qs in by_norm.items():
        halves = [QueryBatch(list(qs[0::2])), QueryBatch(list(qs[1::2]))]
        held = [halves[i].ndcg(fit(halves[1 - i])) for i in (0, 1)]
        tried[n] = float(np.concatenate(held).mean()) if len(qs) else 0.0
    norm = max(tried, key=lambda n: (tried[n], -list(by_norm).index(n)))
    return norm, np.round(fit(QueryBatch(list(by_norm[norm]))), DECIMALS), tried


def score_set(fs: FitSet, rankings: dict[str, dict[str, list[str]]], routes: Sequence[str],
              metrics: Sequence[str]) -> dict[str, Any]:
    from lar_evals.compare import holm
    from lar_evals.metrics import to_run_dict
    from lar.core.errors import require

    ranx = require("ranx", "eval")
    scores, per_q = {}, {}
    for label, ranking in rankings.items():
        scores[label], per_q[label] = evaluate(fs.qrels, ranking, metrics, name=label)
    first = metrics[0]
    best = max((f"route:{r}" for r in routes), key=lambda lab: scores[lab][first])
    qids = sorted(fs.qrels)
    qrels = ranx.Qrels.from_dict(fs.qrels)
    tests = []
    for a, b in (("fusion:adaptive", best), ("fusion:adaptive", "fusion:rrf"),
                 ("fusion:adaptive", "fusion:route-unique"), ("fusion:rrf", best)):
        ra = ranx.Run.from_dict(to_run_dict(rankings[a], qids), name=a)
        rb = ranx.Run.from_dict(to_run_dict(rankings[b], qids), name=b)
        rep = ranx.compare(qrels, [ra, rb], list(metrics), stat_test="student")
        for m in metrics:
            p = float(rep.comparisons[frozenset((a, b))][m]["p_value"])
            tests.append({"a": a, "b": b, "metric": m, "delta": round(scores[a][m] - scores[b][m], 4),
                          "p_value": None if p != p else p})
    for t, adj in zip(tests, holm([t["p_value"] for t in tests])):
        t["p_holm"], t["significant"] = adj, adj < 0.05
    by_type: dict[str, Any] = {}
    for t in sorted(set(fs.types.values())):
        qs = [q for q, tt in fs.types.items() if tt == t]
        by_type[t] = {"n_queries": len(qs), **{lab: round(float(np.mean(
            [per_q[lab][first].get(q, 0.0) for q in qs])), 4) for lab in rankings}}
    return {"n_queries": len(fs.qrels), "best_route": best,
            "scores": {lab: rounded(v) for lab, v in scores.items()}, "tests": tests,
            "by_type": by_type}


def add_arguments(parser) -> Any:
    parser.add_argument("--set", nargs=3, action="append", default=[], metavar=("BEIR_DIR", "SPLIT", "RUNS_DIR"),
                        help="a training set: its BEIR folder, split and the beir run's runs dir, or "
                             "several comma-separated (routes joined per query) (repeatable)")
    parser.add_argument("--holdout", nargs=3, action="append", default=[],
                        metavar=("BEIR_DIR", "SPLIT", "RUNS_DIR"),
                        help="a set only scored, by the model fitted on all training queries")
    parser.add_argument("--folds", type=int, default=2, help="cross-fitting folds (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--norms", default=",".join(NORMS),
                        help=f"comma-separated normalisations to try (default {','.join(NORMS)})")
    parser.add_argument("--method", choices=METHODS + ("subsets",), default="listwise",
                        help="listwise: a softmax loss with an L2 pull towards equal weights (default); "
                             "ascent: coordinate ascent over weight grids on nDCG@10; subsets: the packaged "
                             "default's fit, per layer subset and timebox against each one's best route, "
                             "leave-one-corpus-out (lar_evals.fit_subsets_cli)")
    parser.add_argument("--max-queries", type=int, default=None,
                        help="subsets: a seeded sample of each set's queries (default: all)")
    parser.add_argument("--depth", type=int, default=100, help="subsets: each route's list cut to this (default 100)")
    parser.add_argument("--l2", type=float, default=L2,
                        help=f"listwise: the pull towards equal weights (default {L2})")
    parser.add_argument("--select", choices=SELECTS, default="train",
                        help="how the scale is chosen among --norms: the training nDCG@10 of the fitted "
                             "weights (default) or an inner two-fold cross-fit on the training queries")
    parser.add_argument("--min-gain", type=float, default=MIN_GAIN,
                        help=f"ascent: a weight change must raise the training nDCG@10 by more than "
                             f"this (default {MIN_GAIN}: keeps small sets from fitting noise)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--out", required=True, help="the fitted model (JSON)")
    parser.add_argument("--report", default=None, help="held-out scores and tests (JSON)")
    return parser


def format_report(report: dict[str, Any]) -> str:
    lines = []
    for name, s in report["sets"].items():
        sc = s["scores"]
        best = s["best_route"]
        lines.append(f"{name} ({s['n_queries']} queries): adaptive ({report.get('norm')}) ndcg@10 "
                     f"{sc['fusion:adaptive']['ndcg@10']} vs best route {best} {sc[best]['ndcg@10']}, "
                     f"rrf {sc['fusion:rrf']['ndcg@10']}, route-unique {sc['fusion:route-unique']['ndcg@10']}, "
                     f"pvalue {sc['fusion:pvalue']['ndcg@10']}")
    return "\n".join(lines)


def run(args) -> int:
    if args.method == "subsets":
        from lar_evals.fit_subsets_cli import run_subsets

        return run_subsets(args, load_set)
    train = [load_set(*spec) for spec in args.set]
    holdout = [load_set(*spec) for spec in args.holdout]
    norms = [n.strip() for n in args.norms.split(",") if n.strip()]
    from lar_evals.progress import Bars

    bars = None if getattr(args, "quiet", False) else Bars()
    try:
        model, report = run_fit(train, holdout, folds=args.folds, seed=args.seed, norms=norms,
                                min_gain=args.min_gain, method=args.method, l2=args.l2,
                                select=args.select, progress=bars.fit if bars else None)
    finally:
        if bars is not None:
            bars.close()
    model.save(args.out)
    if args.report:
        from lar_evals.io import write_json

        write_json(args.report, report)
    print(format_report(report))
    print(f"wrote {args.out}" + (f" and {args.report}" if args.report else ""))
    return 0


__all__ = ["FitSet", "GRIDS", "METHODS", "SELECTS", "MIN_GAIN", "NORMS", "QueryBatch", "describe_fit", "best_fit", "load_set", "objective", "fit_params", "run_fit",
           "score_set"]
