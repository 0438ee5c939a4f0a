"""The work limit (lar.core.deadline), the builder's share (lar.engine.share), change detection
from the committed state (lar.engine.freshness) and closing at exit (lar.engine.lifecycle)."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from lar.core import deadline
from lar.core.errors import ConfigError, DeadlineExceeded
from lar.core.types import LayerRun, RunState
from lar.engine import freshness, lifecycle
from lar.engine.share import BuildShare
from lar.store import FileIndex
from lar.store.scanner import Scanner


def test_no_limit_outside_any_work_limit():
    assert deadline.current() == deadline.WorkLimit()
    assert deadline.remaining(7.0) == 7.0 and not deadline.expired()
    deadline.check()  # nothing raised


def test_an_inner_limit_never_extends_an_outer_one():
    now = time.monotonic()
    with deadline.work_limit(now + 100):
        with deadline.work_limit(now + 1000) as inner:
            assert inner.deadline == now + 100
        with deadline.work_limit(now + 10) as inner:
            assert inner.deadline == now + 10
        assert deadline.current().deadline == now + 100
    assert deadline.current().deadline is None


def test_a_passed_deadline_or_a_set_cancel_event_ends_the_work():
    with deadline.work_limit(time.monotonic() - 1):
        assert deadline.expired() and deadline.remaining(5) == 0.0
        with pytest.raises(DeadlineExceeded, match="passed its deadline"):
            deadline.check("encoding")
    stop = threading.Event()
    with deadline.work_limit(cancel=[None, stop]):
        deadline.check()
        stop.set()
        with pytest.raises(DeadlineExceeded, match="was cancelled"):
            deadline.check()


def test_a_thread_started_with_to_thread_sees_the_limit():
    async def main():
        with deadline.work_limit(time.monotonic() + 50):
            return await asyncio.to_thread(lambda: deadline.current().deadline)

    assert asyncio.run(main()) is not None


def test_the_builders_patience_is_four_times_its_last_step_within_bounds():
    share = BuildShare(share=0.2, min_wait=0.02, max_wait=5.0)
    assert share.patience() == 0.02
    share.built(0.1)
    assert share.patience() == pytest.approx(0.4)
    share.built(100.0)
    assert share.patience() == 5.0
    with pytest.raises(ConfigError):
        BuildShare(share=0.0)


def test_the_builder_takes_its_turn_when_no_idle_moment_comes():
    share, idle, stop = BuildShare(min_wait=0.05, max_wait=0.05), threading.Event(), threading.Event()
    assert share.wait_turn(idle, stop)  # idle never set: its turn comes after its patience
    stop.set()
    assert not share.wait_turn(idle, stop)


def test_committed_state_keeps_unchanged_files_and_leaves_out_changed_ones(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "same.txt").write_text("same\n")
    (root / "edited.txt").write_text("before\n")
    index = FileIndex(tmp_path / "state")
    scanner = Scanner(root, index)
    scanner.scan()
    (root / "edited.txt").write_text("after, longer\n")
    report = freshness.committed(scanner, ["same.txt", "edited.txt", "missing.txt"])
    assert report.current == {"same.txt": index.get("same.txt").hash, "edited.txt": None,
                              "missing.txt": None}
    assert index.get("edited.txt").size == len("before\n")  # nothing written


def test_a_skip_is_noted_on_the_runs_that_answered():
    runs = [LayerRun("grep", RunState.RAN), LayerRun("dense", RunState.SKIPPED, "no model")]
    out = freshness.annotate(runs, ["another process (pid 7) is writing the lar index"])
    assert out[0].notes == (freshness.SKIPPED_NOTE.format(
        why="another process (pid 7) is writing the lar index"),)
    assert out[1].notes == ()
    assert freshness.annotate(runs, []) == tuple(runs)


def test_engines_left_open_are_closed_by_the_exit_hook():
    closed = []

    class Fake:
        def close(self):
            closed.append(self)
            lifecycle.forget(self)

    a, b = Fake(), Fake()
    lifecycle.register(a)
    lifecycle.register(b)
    lifecycle.forget(b)  # closed by its owner
    lifecycle.close_all()
    assert closed == [a] and a not in lifecycle.open_engines()


def test_the_writer_lock_is_waited_for_until_the_work_limit_ends(tmp_path):
    from lar.core.errors import StateLockedError

    holder = FileIndex(tmp_path, lock_timeout=60)
    waiter = FileIndex(tmp_path, lock_timeout=60)
    with holder.writing():  # a second open file: flock refuses it like another process
        with deadline.work_limit(time.monotonic() + 0.1):
            with pytest.raises(StateLockedError, match="is writing the lar index"):
                with waiter.writing():
                    pass
    with waiter.writing():  # free again: no limit needed
        pass
