"""lar.core.background: score moments over whole scans, and their use by fusion (norm "bgz")."""
import math

import numpy as np
import pytest

from lar.core.background import MIN_BACKGROUND, ScoreBackground, ScoreMoments, background_from
from lar.core.errors import ConfigError
from lar.fusion.adaptive import adaptive_fusion
from lar.fusion.model import FusionModel, RouteWeights
from lar.fusion.probe import probe_runs
from lar.fusion.scales import route_values


def test_moments_over_blocks_equal_the_whole_array():
    rng = np.random.default_rng(3)
    x = rng.normal(0.3, 0.07, 5000).astype(np.float32)
    m = ScoreMoments()
    for part in np.array_split(x, 7):
        m.add(part)
    m.add(np.array([np.nan, np.inf], dtype=np.float32))  # non-finite scores are not counted
    bg = m.result()
    assert bg.n == 5000
    assert bg.mean == pytest.approx(float(x.astype(np.float64).mean()), abs=1e-9)
    assert bg.std == pytest.approx(float(x.astype(np.float64).std()), rel=1e-6)
    assert bg.z(bg.mean + 2 * bg.std) == pytest.approx(2.0)


def test_no_background_without_spread_or_with_one_score():
    m = ScoreMoments()
    assert m.result() is None
    m.add(np.array([0.5]))
    assert m.result() is None
    m.add(np.full(100, 0.5))
    assert m.result() is None  # constant: no spread to read a score against


def test_background_checks_itself_and_reads_reports_leniently():
    with pytest.raises(ConfigError, match="std > 0"):
        ScoreBackground(10, 0.1, 0.0)
    with pytest.raises(ConfigError, match="n must be"):
        ScoreBackground(1, 0.1, 0.1)
    with pytest.raises(ConfigError):
        ScoreBackground(10, math.nan, 0.1)
    good = ScoreBackground(MIN_BACKGROUND, 0.2, 0.05)
    assert background_from(good.to_dict()) == good
    assert background_from(good) == good
    assert background_from({"n": MIN_BACKGROUND - 1, "mean": 0.2, "std": 0.05}) is None  # too few
    assert background_from({"n": 100, "mean": 0.2}) is None
    assert background_from({"n": 100, "mean": 0.2, "std": -1}) is None
    assert background_from("junk") is None and background_from(None) is None


def _runs():
    # route a: cosine-like scores with a small spread; route b: BM25-like sums with a large one
    a = [(f"d{i}", 0.60 - 0.004 * i) for i in range(30)]
    b = [(f"d{29 - i}", 12.0 - 0.1 * i) for i in range(30)]
    return {"a": a, "b": b}


def test_bgz_reads_scores_against_the_reported_background():
    runs = _runs()
    _, fits = probe_runs(runs)
    bgs = {"a": {"n": 5000, "mean": 0.30, "std": 0.10}}
    vals = route_values(runs, fits, "bgz", bgs)
    va, floor_a = vals["a"]
    assert va["d0"] == pytest.approx(3.0) and va["d29"] == pytest.approx((0.484 - 0.30) / 0.10)
    assert floor_a == pytest.approx(min(va.values()))
    # route b has no background: it is read on the tailz scale instead
    assert vals["b"] == route_values(runs, fits, "tailz")["b"]


def test_adaptive_bgz_weighs_each_list_by_its_spread_in_background_sds():
    runs = _runs()
    model = FusionModel({"a": RouteWeights(1.0), "b": RouteWeights(1.0)}, norm="bgz")
    # a's 30 scores span 0.116 = 5.8 of its background sds, b's 2.9 only 0.97: a decides
    bgs = {"a": {"n": 5000, "mean": 0.30, "std": 0.02}, "b": {"n": 5000, "mean": 2.0, "std": 3.0}}
    items, *_ = adaptive_fusion(runs, k=5, model=model, backgrounds=bgs)
    assert [it.key for it in items] == ["d0", "d1", "d2", "d3", "d4"]
    # the same lists against other backgrounds: b's span is 5.8 sds, a's 1.16, so b decides
    bgs = {"a": {"n": 5000, "mean": 0.30, "std": 0.10}, "b": {"n": 5000, "mean": 2.0, "std": 0.5}}
    items, *_ = adaptive_fusion(runs, k=5, model=model, backgrounds=bgs)
    assert [it.key for it in items] == ["d29", "d28", "d27", "d26", "d25"]
