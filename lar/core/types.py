"""Frozen value types shared by every part of lar: Span, Evidence, Hit, LayerStatus, LayerRun.

Each type checks its own invariants in ``__post_init__`` and raises ``ConfigError`` (a
``LarError``) when they do not hold.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.errors import ConfigError, HitNotFoundError

HASH_RE = re.compile(r"^[0-9a-f]{8,64}$")
ID_HASH_CHARS = 12
_ID_RE = re.compile(r"^([0-9a-f]{8,64}):(\d+)-(\d+)$")

ROLES = frozenset({"generate", "refine"})
ORIGINS = frozenset({"text", "derived", "metadata"})


def _freeze(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Span:
    """Byte range ``[start, end)`` into the text of the unit whose content hash is ``hash``."""

    hash: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.hash, str) or not HASH_RE.match(self.hash):
            raise ConfigError(f"Span.hash must be a lowercase hex content hash, got {self.hash!r}")
        if not (isinstance(self.start, int) and isinstance(self.end, int)):
            raise ConfigError("Span.start and Span.end must be integers (byte offsets)")
        if self.start < 0 or self.end < self.start:
            raise ConfigError(f"invalid span [{self.start}, {self.end}): need 0 <= start <= end")

    @property
    def length(self) -> int:
        return self.end - self.start

    def overlaps(self, other: "Span") -> bool:
        if self.hash != other.hash:
            return False
        if self.length == 0 or other.length == 0:  # empty spans overlap what contains them
            return other.start <= self.start <= other.end or self.start <= other.start <= self.end
        return self.start < other.end and other.start < self.end

    def contains(self, other: "Span") -> bool:
        return self.hash == other.hash and self.start <= other.start and other.end <= self.end

    @property
    def id(self) -> str:
        return f"{self.hash[:ID_HASH_CHARS]}:{self.start}-{self.end}"


def parse_hit_id(hit_id: str) -> tuple[str, int, int]:
    """Split a hit id ``<hash prefix>:<start>-<end>`` into its parts (hash may be a prefix)."""
    m = _ID_RE.match(hit_id.strip()) if isinstance(hit_id, str) else None
    if not m:
        raise HitNotFoundError(
            f"{hit_id!r} is not a lar hit id; ids look like '3fa9c1d2e4b5:120-480' "
            "(take them from a search result)"
        )
    return m.group(1), int(m.group(2)), int(m.group(3))


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one layer says about one hit: its rank, score and how to read the score."""

    layer: str
    rank: int
    score: float
    score_kind: str
    query: Any = None
    sub_spans: tuple[tuple[int, int], ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    # the score read against the layer's background for this query (lar.fusion.probe): expected number
    # of background units scoring as high, and the chance of that; None when not probed
    evalue: float | None = None
    p_value: float | None = None

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ConfigError(f"Evidence.rank is 1-based, got {self.rank}")
        if not isinstance(self.score, (int, float)) or math.isnan(self.score):
            raise ConfigError(f"Evidence.score must be a number, got {self.score!r}")
        for s, e in self.sub_spans:
            if s < 0 or e < s:
                raise ConfigError(f"invalid sub-span [{s}, {e})")
        object.__setattr__(self, "sub_spans", tuple(tuple(x) for x in self.sub_spans))
        object.__setattr__(self, "details", _freeze(self.details))

    def to_dict(self) -> dict[str, Any]:
        out = {
            "rank": self.rank,
            "score": self.score,
            "score_kind": self.score_kind,
            "query": self.query,
            "sub_spans": [list(s) for s in self.sub_spans],
        }
        if self.details:
            out["details"] = dict(self.details)
        if self.evalue is not None:
            out["evalue"] = float(f"{self.evalue:.4g}")
            out["p_value"] = float(f"{self.p_value:.4g}") if self.p_value is not None else None
        return out


@dataclass(frozen=True, slots=True)
class Hit:
    """A piece of evidence: a span of a unit, where it lives now, and which layers found it.

    ``paths``, ``lines`` and ``excerpt`` are enriched at match time from the current file state;
    ``signals`` are layer names; ``evidence`` maps each signal to what that layer said.
    """

    span: Span
    signals: tuple[str, ...]
    evidence: Mapping[str, Evidence]
    paths: tuple[str, ...] = ()
    lines: tuple[int, int] | None = None
    excerpt: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    # the fused score and 1-based rank fusion gave this hit (lar.fusion.pipeline.fuse_hits); the
    # scale the score is on is the result's ``score_scale``. None on a single layer's own hit.
    score: float | None = None
    rank: int | None = None

    def __post_init__(self) -> None:
        if self.rank is not None and (isinstance(self.rank, bool) or not isinstance(self.rank, int)
                                      or self.rank < 1):
            raise ConfigError(f"Hit.rank is 1-based, got {self.rank!r}")
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)) \
                    or math.isnan(self.score):
                raise ConfigError(f"Hit.score must be a number, got {self.score!r}")
            object.__setattr__(self, "score", float(self.score))
        if not self.signals:
            raise ConfigError("a Hit needs at least one signal (the layer that found it)")
        object.__setattr__(self, "signals", tuple(self.signals))
        object.__setattr__(self, "paths", tuple(self.paths))
        object.__setattr__(self, "evidence", _freeze(self.evidence))
        object.__setattr__(self, "context", _freeze(self.context))
        missing = [s for s in self.signals if s not in self.evidence]
        if missing:
            raise ConfigError(f"Hit signals {missing} have no evidence entry")
        if self.lines is not None:
            a, b = self.lines
            if a < 1 or b < a:
                raise ConfigError(f"Hit.lines must be 1-based and ordered, got {self.lines}")

    # -- convenience -------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.span.id

    @property
    def hash(self) -> str:
        return self.span.hash

    @property
    def path(self) -> str | None:
        return self.paths[0] if self.paths else None

    @classmethod
    def single(
        cls,
        layer: str,
        span: Span,
        *,
        rank: int,
        score: float,
        score_kind: str,
        query: Any = None,
        sub_spans: tuple[tuple[int, int], ...] | list = (),
        details: Mapping[str, Any] | None = None,
        excerpt: str = "",
    ) -> "Hit":
        """The hit one layer produces: one signal, one evidence entry."""
        ev = Evidence(layer, rank, float(score), score_kind, query, tuple(sub_spans), details or {})
        return cls(span=span, signals=(layer,), evidence={layer: ev}, excerpt=excerpt)

    def to_compact(self) -> dict[str, Any]:
        """The compact JSON an agent sees; the rest comes with ``fetch``."""
        out = {
            "id": self.id,
            "path": self.path,
            "lines": list(self.lines) if self.lines else None,
            "excerpt": self.excerpt,
            "signals": list(self.signals),
        }
        if self.rank is not None:
            out["rank"] = self.rank
        if self.score is not None:
            out["score"] = float(f"{self.score:.6g}")
        return out

    def to_dict(self) -> dict[str, Any]:
        out = self.to_compact()
        out.update(
            {
                "hash": self.hash,
                "span": [self.span.start, self.span.end],
                "paths": list(self.paths),
                "evidence": {k: v.to_dict() for k, v in self.evidence.items()},
            }
        )
        if self.context:
            out["context"] = dict(self.context)
        return out


class RunState(str, enum.Enum):
    RAN = "ran"
    ABORTED = "aborted"
    SKIPPED = "skipped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class LayerStatus:
    """One line per layer: what it is and how much of the scope it covers now."""

    name: str
    version: str
    roles: frozenset[str]
    origin: str
    granularity: str
    coverage: float
    query_format: str
    cost: str
    units: int = 0
    built_units: int = 0
    notes: str = ""
    # where the layer's model work runs: "cpu", "cuda", or per part ("encoder cpu, scan cuda");
    # "" for a layer without a model
    device: str = ""
    # the layer's vectors kept on its scan device (lar.maxsim.resident.ResidentStats.to_dict():
    # resident bytes, units resident, hit rate, ...); None when the layer keeps none there
    resident: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "roles", frozenset(self.roles))
        if not self.roles or not self.roles <= ROLES:
            raise ConfigError(f"layer {self.name!r}: roles must be a non-empty subset of {sorted(ROLES)}")
        if self.origin not in ORIGINS:
            raise ConfigError(f"layer {self.name!r}: origin must be one of {sorted(ORIGINS)}")
        if not 0.0 <= self.coverage <= 1.0:
            raise ConfigError(f"layer {self.name!r}: coverage must be in [0, 1], got {self.coverage}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "roles": sorted(self.roles),
            "origin": self.origin,
            "granularity": self.granularity,
            "coverage": round(self.coverage, 4),
            "query_format": self.query_format,
            "cost": self.cost,
            "units": self.units,
            "built_units": self.built_units,
            "notes": self.notes,
            "device": self.device,
            "resident": None if self.resident is None else dict(self.resident),
        }

    def resident_text(self) -> str:
        """One line of what the layer keeps on its device, or "" (``lar status``)."""
        r = self.resident
        if not r:
            return ""
        hit = r.get("hit_rate")
        total = r.get("units_resident", 0) + r.get("units_over_budget", 0)
        return (f"resident on {r.get('device')}: {r.get('resident_bytes', 0) / 2**20:.1f} MiB of "
                f"{r.get('budget_bytes', 0) / 2**20:.0f} MiB, {r.get('units_resident', 0)}/{total} "
                f"units, hit rate {'-' if hit is None else f'{hit:.0%}'}")


@dataclass(frozen=True, slots=True)
class LayerRun:
    """What one layer did in one call: ran, aborted (deadline), skipped (with reason) or failed."""

    name: str
    state: RunState
    reason: str = ""
    contributions: int = 0
    elapsed: float = 0.0
    coverage: float | None = None
    role: str = "generate"
    query: Any = None
    # label-free signal strength of this layer's list for this query (lar.fusion.probe) and the weight
    # the adaptive fusion gave it; None when the layer found nothing or was not probed
    probe: Mapping[str, Any] | None = None
    # what else the layer reported for this run (lar.core.layer.LayerReport): free-text notes and
    # structured, layer-specific details
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", RunState(self.state))
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.contributions < 0 or self.elapsed < 0:
            raise ConfigError("LayerRun.contributions and elapsed must be >= 0")
        if self.coverage is not None and not 0.0 <= self.coverage <= 1.0:
            raise ConfigError(f"LayerRun.coverage must be in [0, 1] or None, got {self.coverage}")
        if self.state in (RunState.SKIPPED, RunState.FAILED) and not self.reason:
            raise ConfigError(f"a {self.state.value} LayerRun needs a reason")

    def to_dict(self, probe: bool = True) -> dict[str, Any]:
        """The JSON form (``probe=False``: without the probe features, as in compact results)."""
        return {
            "name": self.name,
            "state": self.state.value,
            "reason": self.reason,
            "contributions": self.contributions,
            "elapsed": round(self.elapsed, 6),
            "coverage": None if self.coverage is None else round(self.coverage, 4),
            "role": self.role,
            **({"probe": dict(self.probe)} if probe and self.probe is not None else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"details": dict(self.details)} if self.details else {}),
        }
