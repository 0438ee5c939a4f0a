"""The fitted model of adaptive fusion: a scale plus three numbers per route.

A route's weight for a query is ``w_r(q) = max(0, base_r + signal_r * top_r / CAP + agree_r *
agreement_r)``: ``top_r`` is the evidence of route r's best hit for this query (does anything
stand out at all?) and ``agreement_r`` the share of its first 10 hits other routes also have. A
route without signal (no fit: constant or too few scores, NaN) gets weight 0. The weights form a
:class:`FusionModel`: small, inspectable, saved as JSON with the names of the data it was fitted
on (``python -m lar_evals fit``). With no model given, lar uses the packaged one
(``lar/data/fusion-adaptive.json``) when present, else equal weights on the evidence scale.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.errors import ConfigError
from lar.fusion.decide import ExactRule, FollowRule
from lar.fusion.probe import EVIDENCE_CAP, RouteProbe
from lar.store.cas import atomic_write

PACKAGED_MODEL = Path(__file__).resolve().parents[1] / "data" / "fusion-adaptive.json"
MODEL_NORMS: tuple[str, ...] = ("evidence", "tailz", "minmax", "zscore", "bgz")
_LOADED: dict[tuple[str, int], "FusionModel"] = {}  # (resolved path, mtime_ns) -> model


@dataclass(frozen=True, slots=True)
class RouteWeights:
    """``w = max(0, base + signal * top_evidence / CAP + agree * agreement)``."""

    base: float = 1.0
    signal: float = 0.0
    agree: float = 0.0

    def __post_init__(self) -> None:
        for name in ("base", "signal", "agree"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"RouteWeights.{name} must be a finite number, got {v!r}")

    def weight(self, probe: RouteProbe) -> float:
        if not probe.usable:
            return 0.0
        return max(0.0, self.base + self.signal * min(probe.top_evidence, EVIDENCE_CAP) / EVIDENCE_CAP
                   + self.agree * probe.agreement)

    def to_dict(self) -> dict[str, float]:
        return {"base": self.base, "signal": self.signal, "agree": self.agree}


@dataclass(frozen=True)
class FusionModel:
    """Per-route weights of :func:`adaptive`; ``default`` serves routes not in ``routes``.

    ``subsets`` (``{signature: {route: RouteWeights}}``, :func:`lar.fusion.decide.signature`)
    holds weights fitted for one set of layer kinds; a query whose routes have that signature
    reads them first (then ``routes``, then ``default``). ``exact`` and ``follow`` are the
    per-query decisions of :mod:`lar.fusion.decide` (None: off). ``kinds`` (``{kind: total}``,
    :func:`lar.fusion.decide.kind`) balances the routes of one kind: each route's weight becomes
    its share of the kind's total among the routes of that kind the query has, so five lexical
    layers together weigh what one would (:func:`lar.fusion.adaptive.balanced`; empty: none)."""

    routes: Mapping[str, RouteWeights] = field(default_factory=dict)
    default: RouteWeights = RouteWeights()
    name: str = "equal"
    trained_on: tuple[str, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)
    norm: str = "evidence"
    subsets: Mapping[str, Mapping[str, RouteWeights]] = field(default_factory=dict)
    exact: ExactRule | None = None
    follow: FollowRule | None = None
    kinds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.norm not in MODEL_NORMS:
            raise ConfigError(f"FusionModel.norm must be one of {', '.join(MODEL_NORMS)}; got {self.norm!r}")
        for r, w in self.routes.items():
            if not isinstance(r, str) or not isinstance(w, RouteWeights):
                raise ConfigError(f"FusionModel.routes must map route names to RouteWeights; got {r!r}: {w!r}")
        for sig, table in self.subsets.items():
            if not isinstance(sig, str) or not all(isinstance(w, RouteWeights) for w in table.values()):
                raise ConfigError(f"FusionModel.subsets must map signatures to {{route: RouteWeights}}; got {sig!r}")
        for k, v in self.kinds.items():
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) \
                    or not math.isfinite(v) or v < 0:
                raise ConfigError(f"FusionModel.kinds must map kinds to numbers >= 0; got {k!r}: {v!r}")
        object.__setattr__(self, "kinds", MappingProxyType(dict(self.kinds)))
        object.__setattr__(self, "routes", MappingProxyType(dict(self.routes)))
        object.__setattr__(self, "subsets", MappingProxyType(
            {sig: MappingProxyType(dict(t)) for sig, t in self.subsets.items()}))
        object.__setattr__(self, "trained_on", tuple(self.trained_on))
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))

    def weights_for(self, route: str, signature: str | None = None) -> RouteWeights:
        """``route``'s weights for a query whose routes have ``signature`` (None: the global ones)."""
        fitted = self.subsets.get(signature) if signature is not None else None
        if fitted is not None and route in fitted:
            return fitted[route]
        return self.routes.get(route, self.default)

    def to_dict(self) -> dict[str, Any]:
        out = {"schema": 1, "kind": "lar-adaptive-fusion", "name": self.name, "norm": self.norm,
               "trained_on": list(self.trained_on), "default": self.default.to_dict(),
               "routes": {r: w.to_dict() for r, w in sorted(self.routes.items())}}
        if self.subsets:
            out["subsets"] = {sig: {r: w.to_dict() for r, w in sorted(t.items())}
                              for sig, t in sorted(self.subsets.items())}
        if self.exact is not None:
            out["exact"] = self.exact.to_dict()
        if self.follow is not None:
            out["follow"] = self.follow.to_dict()
        if self.kinds:
            out["kinds"] = dict(sorted(self.kinds.items()))
        out["info"] = dict(self.info)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "model") -> "FusionModel":
        if not isinstance(d, Mapping) or d.get("kind") != "lar-adaptive-fusion":
            raise ConfigError(f"{source}: not a lar adaptive fusion model (needs \"kind\": "
                              "\"lar-adaptive-fusion\"); make one with `python -m lar_evals fit`")
        try:
            routes = {r: RouteWeights(**w) for r, w in (d.get("routes") or {}).items()}
            default = RouteWeights(**(d.get("default") or {}))
            subsets = {sig: {r: RouteWeights(**w) for r, w in t.items()}
                       for sig, t in (d.get("subsets") or {}).items()}
        except (TypeError, AttributeError) as exc:
            raise ConfigError(f"{source}: bad route weights ({exc}); expected base/signal/agree") from None
        try:
            exact = ExactRule(**d["exact"]) if d.get("exact") is not None else None
            follow = FollowRule(**d["follow"]) if d.get("follow") is not None else None
        except TypeError as exc:
            raise ConfigError(f"{source}: bad exact/follow rule ({exc})") from None
        norm = d.get("norm", "evidence")
        if norm not in MODEL_NORMS:
            raise ConfigError(f"{source}: unknown norm {norm!r}; valid: {', '.join(MODEL_NORMS)}")
        return cls(routes, default, str(d.get("name", "model")), tuple(d.get("trained_on", ())),
                   dict(d.get("info") or {}), norm, subsets, exact, follow, dict(d.get("kinds") or {}))

    def save(self, path: str | Path) -> None:
        atomic_write(Path(path), (json.dumps(self.to_dict(), indent=2) + "\n").encode())


def load_model(spec: Any = None) -> FusionModel:
    """A model from a :class:`FusionModel`, a mapping, a JSON file path, or None (the packaged
    model if present, else equal weights)."""
    if isinstance(spec, FusionModel):
        return spec
    if isinstance(spec, Mapping):
        return FusionModel.from_dict(spec)
    if spec is None:
        if PACKAGED_MODEL.is_file():
            return load_model(PACKAGED_MODEL)
        return FusionModel()
    path = Path(spec)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError as exc:
        raise ConfigError(f"cannot read the fusion model {str(path)!r}: {exc}") from None
    key = (str(path.resolve()), stamp)
    model = _LOADED.get(key)
    if model is None:  # read once per file version: this runs on every adaptive search
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the fusion model {str(path)!r}: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"fusion model {str(path)!r} is not valid JSON: {exc}") from None
        model = FusionModel.from_dict(data, str(path))
        if len(_LOADED) > 16:
            _LOADED.clear()
        _LOADED[key] = model
    return model


__all__ = ["FusionModel", "MODEL_NORMS", "PACKAGED_MODEL", "RouteWeights", "load_model"]
