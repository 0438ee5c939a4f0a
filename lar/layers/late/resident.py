"""The late layer's device arena (issue 23): its token vectors kept on the scan's torch device.

Option ``device_mb`` (config ``late_device_mb``): None (default) keeps the tokens on a non-CPU
scan device (CUDA) within half the device memory free when the arena is made, and has no arena
on the CPU (the host arena, :mod:`lar.layers.late.arena`, is the CPU's); 0 turns it off (every
block is shipped from the host per query); n > 0 is a budget of n MiB on whatever torch device
the scan runs on, the CPU included (torch CPU tensors: the very code path of a GPU, which is how
the tests run it).

The arena fills as scans meet units (the first scan copies each unit once), keeps them across
searches, frees a unit's slot when the unit is rebuilt or dropped, and scans the units past its
budget from the host. ``status`` reports its :class:`lar.maxsim.resident.ResidentStats`.
"""
from __future__ import annotations

import threading
from typing import Any

from lar.core.errors import ConfigError
from lar.layers.kits.device import cuda_available

__all__ = ["LateResident", "check_device_mb", "resident_budget", "AUTO_FRACTION"]

AUTO_FRACTION = 0.5  # of the device's free memory, when device_mb is None


def check_device_mb(layer: str, v: Any) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise ConfigError(f"layer {layer!r}: device_mb must be None (auto), 0 (off) or a number "
                          f"of MiB > 0, got {v!r}")


def resident_budget(backend: str, device: str | None, device_mb: int | None) -> tuple[str, int] | None:
    """``(device, budget bytes)`` of the arena a scan should use, or None for no arena."""
    if backend != "torch" or device_mb == 0:
        return None
    dev = str(device) if device else ("cuda" if cuda_available() else "cpu")
    if device_mb is not None:
        return dev, int(device_mb) << 20
    if dev.split(":")[0] == "cpu":
        return None
    import torch  # the torch backend is installed (backend == "torch")

    free, _total = torch.cuda.mem_get_info(torch.device(dev))
    return dev, int(free * AUTO_FRACTION)


class LateResident:
    """The late layer's one ``DeviceArena``, made by the first scan that wants one."""

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
