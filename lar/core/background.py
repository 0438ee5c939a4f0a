"""A layer's score background for one query: the moments of every score its scan computed.

A layer that scores the whole searched space anyway (the dense cosine scan, the exact MaxSim scan)
knows more than its top list: the mean and spread of the query's scores over every chunk it
scored. ``(s - mean) / std`` then reads a hit as "standard deviations above this query's typical
unit in this space", the scale on which a plain weighted sum of spaces works best in lar's studies
(``benchmarks/study_fusion_scales.py``: whole-corpus z beats the list's own min-max, z or tail-z
by 0.5 to 0.9 nDCG@10 points on SciFact). A top list alone cannot give this: its scores are the
upper tail, whose spread says little about how far the tail stands above the bulk.

The layer reports it with ``budget.set_background(...)`` (:class:`lar.core.layer.Budget`); the
orchestrator hands it to fusion (norm ``"bgz"``) and shows it on the run's probe. Accumulating
costs two sums per scored block.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from lar.core.errors import ConfigError

__all__ = ["MIN_BACKGROUND", "ScoreBackground", "ScoreMoments", "background_from"]

#: fewer scored chunks than this and the background is not used (a cut-short scan, a tiny scope)
MIN_BACKGROUND = 30


@dataclass(frozen=True, slots=True)
class ScoreBackground:
    """``n`` scores with mean ``mean`` and population standard deviation ``std`` (> 0)."""

    n: int
    mean: float
    std: float

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 2:
            raise ConfigError(f"ScoreBackground.n must be an int >= 2, got {self.n!r}")
        if not (math.isfinite(self.mean) and math.isfinite(self.std)) or self.std <= 0:
            raise ConfigError(f"ScoreBackground needs a finite mean and std > 0, got "
                              f"mean={self.mean!r}, std={self.std!r}")

    def z(self, score: float) -> float:
        return (score - self.mean) / self.std

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean": round(self.mean, 6), "std": round(self.std, 6)}


def background_from(d: Any) -> ScoreBackground | None:
    """A background from its ``to_dict()`` form (or an instance); None when ``d`` is None, has
    too few scores (:data:`MIN_BACKGROUND`) or is not a valid background (a layer's report is
    evidence, not input to fail on: an unusable one just leaves the route on its list's scale)."""
    if isinstance(d, ScoreBackground):
        bg = d
    elif isinstance(d, Mapping):
        try:
            bg = ScoreBackground(int(d["n"]), float(d["mean"]), float(d["std"]))
        except (KeyError, TypeError, ValueError, ConfigError):
            return None
    else:
        return None
    return bg if bg.n >= MIN_BACKGROUND else None


class ScoreMoments:
    """Running count, sum and sum of squares of scores (float64), block by block."""

    __slots__ = ("n", "s1", "s2")

    def __init__(self) -> None:
        self.n = 0
        self.s1 = 0.0
        self.s2 = 0.0

    def add(self, scores: np.ndarray) -> None:
        """Count ``scores`` in (non-finite ones are left out). Plain sums, not ``np.dot``: the
        float64 BLAS call took 2.9 ms per 20,000 scores on a busy machine, the sums 0.01 ms."""
        x = np.asarray(scores, dtype=np.float64).ravel()
        s1 = float(x.sum())
        if not math.isfinite(s1):
            x = x[np.isfinite(x)]
            s1 = float(x.sum())
        self.n += int(x.shape[0])
        self.s1 += s1
        self.s2 += float(np.square(x).sum())

    def result(self) -> ScoreBackground | None:
        """The background, or None with fewer than 2 scores or no spread."""
        if self.n < 2:
            return None
        mean = self.s1 / self.n
        var = max(0.0, self.s2 / self.n - mean * mean)
        std = math.sqrt(var)
        if not std > 1e-9 * max(1.0, abs(mean)):
            return None
        return ScoreBackground(self.n, mean, std)
