"""What a shard of the late layer holds: its units' token matrices, read from the sidecars.

A :class:`SidecarSource` is handed to each shard actor (``lar.distributed.ray_scan``); it pickles
as its two settings only (the sidecar folder and the model id), so a restarted actor starts
empty and reloads its units from the sidecars as it scans them, into its own
:class:`~lar.layers.kits.vectors.arena.TokenArena`. The folder must be readable from every node (the same
path, e.g. a shared filesystem; on one machine it simply is).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from lar.layers.kits.vectors.arena import TokenArena, in_memory

__all__ = ["SidecarSource"]


class SidecarSource:
    def __init__(self, root: str | Path, model_id: str | None = None):
        self.root = str(root)
        self.model_id = model_id  # checked on the shared sidecars (a derived one has its own)
        self._cache: dict = {}
        self._arena = TokenArena()

    def __getstate__(self) -> dict:
        return {"root": self.root, "model_id": self.model_id}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["root"], state["model_id"])

    def load(self, h: str):
        """``(encoding, read_now)``; ``LookupError`` when the sidecar is missing, corrupt or
        written by another model (the scan records it as unreadable)."""
        enc = self._cache.get(h)
        if enc is not None:
            return enc, False
        from lar.layers.kits.vectors.sidecar import CorruptSidecarError, open_sidecar, sidecar_path

        p = sidecar_path(Path(self.root), h)
        try:
            raw = open_sidecar(p).encoding
        except (CorruptSidecarError, FileNotFoundError) as exc:
            raise LookupError(f"sidecar of {h[:12]}: {exc}") from None
        if self.model_id is not None and raw.model_id != self.model_id:
            raise LookupError(f"sidecar of {h[:12]} written by model {raw.model_id}")
        enc = in_memory(raw, self._arena)
        self._cache[h] = enc
        return enc, True

    def retain(self, hashes: Iterable[str]) -> None:
        """Forget the units not in ``hashes`` (no longer live, or no longer this shard's)."""
        keep = set(hashes)
        gone = [h for h in self._cache if h not in keep]
        for h in gone:
            self._arena.forget(self._cache.pop(h).n_tokens)
        if self._arena.mostly_dead:
            self._cache.clear()
            self._arena = TokenArena()

    def __len__(self) -> int:
        return len(self._cache)
