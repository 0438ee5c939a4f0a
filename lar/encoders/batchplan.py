"""Forward batches of encoder windows, cut so that padding wastes little.

Windows of one pass are sorted longest first; cutting that list every ``batch_size`` windows
(what ``SentenceTransformer.encode`` does) pads the short windows after a long chunk's to the
long ones' length: SciFact abstracts are ~1.7 windows a chunk (a full one and a short tail),
so a batch of both spends a third of its tokens on padding. :func:`plan_batches` cuts the sorted
list where the padded tokens plus a fixed cost per forward pass (``overhead``, in tokens) are
least (a small dynamic programme: O(windows x batch_size)), never more than ``batch_size``
windows a batch. The cut changes no window's content, only which windows share a pass.
"""
from __future__ import annotations

from typing import Sequence

#: the fixed cost of one forward pass, in padded tokens. Measured on 2 loaded CPU cores (MiniLM,
#: dense+late build of SciFact): ~0.8 ms a token plus ~0.5 s a pass, i.e. ~600 tokens; a
#: smaller figure cut the passes into batches of 2-5 windows, slower than padding
OVERHEAD_TOKENS = 512


def plan_batches(lengths: Sequence[int], batch_size: int, overhead: int = OVERHEAD_TOKENS) -> list[int]:
    """Cut points of ``lengths`` (sorted longest first): batch b is ``lengths[cuts[b]:cuts[b+1]]``;
    the list starts at 0 and ends at ``len(lengths)``."""
    n = len(lengths)
    if n == 0:
        return [0]
    if any(lengths[i] < lengths[i + 1] for i in range(n - 1)):
        raise ValueError("plan_batches wants the lengths sorted longest first")
    bs = max(1, int(batch_size))
    inf = float("inf")
    best = [0.0] + [inf] * n
    back = [0] * (n + 1)
    for i in range(1, n + 1):
        for j in range(max(0, i - bs), i):  # batch j..i-1, padded to lengths[j]
            c = best[j] + (i - j) * lengths[j] + overhead
            if c < best[i]:
                best[i], back[i] = c, j
    cuts = [n]
    while cuts[-1] > 0:
        cuts.append(back[cuts[-1]])
    return cuts[::-1]
