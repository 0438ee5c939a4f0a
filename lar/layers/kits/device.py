"""Which device a model layer's work runs on, as ``status`` reports it (issue 23).

``status`` must stay cheap and must not be the call that imports torch (seconds, and maybe
not installed): while torch is not imported yet, "is CUDA available" is answered from torch's
build (its ``version.py`` names the CUDA version, or None for a CPU wheel), the NVIDIA driver
(``/proc/driver/nvidia/version``) and ``CUDA_VISIBLE_DEVICES``; once torch is imported, by
``torch.cuda.is_available()`` itself, the answer the kernels act on.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

__all__ = ["cuda_available", "torch_device", "scan_device", "layer_device", "scan_layer_device"]

_DRIVER = Path("/proc/driver/nvidia/version")
_CUDA_LINE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*(None|['\"][^'\"]*['\"])", re.M)


def _torch_build_has_cuda() -> bool:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    for folder in spec.submodule_search_locations:
        try:
            text = (Path(folder) / "version.py").read_text(encoding="utf-8")
        except OSError:
            continue
        m = _CUDA_LINE.search(text)
        return bool(m) and m.group(1) != "None"
    return False


def cuda_available() -> bool:
    """Whether torch work that asks for "CUDA when available" gets a GPU in this process."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and hasattr(cuda, "is_available"):
        return bool(cuda.is_available())
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return _DRIVER.exists() and _torch_build_has_cuda()


def torch_device(requested: str | None, default_cpu: bool = False) -> str:
    """The device torch work runs on: ``requested`` when set, else "cpu" when the code falls
    back to the CPU (``default_cpu``), else "cuda" when available, else "cpu"."""
    if requested:
        return str(requested)
    if default_cpu:
        return "cpu"
    return "cuda" if cuda_available() else "cpu"


def scan_device(backend: str, requested: str | None, shards: int = 0) -> str:
    """Where a MaxSim scan runs: numpy on the CPU; torch on ``requested``, else CUDA when
    available; on Ray actors (``shards``) wherever they pick, which this process cannot see."""
    if shards:
        return f"{requested or 'auto'} on {shards} Ray actors"
    return "cpu" if backend == "numpy" else torch_device(requested)


def layer_device(**parts: str) -> str:
    """One word when every part of the layer uses the same device ("cpu"), else the parts:
    ``layer_device(encoder="cpu", scan="cuda")`` -> "encoder cpu, scan cuda"."""
    if len(set(parts.values())) == 1:
        return next(iter(parts.values()))
    return ", ".join(f"{name} {dev}" for name, dev in parts.items())


def scan_layer_device(encoder: str, backend: str, requested: str | None, shards: int = 0) -> str:
    """``layer_device`` of a layer whose encoder runs on ``encoder`` and whose MaxSim scan
    runs where ``scan_device`` says."""
    return layer_device(encoder=encoder, scan=scan_device(backend, requested, shards))
