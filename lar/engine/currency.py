"""Keeping what a call returns current: hits of text that no file holds any more are left out
(and the runs say so), the scope a search's building layers see is the one after its stat pass,
and a state folder deleted under an open engine is noticed (``StateWatch``).

Content hashes make a hit's text addressable after its file changed (the reader keeps copies),
so a layer that looked at an old hash can still produce a readable hit; such a hit is *not* a
current hit. A hit is current when some live path in the file index holds its hash, or when the
layer that found it named the paths itself (``grep`` and ``names`` read the folder, which may be
newer than the index).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from lar.core.types import Hit, LayerRun


def current_hits(hits: Iterable[Hit], index) -> tuple[list[Hit], dict[str, int]]:
    """``(kept, dropped)``: the hits whose text is in a current file, in their order, and how
    many of the others each layer contributed to (``{layer: count}``)."""
    hits = list(hits)
    kept: list[Hit] = []
    dropped: dict[str, int] = {}
    # one query for every hash the layers did not give paths for (a query a hit cost ~0.1 ms:
    # ~10 ms a bm25 call of k=100 on 5k documents)
    asked = [h.hash for h in hits if not h.paths]
    live = {k: bool(v) for k, v in index.paths_for_hashes(asked).items()} if asked else {}
    for h in hits:
        if h.paths or live.get(h.hash):
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


def run_notes(dropped: Mapping[str, int], notice: str | None = None,
              building: Iterable[str] = ()) -> dict[str, list[str]]:
    """The notes a search adds to its runs: each layer's left-out stale hits, and ``notice``
    (a state folder rebuilt, ``StateWatch.take_notice``) on the ``building`` layers' runs."""
    out = {name: [stale_note(n)] for name, n in dropped.items() if n}
    if notice:
        for name in building:
            out.setdefault(name, []).append(notice)
    return out


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class StateWatch:
    """Whether the state folder and its file index are still the ones the engine opened (two
    ``stat`` calls: device and inode of each). Open SQLite handles keep working on a deleted
    file, so without this check an engine would go on reporting what it built into a folder
    that no longer exists. After a rebuild it holds the notice that status reports and that
    the next search adds to its building layers' runs (once)."""

    def __init__(self, state_dir: Path, db_path: Path):
        self.paths = (Path(state_dir), Path(db_path))
        self.ids = tuple(_identity(p) for p in self.paths)
        self.notice: str | None = None
        self._unsaid = False
        self._lock = threading.Lock()

    def lost(self) -> str | None:
        """None while the folder and the index are the ones opened, else what happened."""
        for path, seen in zip(self.paths, self.ids):
            now = _identity(path)
            if now is None:
                return f"{path} was deleted"
            if now != seen:
                return f"{path} was replaced"
        return None

    def inherit(self, old: "StateWatch", why: str) -> None:
        """Record a rebuild (``why``: what ``old.lost()`` said) on this, the new folder's watch."""
        when = time.strftime("%Y-%m-%d %H:%M:%S")
        self.notice = (f"the state folder went away while the engine was open ({why}); at {when} "
                       "lar made a new one, re-scanned the folder, and the layers rebuild lazily "
                       "(searches build in spare time; `lar build` / eng.build() finishes)")
        self._unsaid = True

    def report(self) -> dict[str, str]:
        """What ``status()`` adds to its ``last_scan``: ``{"state_rebuilt": notice}`` or {}."""
        return {"state_rebuilt": self.notice} if self.notice else {}

    def take_notice(self) -> str | None:
        """The notice, the first time it is asked for after a rebuild (a search's runs)."""
        with self._lock:
            if not self._unsaid:
                return None
            self._unsaid = False
            return self.notice


__all__ = ["StateWatch", "current_hits", "note_runs", "run_notes", "stale_note"]
