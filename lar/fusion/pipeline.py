"""The one fusion pipeline: per-layer hit lists and a policy in, fused hits and a report out.

The engine's orchestrator calls :func:`fuse_hits` for each of its stages (the cheap layers'
candidates for a scanning layer, the pool the refine layers rescore, the final ranking) and the
evaluation harness calls the same function on the lists it recorded, so offline and online
fusion cannot drift. Steps: group the layers' hits by place (:mod:`lar.fusion.grouping`), read
each layer's list as ``(place, score)`` pairs, fuse them with the policy (``adaptive`` with the
partial guard, each layer's score background and fusion by unit, as configured), and turn each
fused place back into one :class:`~lar.core.types.Hit` carrying every member layer's evidence
(with its E-value and p-value when the layer's list had a background fit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from lar.core.background import background_from
from lar.core.types import Hit, LayerRun, RunState
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.coverage import run_coverages
from lar.fusion.emit import fused_hit
from lar.fusion.grouping import Group, group_hits, runs_for_fusion
from lar.fusion.model import load_model
from lar.fusion.policies import check_policy, fuse
from lar.fusion.probe import probe_runs
from lar.fusion.rrf import DEFAULT_C


def covers_part(run: LayerRun) -> bool:
    """A run whose list comes from part of the scope: the timebox cut it short, or it is a
    building layer that answered from the units it has built so far (coverage below 1)."""
    return run.state is RunState.ABORTED or (run.coverage is not None and run.coverage < 1.0)


@dataclass(frozen=True)
class FusionSettings:
    """How to fuse: the policy and what it reads.

    ``model`` is the adaptive policy's fitted model (None: the packaged one); ``partial_guard``
    weighs a run over part of the scope by how much of the complete lists it scored;
    ``by_unit`` fuses ``adaptive`` by object identity (a unit found at different places by
    different layers gets their evidence combined)."""

    policy: str
    k: int | None = None
    c: float = DEFAULT_C
    model: Any = None
    partial_guard: bool = True
    by_unit: bool = True

    def __post_init__(self) -> None:
        check_policy(self.policy)


@dataclass(frozen=True)
class FusionReport:
    """What fusion read from each layer's list: ``routes[layer]`` holds its probe features
    (:class:`lar.fusion.probe.RouteProbe`), the weight ``adaptive`` gave it, and ``top_z`` (its
    best hit in standard deviations above the layer's whole-scan background, when reported)."""

    policy: str
    routes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "routes", MappingProxyType(
            {r: MappingProxyType(dict(v)) for r, v in self.routes.items()}))


#: the scale each policy's fused score is on (``Hit.score``, ``Result.score_scale``); adaptive's
#: is ``"adaptive-<norm>"`` (a weighted sum of each layer's score on the model's scale), or
#: ``"rrf"`` when no layer carried signal and it fell back to RRF
POLICY_SCALES = {"rrf": "rrf", "route-unique": "rrf", "combsum": "combsum-minmax",
                 "combmnz": "combmnz-minmax", "pvalue": "pvalue-sum"}


@dataclass(frozen=True)
class Fused:
    """The fused hits (best first, at most ``k``, each with its fused ``score`` and ``rank``),
    every place the layers found (``groups``, in first-appearance order: the candidate pool),
    the report, and the scale the scores are on (:data:`POLICY_SCALES`)."""

    hits: tuple[Hit, ...]
    groups: tuple[Group, ...]
    report: FusionReport
    scale: str = ""


def fuse_hits(per_layer: Mapping[str, Sequence[Hit]], settings: FusionSettings,
              runs: Mapping[str, LayerRun] | None = None) -> Fused:
    """Fuse ``per_layer`` (``{layer: [Hit, ...]}`` best first, each hit carrying only its layer's
    signal; the mapping's order is the layers' order) with ``settings``. ``runs`` (each layer's
    :class:`LayerRun`, when known) tell which lists cover part of the scope and each layer's
    score background."""
    lists = {name: list(hits) for name, hits in per_layer.items() if hits}
    groups = group_hits(lists)
    if not groups:
        return Fused((), (), FusionReport(settings.policy))
    places = runs_for_fusion(groups, lists)
    runs = runs or {}
    weights: Mapping[str, float] = {}
    if settings.policy == "adaptive":
        cut = run_coverages(runs, places) if settings.partial_guard else {}
        backgrounds = {n: (runs[n].probe or {}).get("background") for n in places if n in runs}
        units = {g.key: g.span.hash for g in groups} if settings.by_unit else None
        items, probes, weights, fits = adaptive_fusion(
            places, k=settings.k, model=settings.model, c=settings.c, partial=cut,
            backgrounds=backgrounds, units=units)
    else:
        items = fuse(settings.policy, places, k=settings.k, c=settings.c)
        probes, fits = probe_runs(places)
    by_key = {g.key: g for g in groups}
    hits = tuple(fused_hit(by_key[it.key], it.ranks, fits, it.score, i) for i, it in enumerate(items, 1))
    if settings.policy == "adaptive":
        live = any(w > 0 for w in weights.values())
        scale = f"adaptive-{load_model(settings.model).norm}" if live else "rrf"
    else:
        scale = POLICY_SCALES.get(settings.policy, settings.policy)
    report: dict[str, dict[str, Any]] = {}
    for name, probe in probes.items():
        info = probe.to_dict()
        if name in weights:
            info["weight"] = round(weights[name], 4)
        bg = background_from(((runs.get(name) and runs[name].probe) or {}).get("background"))
        if bg is not None and places.get(name):  # its best hit, in sds above the whole scan
            info["top_z"] = round(bg.z(max(s for _, s in places[name])), 4)
        report[name] = info
    return Fused(hits, tuple(groups), FusionReport(settings.policy, report), scale)


__all__ = ["POLICY_SCALES", "FusionReport", "FusionSettings", "Fused", "covers_part", "fuse_hits"]
