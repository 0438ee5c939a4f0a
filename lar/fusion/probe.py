"""Probing a route's result list: how strongly does each hit stand out, without labels.

A layer's scores have no meaning across spaces (a BM25 sum, a cosine, a MaxSim sum), but the
shape of one result list says a lot. The scores of the unremarkable bulk of a list follow the
upper tail of the space's score distribution for this query, and for the usual score laws
(normal-like, gamma-like: the Gumbel domain of extreme values) the ``r``-th best score then
falls linearly in ``ln r``::

    s_r ~= a - beta * ln r        (ranks r0 .. n, the background)

Inverting the fit gives, for any score ``s``, ``E(s) = exp((a - s) / beta)``: the number of
background units expected to score at least ``s`` (BLAST's E-value, with the background fitted
per query from the list itself rather than from shuffled sequences). ``p = 1 - exp(-E)`` is the
chance that the background alone produces such a score; ``-ln p`` is the evidence a hit carries,
near 0 for hits on the background trend and large for hits far above it. A list whose scores do
not fall (constant, all ties, NaN, too short) has no fit: the route carries no signal for this
query and drops out of score-based fusion, with that reason.

Per route and query the probe reports ``top_evidence`` (``-ln p`` of the best hit), ``margin``
(best minus second, in units of ``beta``), ``beta`` and the fit's size; the fusion step adds the
route's agreement with the other routes' top hits. Everything here is pure and cheap
(one least-squares fit per list). ``beta`` is floored at a quarter of the whole list's mean
log-slope, so a tied or flat background (small corpora, BM25 ties) cannot make every hit above
it look impossibly strong.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from lar.core.errors import ConfigError

R0 = 10            # background starts at this rank (1-based)
MIN_POINTS = 10    # background points needed for a fit
EVIDENCE_CAP = 30.0  # -ln p is capped (p below ~1e-13 is all the same to fusion)


@dataclass(frozen=True, slots=True)
class TailFit:
    """``s_r ~= a - beta ln r`` over ranks ``r0..r0+n-1``; ``beta > 0``."""

    a: float
    beta: float
    r0: int
    n: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.a) and math.isfinite(self.beta)) or self.beta <= 0:
            raise ConfigError(f"TailFit needs a finite a and beta > 0, got a={self.a}, beta={self.beta}")
        if self.r0 < 1 or self.n < 2:
            raise ConfigError(f"TailFit needs r0 >= 1 and n >= 2, got r0={self.r0}, n={self.n}")

    def evalue(self, score: float) -> float:
        """Background units expected to score at least ``score``."""
        z = (self.a - score) / self.beta
        return math.exp(min(z, 700.0))

    def p_value(self, score: float) -> float:
        return -math.expm1(-self.evalue(score))

    def evidence(self, score: float) -> float:
        """``-ln p``, capped at :data:`EVIDENCE_CAP`; 0 for a score on or below the trend's far end."""
        z = (self.a - score) / self.beta  # ln E
        if z < -27.6:  # E < 1e-12: -ln p = -ln E to double precision
            return min(EVIDENCE_CAP, -z)
        p = -math.expm1(-math.exp(min(z, 700.0)))
        return 0.0 if p >= 1.0 else min(EVIDENCE_CAP, -math.log(p))


def fit_tail(scores: Sequence[float], r0: int = R0, min_points: int = MIN_POINTS
             ) -> tuple[TailFit | None, str]:
    """Fit the background of a best-first score list. Returns ``(fit, "")`` or ``(None, why)``."""
    xs, ys = [], []
    for r, s in enumerate(scores, start=1):
        if s is None or not isinstance(s, (int, float)) or not math.isfinite(s):
            return None, f"score at rank {r} is not a finite number ({s!r})"
        if r >= r0:
            xs.append(math.log(r))
            ys.append(float(s))
    if len(ys) < min_points:
        return None, f"{len(scores)} hits: too few for a background fit (needs {r0 + min_points - 1})"
    mx = sum(xs) / len(xs)
    my = sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    beta = -sxy / sxx if sxx > 0 else 0.0
    spread = max(ys) - min(ys)
    if not beta > 1e-9 * max(1.0, abs(my)) or spread <= 0:
        return None, "scores do not fall with rank (constant or tied): no signal to read"
    # a background much flatter than the whole list (ties, a plateau) would make every hit above
    # it look impossibly strong: beta is at least a quarter of the list's mean log-slope
    floor = (float(scores[0]) - float(scores[-1])) / (4.0 * math.log(len(scores)))
    beta = max(beta, floor)
    return TailFit(a=my + beta * mx, beta=beta, r0=r0, n=len(ys)), ""


def background_z(scores: Sequence[float], r0: int = R0, min_points: int = MIN_POINTS
                 ) -> tuple[float, float]:
    """Mean and population standard deviation of a best-first list's background: its scores
    from rank ``r0`` on when there are at least ``min_points`` of them, else the whole list.
    ``(s - mean) / std`` reads a score as standard deviations above the list's unremarkable
    bulk (the ``tailz`` normalisation); ``std`` is 0 for a constant background."""
    vals = [float(s) for s in scores]
    if not vals:
        return 0.0, 0.0
    tail = vals[r0 - 1:] if len(vals) - (r0 - 1) >= min_points else vals
    mean = math.fsum(tail) / len(tail)
    var = math.fsum((v - mean) ** 2 for v in tail) / len(tail)
    return mean, math.sqrt(var)


@dataclass(frozen=True, slots=True)
class RouteProbe:
    """What one route's list says about one query (``usable`` False: dropped, see ``reason``)."""

    route: str
    n: int
    usable: bool
    reason: str = ""
    top_evidence: float = 0.0
    margin: float = 0.0
    beta: float = 0.0
    agreement: float = 0.0
    #: set by adaptive fusion on a route that saw part of the scope: the factor its weight was
    #: multiplied by (:func:`lar.fusion.adaptive.partial_factors`); None for a complete route
    partial_factor: float | None = None

    def __post_init__(self) -> None:
        f = self.partial_factor
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float))
                              or not 0.0 <= f <= 1.0):
            raise ConfigError(f"RouteProbe.partial_factor must be in [0, 1] or None, got {f!r}")

    def to_dict(self) -> dict:
        out = {"n": self.n, "usable": self.usable, "reason": self.reason,
               "top_evidence": round(self.top_evidence, 4), "margin": round(self.margin, 4),
               "beta": round(self.beta, 6), "agreement": round(self.agreement, 4)}
        if self.partial_factor is not None:
            out["partial_factor"] = round(self.partial_factor, 4)
        return out


def probe_list(route: str, scores: Sequence[float]) -> tuple[RouteProbe, TailFit | None]:
    """The probe of one best-first score list and its fit (None when the route drops out)."""
    if not scores:
        return RouteProbe(route, 0, False, "no hits"), None
    fit, why = fit_tail(scores)
    if fit is None:
        return RouteProbe(route, len(scores), False, why), None
    margin = (scores[0] - scores[1]) / fit.beta if len(scores) > 1 else 0.0
    return RouteProbe(route, len(scores), True, "", fit.evidence(scores[0]), margin, fit.beta), fit


def agreement(tops: dict[str, Sequence], route: str, depth: int = 10) -> float:
    """Share of ``route``'s first ``depth`` keys that some other route also has in its first
    ``depth``: a route whose best hits nobody else finds is either unique or lost."""
    mine = list(tops.get(route, ()))[:depth]
    if not mine:
        return 0.0
    others = set()
    for r, keys in tops.items():
        if r != route:
            others.update(list(keys)[:depth])
    return sum(1 for k in mine if k in others) / len(mine)


def probe_runs(runs: Mapping[str, Any]) -> tuple[dict[str, RouteProbe], dict[str, Any]]:
    """Probe every route of ``runs`` (``{route: [(key, score), ...]}`` best first, distinct
    keys). Returns ``(probes, fits)``; agreement is filled in from all routes' first keys."""
    probes, fits, tops = {}, {}, {}
    for route, items in runs.items():
        scores = [s for _, s in items]
        probe, fit = probe_list(route, scores)
        probes[route], fits[route] = probe, fit
        tops[route] = [key for key, _ in items[:10]]
    for route, probe in probes.items():
        if probe.usable:
            probes[route] = RouteProbe(probe.route, probe.n, True, "", probe.top_evidence,
                                       probe.margin, probe.beta, agreement(tops, route))
    return probes, fits


def with_probe(hit, fits: Mapping[str, Any]):
    """``hit`` with each layer's evidence carrying its E-value and p-value from that layer's
    background fit (layers without a fit are left as they are)."""
    import dataclasses

    changed = {}
    for layer, ev in hit.evidence.items():
        fit = fits.get(layer)
        if fit is not None:
            changed[layer] = dataclasses.replace(ev, evalue=fit.evalue(ev.score), p_value=fit.p_value(ev.score))
    if not changed:
        return hit
    return dataclasses.replace(hit, evidence={**hit.evidence, **changed})


__all__ = ["EVIDENCE_CAP", "MIN_POINTS", "R0", "RouteProbe", "TailFit", "agreement", "background_z", "fit_tail",
           "probe_list", "probe_runs", "with_probe"]
