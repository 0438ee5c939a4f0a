"""Batched encoder passes sized to the time left (lar.engine.batching.PassRate): a build in
short slices (the harness's progress loop, a search's spare time) always makes progress, where
a batch sized past every slice was abandoned at each deadline and nothing was ever built."""
from __future__ import annotations

import time

import lar
from lar.core import deadline as work
from lar.core.layer import Unit
from lar.engine.batching import BATCH_BYTES, PassRate, fitted_batches


def _units(sizes):
    return [Unit(f"f{i}", f"h{i}", s) for i, s in enumerate(sizes)]


def test_an_unmeasured_pass_starts_small_and_a_measured_one_fits_the_time_left():
    rate = PassRate()
    first = next(fitted_batches(_units([100] * 200), time.monotonic() + 60, rate))
    assert sum(u.size for u in first) <= PassRate.FIRST_BYTES < BATCH_BYTES
    rate.observe(1000, 1.0)  # 1,000 bytes a second
    runs = list(fitted_batches(_units([100] * 30), time.monotonic() + 2.0, rate))
    assert sum(u.size for u in runs[0]) <= 1000 * 2.0 * PassRate.SHARE
    assert len(runs[0]) >= 8
    assert [u.path for r in runs for u in r] == [f"f{i}" for i in range(30)]  # order, all once
    rate.missed()
    assert rate.bytes_per_s == 500
    one = next(fitted_batches(_units([5000, 10]), time.monotonic() + 0.001, rate))
    assert [u.path for u in one] == ["f0"]  # a batch always holds at least one unit


def test_a_build_in_short_slices_progresses_when_the_pass_is_slow(tmp_path, monkeypatch):
    root = tmp_path / "c"
    root.mkdir()
    for i in range(40):
        (root / f"n{i:02d}.txt").write_text(f"note {i} about the anytime search and its layers\n")
    passes = []

    def slow_pass(self, units):  # 20 ms a unit, abandoned at the work limit like a model pass
        for _ in units:
            time.sleep(0.02)
            work.check("the test's encoder pass")
        passes.append(len(units))
        return len(units)

    with lar.open(root, state=tmp_path / "s") as eng:
        monkeypatch.setattr(type(eng.layers["bm25"]), "prepare_units", slow_pass, raising=False)
        built = 0
        for _ in range(60):
            rep = eng.build(timebox=0.25, layers=["bm25"])["layers"]["bm25"]
            built += rep["ok"]
            if rep["pending"] == 0:
                break
        assert built == 40, rep
        assert eng.layers["bm25"].coverage(eng.scope_view()) == 1.0
