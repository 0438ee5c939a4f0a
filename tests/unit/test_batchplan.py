"""lar.encoders.batchplan: forward batches cut where padding wastes least."""
from __future__ import annotations

import itertools

import pytest

from lar.encoders.batchplan import plan_batches


def cost(lengths, cuts, overhead):
    return sum((b - a) * lengths[a] + overhead for a, b in zip(cuts, cuts[1:]))


def test_long_windows_and_short_tails_go_to_separate_batches():
    lengths = [256] * 16 + [40] * 9  # one prepare batch of SciFact abstracts: full windows + tails
    assert plan_batches(lengths, 32, overhead=48) == [0, 16, 25]
    assert plan_batches(lengths, 32) == [0, 16, 25]  # the default overhead too
    assert plan_batches([256, 250, 240, 200, 180, 150, 120, 100], 32) == [0, 8]  # no tiny passes


def test_equal_lengths_fill_whole_batches_and_never_exceed_batch_size():
    cuts = plan_batches([100] * 70, 32, overhead=48)
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    assert max(sizes) <= 32 and len(sizes) == 3 and sum(sizes) == 70  # the fewest passes


def test_the_plan_is_the_cheapest_of_all_cuts_on_small_cases():
    for lengths in ([9, 7, 7, 3, 2, 2, 1], [50, 49, 10, 10, 9, 1], [5], [8, 8, 8, 8]):
        for bs, oh in ((2, 3), (3, 0), (4, 10)):
            n = len(lengths)
            plans = []
            for mask in itertools.product((0, 1), repeat=n - 1):
                cuts = [0] + [i + 1 for i, m in enumerate(mask) if m] + [n]
                if all(b - a <= bs for a, b in zip(cuts, cuts[1:])):
                    plans.append(cost(lengths, cuts, oh))
            got = plan_batches(lengths, bs, overhead=oh)
            assert got[0] == 0 and got[-1] == n
            assert cost(lengths, got, oh) == min(plans), (lengths, bs, oh)


def test_empty_and_unsorted():
    assert plan_batches([], 32) == [0]
    with pytest.raises(ValueError):
        plan_batches([1, 2], 32)
