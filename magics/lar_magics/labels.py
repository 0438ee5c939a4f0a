"""Short labels that stay distinguishable: a chart's axis cannot show long paths whole, and a
cut at a fixed width leaves ``lar/layers/…`` for every file. ``unique_suffixes`` keeps, for
each path, its shortest run of trailing components that no other path ends with."""
from __future__ import annotations

from typing import Sequence

ELLIPSIS = "…/"


def _parts(label: str) -> list[str]:
    return [p for p in label.split("/") if p] or [label]


def unique_suffixes(labels: Sequence[str]) -> list[str]:
    """For each label (a path, maybe with ``:lines``), its shortest suffix of ``/``-separated
    components that tells it apart from every other distinct label, ``…/`` marking a cut.
    Equal labels get equal suffixes; a label that is a suffix of another stays whole."""
    distinct = list(dict.fromkeys(labels))
    parts = {l: _parts(l) for l in distinct}
    short: dict[str, str] = {}
    for label in distinct:
        mine = parts[label]
        others = [parts[o] for o in distinct if o != label]
        k = 1
        while k < len(mine) and any(o[-k:] == mine[-k:] for o in others):
            k += 1
        short[label] = label if k >= len(mine) else ELLIPSIS + "/".join(mine[-k:])
    return [short[l] for l in labels]


__all__ = ["ELLIPSIS", "unique_suffixes"]
