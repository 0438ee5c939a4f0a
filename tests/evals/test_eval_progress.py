"""Progress of a beir run: the build phase in slices with units built, and the query bar."""
from __future__ import annotations

import io

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
