"""benchmarks/gpu_bench.py's smoke mode runs on the CPU (issue 23, part 4): every step of the
device benchmark but the eng.search one, at tiny sizes, with its report written where asked and
the late scan's checks (the same top 100 as numpy, a resident arena hit on every later scan)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # ~20 s on a loaded 2-core machine

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_bench.py"


def test_gpu_bench_smoke_runs_on_the_cpu(tmp_path):
    import torch

    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    threads = torch.get_num_threads()
    assert bench.main(["--smoke", "--no-engine", "--out", str(tmp_path), "--name", "b"]) == 0
    assert torch.get_num_threads() == threads  # the smoke's one thread is given back
    doc = json.loads((tmp_path / "b.json").read_text())
    steps = {(r["step"], r.get("how") or r.get("compute_dtype")): r for r in doc["steps"]}
    assert not [r for r in doc["steps"] if "failed" in r]
    assert steps[("scifact-sized scan", "torch")]["same_top100"] is True
    assert steps[("large corpus scan_units", None)]["hit_rate"] == 1.0
    assert steps[("large corpus kernel", "float16")]["tokens"] == 200_000
    assert doc["meta"]["smoke"] is True and "| bandwidth | cpu |" in (tmp_path / "b.md").read_text()
