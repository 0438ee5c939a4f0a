"""Progress of a beir run: the build phase in slices with units built, and the query bar."""
from __future__ import annotations

import io
import time

from lar_evals.progress import Bars


def test_bars_show_queries_rate_and_the_build(tmp_path):
    out = io.StringIO()
    with Bars(stream=out) as bars:
        bars.build("bm25", 5, 10)
        bars.build("bm25", 10, 10)
        for i in range(1, 4):
            bars.queries(i, 3)
    text = out.getvalue()
    assert "build bm25" in text and "10/10" in text
    assert "queries" in text and "3/3" in text and "query/s" in text  # count and rate


def test_plain_lines_without_bars():
    out = io.StringIO()
    bars = Bars(stream=out, plain=True)
    for i in range(1, 21):
        bars.queries(i, 20)
    bars.build("dense", 3, 3)
    lines = out.getvalue().splitlines()
    assert lines[0] == "evals: 1/20 queries" and "evals: 20/20 queries" in lines
    assert len([ln for ln in lines if "queries" in ln]) == 11  # every tenth, and the last
    assert lines[-1] == "evals: build dense 3/3 units"


def test_run_reports_build_progress_per_slice(beir_dir, tmp_path):
    from lar_evals import evaluate_beir, load_beir

    calls = []
    ev = evaluate_beir(load_beir(beir_dir, "test"), routes=["bm25", "grep"], fusion=["rrf"], k=10,
                       timebox=2.0, cache_root=tmp_path / "c", max_queries=2,
                       build_progress=lambda layer, done, total: calls.append((layer, done, total)),
                       progress=lambda done, total: calls.append(("q", done, total)))
    builds = [c for c in calls if c[0] == "bm25"]
    assert builds and builds[-1][1] == builds[-1][2] > 0  # every unit built, of the layer's total
    assert [c for c in calls if c[0] == "q"] == [("q", 1, 2), ("q", 2, 2)]
    assert ev.summary["build"]["bm25"]["pending"] == 0
    assert ev.summary["build"]["bm25"]["ok"] + ev.summary["build"]["bm25"]["skipped"] == builds[-1][2]


class _SlicedEngine:
    """An engine whose dense build reports ``slices`` in turn (the shape of ``Engine.build``'s
    report for one layer), the last one for as long as it is asked."""

    def __init__(self, slices):
        from types import SimpleNamespace

        self.layers = {"dense": SimpleNamespace(always_current=False)}
        self.slices = list(slices)

    def build(self, timebox, layers):
        if len(self.slices) == 1:  # the last report again, after the slice's time
            time.sleep(timebox)
            return {"layers": {"dense": dict(self.slices[0])}}
        return {"layers": {"dense": self.slices.pop(0)}}


def test_sliced_build_reports_the_last_slice_not_an_early_loading_reason():
    from lar.engine.warmup import LOADING_REASON
    from lar_evals.run import build_layers

    zero = {"ok": 0, "skipped": 0, "failed": 0}
    eng = _SlicedEngine([
        {"state": "aborted", **zero, "pending": 3, "coverage": 0.0, "reason": LOADING_REASON},
        {"state": "aborted", **zero, "ok": 2, "pending": 1, "coverage": 0.6667},
        {"state": "ran", **zero, "ok": 1, "pending": 0, "coverage": 1.0},
    ])
    calls = []
    _, reports = build_layers(eng, ["dense"], 60.0, lambda *c: calls.append(c), slice_s=1.0)
    assert reports["dense"] == {"ok": 3, "skipped": 0, "failed": 0, "state": "ran", "pending": 0,
                                "coverage": 1.0}  # no stale "model loading" reason
    assert calls == [("dense", 0, 3), ("dense", 2, 3), ("dense", 3, 3)]


def test_sliced_build_still_loading_at_the_end_keeps_the_reason():
    from lar.engine.warmup import LOADING_REASON
    from lar_evals.run import build_layers

    zero = {"ok": 0, "skipped": 0, "failed": 0}
    last = {"state": "aborted", **zero, "pending": 3, "coverage": 0.0, "reason": LOADING_REASON}
    eng = _SlicedEngine([last])  # the model still loading in every slice
    _, reports = build_layers(eng, ["dense"], 0.3, lambda *c: None, slice_s=0.1)
    assert reports["dense"] == last
