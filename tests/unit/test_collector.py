"""lar.engine.collector: a full collection, then the survivors frozen, where a pause costs no
deadline (an engine opened, a build done); off with LAR_GC_FREEZE=0 (the suite's default)."""
from __future__ import annotations

import gc
import weakref

import pytest

import lar
from lar.engine import collector


class Node:
    def __init__(self):
        self.other = None


@pytest.fixture
def gc_freeze(monkeypatch):
    monkeypatch.setenv("LAR_GC_FREEZE", "1")
    yield
    gc.unfreeze()


def _frozen_cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    gc.freeze()  # as a previous settle left it
    return weakref.ref(a)


def test_opening_an_engine_freezes_what_it_allocated(corpus, tmp_path, gc_freeze, monkeypatch):
    gc.unfreeze()
    monkeypatch.setattr(collector, "SPACING", 0.0)
    assert gc.get_freeze_count() == 0
    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        assert gc.get_freeze_count() > 1000
        gc.unfreeze()
        eng.build(timebox=30, layers=["bm25"])
        assert gc.get_freeze_count() > 1000  # a build settles too
    finally:
        eng.close()


def test_settle_frees_a_cycle_frozen_earlier(gc_freeze):
    ref = _frozen_cycle()
    gc.collect()
    assert ref() is not None  # frozen: a plain collection does not see it
    done = collector.settle(force=True)
    assert done.ran and done.frozen > 0 and done.seconds >= 0
    assert ref() is None


def test_settles_back_to_back_are_spaced_by_their_cost(gc_freeze, monkeypatch):
    """A caller building in short slices does not pay a full collection per slice."""
    monkeypatch.setattr(collector, "SPACING", 1e6)
    assert collector.settle(force=True).ran
    assert collector.settle() == collector.Settled(False)  # too soon after the last one
    monkeypatch.setattr(collector, "SPACING", 0.0)
    assert collector.settle().ran


def test_off_leaves_the_collector_alone(monkeypatch):
    monkeypatch.setenv("LAR_GC_FREEZE", "0")
    gc.unfreeze()
    assert collector.settle() == collector.Settled(False)
    assert gc.get_freeze_count() == 0
