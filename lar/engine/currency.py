"""Keeping what a call returns current: hits of text that no file holds any more are left out
(and the runs say so), and the scope a search's building layers see is the one after its stat
pass, not before.

Content hashes make a hit's text addressable after its file changed (the reader keeps copies),
so a layer that looked at an old hash can still produce a readable hit; such a hit is *not* a
current hit. A hit is current when some live path in the file index holds its hash, or when the
layer that found it named the paths itself (``grep`` and ``names`` read the folder, which may be
newer than the index).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from lar.core.types import Hit, LayerRun


def current_hits(hits: Iterable[Hit], index) -> tuple[list[Hit], dict[str, int]]:
    """``(kept, dropped)``: the hits whose text is in a current file, in their order, and how
    many of the others each layer contributed to (``{layer: count}``)."""
    kept: list[Hit] = []
    dropped: dict[str, int] = {}
    live: dict[str, bool] = {}
    for h in hits:
        if h.paths:
            kept.append(h)
            continue
        ok = live.get(h.hash)
        if ok is None:
            ok = live[h.hash] = bool(index.paths_for_hash(h.hash))
        if ok:
            kept.append(h)
        else:
            for name in h.signals:
                dropped[name] = dropped.get(name, 0) + 1
    return kept, dropped


def stale_note(n: int) -> str:
    return (f"left out {n} hit{'s' if n != 1 else ''} of text that no current file holds (the "
            "file changed after the layer indexed it); search again once it is rebuilt")


def note_runs(runs: Sequence[LayerRun], notes: Mapping[str, Sequence[str]]) -> tuple[LayerRun, ...]:
    """``runs`` with ``notes[name]`` added to the notes of the run of that name."""
    if not notes:
        return tuple(runs)
    return tuple(replace(r, notes=tuple(r.notes) + tuple(notes[r.name])) if notes.get(r.name) else r
                 for r in runs)


def stale_notes(dropped: Mapping[str, int]) -> dict[str, list[str]]:
    return {name: [stale_note(n)] for name, n in dropped.items() if n}


__all__ = ["current_hits", "note_runs", "stale_note", "stale_notes"]
