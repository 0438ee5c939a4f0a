"""One query of a BEIR evaluation (:func:`run_query`): every route alone, the offline fusion
policies over those lists, and the engine's default search, mapped from hits to documents.
:mod:`lar_evals.run` drives it over the query set; the checkpoint file (:mod:`lar_evals.checkpoint`)
keeps what it returns."""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Mapping, Sequence

from lar.core.request import SearchRequest, pool_size
from lar.fusion.grouping import runs_for_fusion
from lar.fusion.pipeline import Fused, FusionSettings, fuse_hits
from lar.fusion.policies import fuse

__all__ = ["doc_scores", "docs_of_hits", "fused_scores", "run_query", "scored_docs"]


def docs_of_hits(paths_per_hit: Sequence[Sequence[str]], path_to_doc: Mapping[str, str],
                 limit: int | None = None) -> list[str]:
    """Documents of the first ``limit`` hits, best rank first (each hit maps every one of its
    paths: identical files share one hit)."""
    out: dict[str, None] = {}
    for paths in paths_per_hit[:limit]:
        for p in paths:
            d = path_to_doc.get(p)
            if d is not None:
                out.setdefault(d, None)
    return list(out)


def run_query(eng, text: str, *, routes: Sequence[str], order: Sequence[str], fusion: Sequence[str],
              k: int, attribution_k: int, rrf_c: float, timebox: float, scope: Any,
              path_to_doc: Mapping[str, str]) -> dict[str, Any]:
    """Everything one query contributes: per-label document lists, timings and run states.

    ``scored`` (the route lists offline fits read) holds each route's own list; a refine route
    (``fuzzy``, ``rerank``), which has no candidates when run alone, gets the scores it gave in
    the default search, whose generate routes supplied its pool."""
    pool = pool_size(k, "balanced")
    per_layer, times, states, backgrounds, route_runs, layer_lists = {}, {}, {}, {}, {}, {}
    for r in routes:
        t0 = time.perf_counter()
        res = eng.search(text, layers=[r], k=pool, timebox=timebox, scope=scope)
        times[f"route:{r}"] = time.perf_counter() - t0
        run = res.run(r)
        route_runs[r] = run
        states[r] = run.state.value
        per_layer[r] = list(res.hits)
        layer_lists[r] = res.layer_hits.get(r, ())[:pool]
        if (run.probe or {}).get("background") is not None:
            backgrounds[r] = run.probe["background"]
    rankings, top, pools = {}, {}, {}
    scored: dict[str, list[list]] = {}
    for r, hits in per_layer.items():
        scored[r] = scored_docs(hits, r, path_to_doc)
        paths = [h.paths for h in hits]
        rankings[f"route:{r}"] = docs_of_hits(paths, path_to_doc, k)
        top[f"route:{r}"] = docs_of_hits(paths, path_to_doc, attribution_k)
        pools[r] = docs_of_hits(paths, path_to_doc)
    # the engine's own fusion pipeline over each route's list as a search with every route would
    # receive it (its first `pool` hits), with the engine's settings and each route's run (partial
    # guard, backgrounds): offline figures are what eng.search gives on the same lists
    fused_input = {r: layer_lists[r] for r in order if layer_lists.get(r)}
    scores: dict[str, dict[str, float | None]] = {
        f"route:{r}": doc_scores(hits, lambda h, r=r: getattr(h.evidence.get(r), "score", None),
                                 path_to_doc) for r, hits in per_layer.items()}
    for policy in fusion:
        t0 = time.perf_counter()
        settings = eng.fusion_settings(SearchRequest(text, k=k, rrf_c=rrf_c, fusion=policy))
        result = fuse_hits(fused_input, settings, route_runs)
        fused = eng.enrich(result.hits, scope)
        times[f"fusion:{policy}"] = time.perf_counter() - t0
        rankings[f"fusion:{policy}"] = docs_of_hits([h.paths for h in fused], path_to_doc)
        by_id = fused_scores(result, fused_input, settings)
        scores[f"fusion:{policy}"] = doc_scores(fused, lambda h: by_id.get(h.id), path_to_doc)
        short = eng.enrich(fuse_hits(fused_input, replace(settings, k=attribution_k), route_runs).hits, scope)
        top[f"fusion:{policy}"] = docs_of_hits([h.paths for h in short], path_to_doc)
    t0 = time.perf_counter()
    res = eng.search(text, layers=list(routes), k=k, timebox=timebox, scope=scope)
    times["default"] = time.perf_counter() - t0
    paths = [h.paths for h in res.hits]
    rankings["default"] = docs_of_hits(paths, path_to_doc)
    # the default search's fused score, once hits carry one (Hit.score); rank-derived until then
    scores["default"] = doc_scores(res.hits, lambda h: getattr(h, "score", None), path_to_doc)
    if attribution_k < k:  # what a caller asking for attribution_k hits gets (route-unique slots)
        short_res = eng.search(text, layers=list(routes), k=attribution_k, timebox=timebox, scope=scope)
        paths = [h.paths for h in short_res.hits]
    top["default"] = docs_of_hits(paths, path_to_doc, attribution_k)
    default_states = {run.name: run.state.value for run in res.runs if run.name in routes}
    for r in routes:  # a refine layer alone has no pool: record what it scored in the default's
        if not per_layer.get(r) and "refine" in getattr(eng.layers.get(r), "roles", ()):
            scored[r] = scored_docs(res.hits, r, path_to_doc)
    return {"rankings": rankings, "top": top, "pools": pools, "times": times,
            "states": states, "default_states": default_states, "scored": scored,
            "backgrounds": backgrounds, "scores": scores}


def doc_scores(hits: Sequence[Any], score_of, path_to_doc: Mapping[str, str]) -> dict[str, float | None]:
    """``{doc: score}`` of a hit list, a document at its first (best) hit; ``score_of(hit)``
    gives the hit's score, None (or a non-finite value) when there is none. The keys are in the
    order of :func:`docs_of_hits`, so they line up with the ranking."""
    out: dict[str, float | None] = {}
    for h in hits:
        for p in h.paths:
            d = path_to_doc.get(p)
            if d is not None and d not in out:
                s = score_of(h)
                out[d] = float(s) if isinstance(s, (int, float)) and math.isfinite(s) else None
    return out


def fused_scores(result: Fused, per_layer: Mapping[str, Sequence[Any]],
                 settings: FusionSettings) -> dict[str, float]:
    """``{hit id: fused score}`` of the hits :func:`lar.fusion.pipeline.fuse_hits` returned.

    A hit that carries its fused score (``Hit.score``) gives it. Otherwise the policy's own
    function (:func:`lar.fusion.policies.fuse`) runs once more on the same places
    (``runs_for_fusion`` of the pipeline's groups), and its scores are kept only when its items
    come in exactly the pipeline's order (``adaptive`` with the partial guard or score
    backgrounds can differ: then nothing is returned and the run file falls back to
    rank-derived scores for that query)."""
    own = {h.id: h.score for h in result.hits if isinstance(getattr(h, "score", None), (int, float))}
    if own and len(own) == len(result.hits):
        return own
    if not result.hits:
        return {}
    lists = {name: list(hits) for name, hits in per_layer.items() if hits}
    places = runs_for_fusion(result.groups, lists)
    units = ({g.key: g.span.hash for g in result.groups}
             if settings.policy == "adaptive" and settings.by_unit else None)
    items = fuse(settings.policy, places, k=settings.k, c=settings.c, model=settings.model,
                 units=units)
    by_key = {g.key: g for g in result.groups}
    if [by_key[it.key].span.id for it in items] != [h.id for h in result.hits]:
        return {}
    return {by_key[it.key].span.id: float(it.score) for it in items}


def scored_docs(hits: Sequence[Any], route: str, path_to_doc: Mapping[str, str]) -> list[list]:
    """``[[doc, score], ...]`` of one route's whole list, best first, a document at its best
    hit (``score`` is the layer's own, ``null`` when it gave none): what offline fusion studies
    need beyond ranks."""
    out: dict[str, float | None] = {}
    for h in hits:
        ev = h.evidence.get(route)
        score = getattr(ev, "score", None)
        for p in h.paths:
            d = path_to_doc.get(p)
            if d is not None and d not in out:
                out[d] = None if score is None or not math.isfinite(score) else round(float(score), 6)
    return [[d, s] for d, s in out.items()]
