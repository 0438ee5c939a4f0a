"""A layer's vectors kept on its scan's torch device (issue 23): the late layer's token arena,
the dense and static layers' chunk vectors.

Option ``device_mb`` (config ``late_device_mb``, ``dense_device_mb``, ``static_device_mb``):
None (default) keeps the vectors on a non-CPU scan device (CUDA) within half the device memory
free when the arena is made, and has no arena on the CPU (there the host copies are the arena:
:mod:`lar.layers.late.arena`, the memory-mapped chunk pack); 0 turns it off (the late scan ships
every block from the host per query; dense/static scan with numpy); n > 0 is a budget of n MiB
on whatever torch device the scan runs on, the CPU included (torch CPU tensors: the very code
path of a GPU, which is how the tests run it).

The arena fills as scans meet units (the first scan copies each unit once), keeps them across
searches, frees a unit's slot when the unit is rebuilt or dropped, and scans the units past its
budget from the host. ``status`` reports its :class:`lar.maxsim.resident.ResidentStats`.
"""
from __future__ import annotations

import threading
from typing import Any

from lar.core.errors import ConfigError
from lar.layers.kits.device import cuda_available

__all__ = ["ResidentHolder", "check_device_mb", "resident_budget", "resident_device",
           "torch_installed", "AUTO_FRACTION"]

AUTO_FRACTION = 0.5  # of the device's free memory, when device_mb is None


def check_device_mb(layer: str, v: Any) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ConfigError(f"layer {layer!r}: device_mb must be None (auto), 0 (off) or a number "
                          f"of MiB > 0, got {v!r}")


def torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def resident_device(backend: str, device: str | None, device_mb: int | None) -> str | None:
    """The device an arena would live on, or None for no arena (never imports torch)."""
    if backend != "torch" or device_mb == 0:
        return None
    dev = str(device) if device else ("cuda" if cuda_available() else "cpu")
    if device_mb is None and dev.split(":")[0] == "cpu":
        return None
    return dev


def resident_budget(backend: str, device: str | None, device_mb: int | None) -> tuple[str, int] | None:
    """``(device, budget bytes)`` of the arena a scan should use, or None for no arena."""
    dev = resident_device(backend, device, device_mb)
    if dev is None:
        return None
    if device_mb is not None:
        return dev, int(device_mb) << 20
    import torch  # the torch backend is installed (backend == "torch")

    free, _total = torch.cuda.mem_get_info(torch.device(dev))
    return dev, int(free * AUTO_FRACTION)


class ResidentHolder:
    """A layer's one ``DeviceArena``, made by the first scan that wants one."""

    def __init__(self) -> None:
        self._arena = None
        self._lock = threading.Lock()

    def arena(self, backend: str, device: str | None, device_mb: int | None):
        """The arena for a scan with these options (made on first use), or None."""
        with self._lock:
            if self._arena is None:
                plan = resident_budget(backend, device, device_mb)
                if plan is None:
                    return None
                from lar.maxsim.resident import DeviceArena

                self._arena = DeviceArena(*plan)
            return self._arena

    def drop(self, hashes) -> None:
        """Free the slots of units rebuilt or dropped."""
        if self._arena is not None:
            self._arena.drop(hashes)

    def positions(self) -> dict[str, int] | None:
        """Resident units in arena order, or None before there is an arena."""
        return None if self._arena is None else self._arena.positions()

    def status(self) -> dict[str, Any] | None:
        return None if self._arena is None else self._arena.stats().to_dict()

    def prune(self, keep) -> int:
        """Free the slots of units no longer in ``keep`` (built elsewhere since, or gone), when
        the arena is full: room for the units that are scanned from the host."""
        a = self._arena
        if a is None or not a.stats().units_over_budget:
            return 0
        a.forget_over_budget()
        return a.drop([k for k in a.positions() if k not in keep])
