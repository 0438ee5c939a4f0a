"""``status`` says which device each model layer uses (issue 23, part 3): on a machine without
a GPU "cpu" for the model layers (with one, the late layer's scan says "cuda"), "" for the
layers without a model; the CUDA answer is checked through a fake torch build and a fake
NVIDIA driver file."""
from __future__ import annotations

import json
import sys

import pytest

from lar.apps.cli import main
from lar.layers.kits import device as dev
from lar.layers.kits.device import cuda_available, layer_device, scan_device, torch_device

MODEL_LAYERS = {"dense", "late", "static"}  # configured by default (the packaged models)
# the late layer's MaxSim scan takes CUDA when there is one (then: "encoder cpu, scan cuda")
LATE = layer_device(encoder="cpu", scan="cuda" if cuda_available() else "cpu")
NO_MODEL = {"names", "grep", "bm25"}


def test_layer_device_words():
    assert layer_device(encoder="cpu", scan="cpu") == "cpu"
    assert layer_device(encoder="cpu", scan="cuda") == "encoder cpu, scan cuda"
    assert torch_device("cuda:1") == "cuda:1"
    assert torch_device(None, default_cpu=True) == "cpu"
    assert scan_device("numpy", "cuda") == "cpu"  # the numpy kernel never leaves the CPU
    assert scan_device("torch", "cuda:0") == "cuda:0"
    assert scan_device("torch", None, shards=4) == "auto on 4 Ray actors"


def _fake_torch(tmp_path, monkeypatch, cuda: str):
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('status must not import torch')\n")
    (pkg / "version.py").write_text(f"from typing import Optional\n__version__ = '2.13.0'\n"
                                    f"cuda: Optional[str] = {cuda}\n")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    driver = tmp_path / "nvidia-version"
    driver.write_text("NVRM version: 570\n")
    monkeypatch.setattr(dev, "_DRIVER", driver)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return driver


def test_cuda_seen_without_importing_torch(tmp_path, monkeypatch):
    driver = _fake_torch(tmp_path, monkeypatch, "'13.0'")
    assert cuda_available() and torch_device(None) == "cuda"
    assert scan_device("torch", None) == "cuda"
    assert "torch" not in sys.modules
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not cuda_available()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    driver.unlink()  # a CUDA build without a driver: the CPU
    assert not cuda_available() and torch_device(None) == "cpu"


def test_cpu_wheel_means_cpu(tmp_path, monkeypatch):
    _fake_torch(tmp_path, monkeypatch, "None")
    assert not cuda_available() and scan_device("torch", None) == "cpu"


def test_imported_torch_is_asked(monkeypatch):
    class Cuda:
        @staticmethod
        def is_available():
            return True

    monkeypatch.setitem(sys.modules, "torch", type(sys)("torch"))
    sys.modules["torch"].cuda = Cuda
    assert cuda_available() and torch_device(None) == "cuda"


def test_engine_status_reports_cpu(engine):
    st = engine.status()
    by = {l.name: l for l in st.layers}
    for name in MODEL_LAYERS:
        want = LATE  # dense and static scan where late does (lar.layers.kits.resident)
        assert by[name].device == want, (name, by[name].device, by[name].notes)
    for name in NO_MODEL:
        assert by[name].device == ""
    assert "sparse" in by and by["sparse"].device == ""  # not configured: no device
    assert st.to_dict()["layers"][0].keys() >= {"device"}
    text = str(st)
    late_line = next(line for line in text.splitlines() if line.strip().startswith("late "))
    assert late_line.endswith(f"device: {LATE}")
    assert "<th style='text-align:left'>device</th>" in st._repr_html_()
    from lar_magics.render import coverage_html

    assert "<th>device</th>" in coverage_html(st) and f"<td>{LATE}</td>" in coverage_html(st)


def test_late_device_option_is_reported(corpus, tmp_path):
    import lar

    eng = lar.open(corpus, state=tmp_path / "st", config={"late_device": "cuda:1"})
    try:
        late = eng.status().layer("late")
        assert late.device in ("encoder cpu, scan cuda:1", "cpu")
        if late.device == "cpu":  # only when torch is absent: the numpy kernel
            assert eng.layers["late"].backend() == "numpy"
    finally:
        eng.close()


def test_cli_status_json_has_devices(corpus, tmp_path, capsys):
    code = main(["status", "--root", str(corpus), "--state", str(tmp_path / "s"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    devices = {l["name"]: l["device"] for l in doc["layers"]}
    assert code == 0 and devices["late"] == LATE and devices["dense"] == LATE
    assert devices["grep"] == ""

