"""Two processes sharing one state folder: the three races the two-process bm25 test hit under
load (a unit built and searched by one process, then lost to the other's stale view).

Each test replays one interleaving deterministically: the second process's step is done with a
second engine (its own connections) at the moment the race needs it."""
from __future__ import annotations

import lar
import lar.store.scanner as scanner_module


def _hits(eng, word: str) -> list[str]:
    res = eng.search({"bm25": word}, timebox=20)
    return [h.path for h in res.hits]


def test_a_file_recorded_by_another_process_during_a_scan_is_not_tombstoned(corpus, tmp_path,
                                                                            monkeypatch):
    """The scan lists the folder, then another process creates a file and records it: the scan
    must not take that record for a file that vanished (it reads the index before listing)."""
    state = tmp_path / "state"
    mine, theirs = lar.open(corpus, state=state), lar.open(corpus, state=state)
    try:
        real_list = scanner_module.list_root
        raced = []

        def list_then_other_records(root, exclude=()):
            listing = real_list(root, exclude)  # the new file is not there yet
            if not raced:
                raced.append(1)
                (corpus / "late_arrival.txt").write_text("zebracorn arrives after the listing\n")
                theirs.index_now()  # the other process records it (its own listing sees it)
            return listing

        monkeypatch.setattr(scanner_module, "list_root", list_then_other_records)
        mine.index_now()
        monkeypatch.setattr(scanner_module, "list_root", real_list)
        rec = mine.index.all_paths().get("late_arrival.txt")
        assert rec is not None and not rec.deleted, rec
    finally:
        mine.close()
        theirs.close()


def test_garbage_collection_with_a_stale_live_set_keeps_a_unit_another_process_built(corpus,
                                                                                    tmp_path):
    """A build pass reads the live units first and collects garbage at its end; a unit another
    process indexed and built meanwhile is live, and stays built."""
    state = tmp_path / "state"
    mine, theirs = lar.open(corpus, state=state), lar.open(corpus, state=state)
    try:
        mine.build(timebox=60, layers=["bm25"])
        stale_live = {u.hash for u in mine.scope_view().units()}
        (corpus / "fresh.txt").write_text("quokkaberry is the fresh word\n")
        theirs.index_now()
        theirs.build(timebox=60, layers=["bm25"])
        fresh = theirs.index.all_paths()["fresh.txt"].hash
        assert fresh not in stale_live
        mine.layers["bm25"].collect_garbage(stale_live)
        assert mine.layers["bm25"].built().get(fresh) == "ok"
        assert _hits(theirs, "quokkaberry") == ["fresh.txt"]
        # a unit that is really dead still goes
        (corpus / "fresh.txt").unlink()
        theirs.index_now()
        live = {u.hash for u in theirs.scope_view().units()}
        assert mine.layers["bm25"].collect_garbage(live) == 1
        assert fresh not in mine.layers["bm25"].built()
    finally:
        mine.close()
        theirs.close()


def test_a_merge_from_a_stale_built_set_keeps_a_delta_committed_before_it_started(corpus, tmp_path):
    """A search reads the built set, then (in the background) merges the segments: a unit
    another process built and committed in a delta in between is still in the merged index."""
    state = tmp_path / "state"
    cfg = {"bm25_max_deltas": 100, "bm25_delta_fraction": 100.0}
    mine = lar.open(corpus, state=state, config=cfg)
    theirs = lar.open(corpus, state=state, config=cfg)
    try:
        mine.build(timebox=60, layers=["bm25"])
        stale_ok = set(mine.layers["bm25"].ok_hashes())
        (corpus / "fresh.txt").write_text("wombatique is the fresh word\n")
        theirs.index_now()
        theirs.build(timebox=60, layers=["bm25"])  # a delta with the new unit, committed
        fresh = theirs.index.all_paths()["fresh.txt"].hash
        assert fresh not in stale_ok
        mine.layers["bm25"].index.merge(stale_ok)
        assert fresh in mine.layers["bm25"].index.covered()
        assert _hits(theirs, "wombatique") == ["fresh.txt"]
    finally:
        mine.close()
        theirs.close()
