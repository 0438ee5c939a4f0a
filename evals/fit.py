"""Fit and score the adaptive fusion model from recorded route lists, without re-running searches.

``python -m evals fit --set BEIR_DIR SPLIT RUNS_DIR [--set ...] [--holdout BEIR_DIR SPLIT RUNS_DIR]
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

The model: :class:`lar.fusion_adaptive.FusionModel`, three weights per route (``base``,
``signal``, ``agree``), fitted by coordinate ascent over small grids on the mean nDCG@10, and one
score normalisation (``--norms``: evidence, tailz, minmax, zscore), the one whose fitted weights
score best on the fit's own training queries. One ``--set`` gives a model for that corpus
(its dev split's halves are fitted and scored in turn); several give one joint model.
"""
from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from lar.fusion import fuse
from lar.fusion_adaptive import MODEL_NORMS, FusionModel, RouteWeights, probe_runs, route_values
from lar.probe import EVIDENCE_CAP

from .data import load_beir
from .errors import EvalConfigError, EvalDataError
from .metrics import evaluate, rounded

GRIDS = {"base": (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0),
         "signal": (-1.0, 0.0, 0.5, 1.0, 2.0, 4.0),
         "agree": (-1.0, -0.5, 0.0, 0.5, 1.0, 2.0)}
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
BASELINES = ("rrf", "route-unique", "combsum", "pvalue")
NORMS = MODEL_NORMS  # tried by every fit unless --norms narrows them
K = 100


@dataclass
class QueryData:
    """One query's evidence matrix (documents x routes) and probe features."""

    docs: list[str]
    ev: np.ndarray        # normalised scores; the route's floor where it did not list the document
    rrf: np.ndarray       # RRF contributions, the fallback when no route carries weight
    top: np.ndarray       # per route: top evidence / CAP
    agree: np.ndarray     # per route: agreement
    usable: np.ndarray    # per route: 1.0 when the route has a fit
    gains: np.ndarray     # relevance of each document
    idcg: float


@dataclass
class FitSet:
    name: str
    qrels: dict[str, dict[str, int]]
    lists: dict[str, dict[str, list[tuple[str, float]]]]   # qid -> route -> [(doc, score)]
    types: dict[str, str]
    # qid -> route -> the route's score background (lar.background), for the "bgz" norm
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
        raise EvalConfigError(f"{path} is missing: run `python -m evals beir` with a runs dir first")
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


def _query_data(lists: Mapping[str, list], routes: Sequence[str], qrels: Mapping[str, int],
                norm: str = "evidence", backgrounds: Mapping[str, Any] | None = None) -> QueryData:
    runs = {r: _distinct(lists[r]) for r in routes if lists.get(r)}
    probes, fits = probe_runs(runs)
    values = route_values(runs, fits, norm, backgrounds)
    docs: dict[str, int] = {}
    for items in runs.values():
        for d, _ in items:
            docs.setdefault(d, len(docs))
    n, m = len(docs), len(routes)
    E, R = np.zeros((n, m)), np.zeros((n, m))
    top, agree, usable = np.zeros(m), np.zeros(m), np.zeros(m)
    for j, r in enumerate(routes):
        if r not in runs:
            continue
        seen = set()
        for rank, (d, _) in enumerate(runs[r], 1):
            if d not in seen:
                seen.add(d)
                R[docs[d], j] = 1.0 / (60.0 + rank)
        if r in values:
            vals, floor = values[r]
            E[:, j] = floor
            for d, e in vals.items():
                E[docs[d], j] = e
        p = probes[r]
        top[j], agree[j], usable[j] = min(p.top_evidence, EVIDENCE_CAP) / EVIDENCE_CAP, p.agreement, float(p.usable)
    gains = np.array([float(qrels.get(d, 0)) for d in docs])
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / np.log2(i + 2) for i, g in enumerate(ideal))
    return QueryData(list(docs), E, R, top, agree, usable, gains, float(idcg))


def _distinct(items: Sequence) -> list:
    seen: set = set()
    out = []
    for d, s in items:
        if d not in seen:
            seen.add(d)
            out.append((d, s))
    return out


def _weights(q: QueryData, params: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, params[:, 0] + params[:, 1] * q.top + params[:, 2] * q.agree) * q.usable


def _scores(q: QueryData, params: np.ndarray) -> np.ndarray:
    w = _weights(q, params)
    return q.ev @ w if w.any() else q.rrf.sum(axis=1)


def _ndcg10(q: QueryData, scores: np.ndarray) -> float:
    if q.idcg <= 0 or not len(scores):
        return 0.0
    order = np.argsort(-scores, kind="stable")[:10]
    g = q.gains[order]
    return float(((2 ** g - 1) / np.log2(np.arange(2, len(g) + 2))).sum() / q.idcg)


class QueryBatch:
    """Many queries' :class:`QueryData` padded into arrays, so the fit's objective is a few
    array operations instead of a loop over queries (the fit evaluates it thousands of times).

    nDCG@10 needs only the ranks of the relevant documents: a relevant document's rank is the
    number of documents scored above it plus the tied ones listed before it, which is exactly
    its position under the stable sort :func:`_ndcg10` uses."""

    def __init__(self, queries: Sequence[QueryData]) -> None:
        self.n = len(queries)
        m = queries[0].ev.shape[1] if queries else 0
        width = max((len(q.docs) for q in queries), default=0) or 1
        self.ev = np.zeros((self.n, width, m))
        self.rrf = np.zeros((self.n, width))
        self.pad = np.ones((self.n, width), dtype=bool)   # True where no document is
        self.top, self.agree, self.usable = np.zeros((self.n, m)), np.zeros((self.n, m)), np.zeros((self.n, m))
        rel_q, rel_d, rel_gain = [], [], []
        self.idcg = np.zeros(self.n)
        for i, q in enumerate(queries):
            d = len(q.docs)
            self.ev[i, :d], self.rrf[i, :d], self.pad[i, :d] = q.ev, q.rrf.sum(axis=1), False
            self.top[i], self.agree[i], self.usable[i], self.idcg[i] = q.top, q.agree, q.usable, q.idcg
            if q.idcg > 0:
                for j in np.flatnonzero(q.gains > 0):
                    rel_q.append(i), rel_d.append(j), rel_gain.append(q.gains[j])
        self.rel_q, self.rel_d = np.array(rel_q, dtype=int), np.array(rel_d, dtype=int)
        self.rel_gain = (2.0 ** np.array(rel_gain, dtype=float)) - 1.0
        self.before = np.arange(width)[None, :] < self.rel_d[:, None]   # listed before each relevant doc

    def ndcg(self, params: np.ndarray) -> np.ndarray:
        """Per query nDCG@10 of the fused ranking under ``params``."""
        w = np.maximum(0.0, params[:, 0] + params[:, 1] * self.top + params[:, 2] * self.agree) * self.usable
        scores = np.where(w.any(axis=1)[:, None], np.einsum("qdr,qr->qd", self.ev, w), self.rrf)
        scores[self.pad] = -np.inf
        out = np.zeros(self.n)
        if not len(self.rel_q):
            return out
        s = scores[self.rel_q]                       # the relevant document's query's scores
        mine = s[np.arange(len(self.rel_q)), self.rel_d][:, None]
        rank = ((s > mine) | ((s == mine) & self.before)).sum(axis=1)
        gain = np.where(rank < 10, self.rel_gain / np.log2(rank + 2.0), 0.0)
        np.add.at(out, self.rel_q, gain)
        return np.divide(out, self.idcg, out=np.zeros(self.n), where=self.idcg > 0)


def objective(queries: "Sequence[QueryData] | QueryBatch", params: np.ndarray) -> float:
    """Mean nDCG@10 of the fused rankings (pass a :class:`QueryBatch` when calling it often)."""
    batch = queries if isinstance(queries, QueryBatch) else QueryBatch(list(queries))
    return float(batch.ndcg(params).mean()) if batch.n else 0.0


#: a move away from the current weights must raise the training objective by this much: small
#: training sets (one relevant document per query, as in CoSQA) otherwise fit fold noise, and
#: held-out scores fall below equal weights'
MIN_GAIN = 0.005


def fit_params(queries: Sequence[QueryData], routes: Sequence[str], rounds: int = 3,
               min_gain: float | None = None) -> np.ndarray:
    """Coordinate ascent over :data:`GRIDS` (deterministic) from two starts: equal weights, and
    the best single route alone (weight 1, the others 0), from which routes join only when they
    pay. A move is taken only when it gains more than ``min_gain`` (default :data:`MIN_GAIN`)
    mean nDCG@10, and the second start's result replaces the first's only by more than that.

    Why two: with many routes, equal weights start far from a good point, and removing several
    weak routes one at a time rarely pays the threshold at each step (SciFact + CoSQA + stdlib,
    10 routes, zscore: the equal start stopped at 0.6886, while the four model layers alone, the
    cheap ones at 0, score 0.6910)."""
    gain = MIN_GAIN if min_gain is None else float(min_gain)
    queries = queries if isinstance(queries, QueryBatch) else QueryBatch(list(queries))
    equal = np.tile(np.array([1.0, 0.0, 0.0]), (len(routes), 1))
    starts = [equal]  # equal first: it is kept unless the sparse start beats it
    if len(routes) > 1:
        alone = []
        for j in range(len(routes)):
            only = np.zeros_like(equal)
            only[j, 0] = 1.0
            alone.append(objective(queries, only))
        sparse = np.zeros_like(equal)
        sparse[int(np.argmax(alone)), 0] = 1.0
        starts.append(sparse)
    best_params, best_obj = _ascend(queries, equal, rounds, gain)
    for start in starts[1:]:  # leaving the equal start is a move too: it must pay the threshold
        params, got = _ascend(queries, start, rounds, gain)
        if got > best_obj + max(gain, 1e-9):
            best_params, best_obj = params, got
    return best_params


def _ascend(queries: "Sequence[QueryData] | QueryBatch", params: np.ndarray, rounds: int,
            gain: float) -> tuple[np.ndarray, float]:
    queries = queries if isinstance(queries, QueryBatch) else QueryBatch(list(queries))
    best = objective(queries, params)
    for _ in range(rounds):
        improved = False
        for j in range(len(params)):
            for c, name in enumerate(("base", "signal", "agree")):
                for v in GRIDS[name]:
                    if v == params[j, c]:
                        continue
                    trial = params.copy()
                    trial[j, c] = v
                    got = objective(queries, trial)
                    if got > best + max(gain, 1e-9):
                        best, params, improved = got, trial, True
        if not improved:
            break
    return params, best


def to_model(params: np.ndarray, routes: Sequence[str], **meta: Any) -> FusionModel:
    """The :class:`FusionModel` of fitted ``params``; ``meta`` are its other fields."""
    weights = {r: RouteWeights(float(p[0]), float(p[1]), float(p[2])) for r, p in zip(routes, params)}
    return FusionModel(weights, RouteWeights(1.0), **meta)  # unseen routes: equal weight


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
            norms: Sequence[str] = NORMS, min_gain: float | None = None) -> tuple[FusionModel, dict[str, Any]]:
    """Cross-fit on ``train``, score every set, fit the final model on all training queries.

    Each fit tries every normalisation in ``norms`` and keeps the one whose fitted weights score
    best on that fit's own training queries, so the choice of scale is held out as well."""
    if not train:
        raise EvalConfigError("fit needs at least one training set (--set BEIR_DIR SPLIT RUNS_DIR)")
    if folds < 2:
        raise EvalConfigError(f"folds must be at least 2, got {folds}")
    gain = MIN_GAIN if min_gain is None else float(min_gain)
    if not 0.0 <= gain < 1.0:
        raise EvalConfigError(f"min_gain must be in [0, 1) (mean nDCG@10), got {min_gain!r}")
    bad = [n for n in norms if n not in MODEL_NORMS]
    if not norms or bad:
        raise EvalConfigError(f"norms must be some of {', '.join(MODEL_NORMS)}; got {list(norms)!r}")
    routes = sorted({r for fs in [*train, *holdout] for lists in fs.lists.values() for r, v in lists.items() if v})
    qdata = {n: {fs.name: {q: _query_data(fs.lists[q], routes, fs.qrels[q], n, fs.backgrounds.get(q))
                           for q in fs.lists}
                 for fs in [*train, *holdout]} for n in norms}
    split = {fs.name: folds_of(list(fs.lists), folds, seed) for fs in train}
    held: dict[str, dict[str, list[str]]] = {fs.name: {} for fs in train}
    fold_models = []
    for i in range(folds):
        picks = [(fs.name, q) for fs in train for j, f in enumerate(split[fs.name]) if j != i for q in f]
        norm, params, _ = best_fit({n: [qdata[n][name][q] for name, q in picks] for n in norms}, routes, gain)
        fold_models.append(to_model(params, routes, name=f"fold-{i}", norm=norm).to_dict())
        for fs in train:
            for q in split[fs.name][i]:
                qd = qdata[norm][fs.name][q]
                held[fs.name][q] = _rank(qd, _scores(qd, params))
    norm, final, tried = best_fit({n: [qd for fs in train for qd in qdata[n][fs.name].values()] for n in norms},
                                  routes, gain)
    for fs in holdout:
        held[fs.name] = {q: _rank(qd, _scores(qd, final)) for q, qd in qdata[norm][fs.name].items()}
    report: dict[str, Any] = {"schema": 1, "routes": routes, "folds": folds, "seed": seed, "min_gain": gain,
                              "train": [fs.name for fs in train], "holdout": [fs.name for fs in holdout],
                              "norms_tried": {n: round(v, 4) for n, v in tried.items()}, "norm": norm,
                              "sets": {}, "fold_models": fold_models}
    for fs in [*train, *holdout]:
        rankings = _baselines(fs, routes)
        rankings["fusion:adaptive"] = held[fs.name]
        report["sets"][fs.name] = score_set(fs, rankings, routes, metrics)
    info = {name: {"adaptive": s["scores"]["fusion:adaptive"], "best_route": s["best_route"]}
            for name, s in report["sets"].items()}
    model = to_model(final, routes, name="adaptive-fitted", norm=norm,
                     trained_on=tuple(f"{fs.name} ({len(fs.lists)} queries)" for fs in train),
                     info={"objective": "mean nDCG@10", "held_out": info,
                           "fit": "coordinate ascent over evals.fit.GRIDS, 3 rounds, from equal weights and "
                                  "from the best route alone (kept only when better by the threshold), "
                                  f"a move taken when it gains more than {gain} mean nDCG@10; per norm, "
                                  "the norm with the best training objective kept",
                           "norms_tried": report["norms_tried"]})
    report["model"] = model.to_dict()
    return model, report


def best_fit(by_norm: Mapping[str, Sequence[QueryData]], routes: Sequence[str],
             min_gain: float | None = None) -> tuple[str, np.ndarray, dict[str, float]]:
    """Fit weights on each normalisation's query data; the norm with the best training
    objective wins (ties: the first in ``by_norm``). Returns ``(norm, params, objectives)``."""
    fitted = {n: fit_params(qs, routes, min_gain=min_gain) for n, qs in by_norm.items()}
    tried = {n: objective(by_norm[n], p) for n, p in fitted.items()}
    norm = max(tried, key=lambda n: (tried[n], -list(by_norm).index(n)))
    return norm, fitted[norm], tried


def score_set(fs: FitSet, rankings: dict[str, dict[str, list[str]]], routes: Sequence[str],
              metrics: Sequence[str]) -> dict[str, Any]:
    from .compare import holm
    from .metrics import to_run_dict
    from lar.errors import require

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
    parser.add_argument("--min-gain", type=float, default=MIN_GAIN,
                        help=f"a weight change must raise the training nDCG@10 by more than this "
                             f"(default {MIN_GAIN}: keeps small sets from fitting noise)")
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
    train = [load_set(*spec) for spec in args.set]
    holdout = [load_set(*spec) for spec in args.holdout]
    norms = [n.strip() for n in args.norms.split(",") if n.strip()]
    model, report = run_fit(train, holdout, folds=args.folds, seed=args.seed, norms=norms,
                            min_gain=args.min_gain)
    model.save(args.out)
    if args.report:
        from .cli import write_json

        write_json(args.report, report)
    print(format_report(report))
    print(f"wrote {args.out}" + (f" and {args.report}" if args.report else ""))
    return 0


__all__ = ["FitSet", "GRIDS", "NORMS", "best_fit", "load_set", "objective", "fit_params", "run_fit",
           "score_set"]
