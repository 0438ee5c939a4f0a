"""The independent original-text route: snapshot, batches, screener outcomes, resume."""
import json

import pytest

import lar
from lar.apps.screening import (BatchItem, RunNotFoundError, ScreenCandidate, ScreenerFailedError,
                           ScreeningConfigError, Unknown, list_runs, load_run, screen)
from lar.apps.screening.batches import plan_unit, split_text
from lar.apps.screening.errors import CandidateError, RunLockedError
from lar.apps.screening.record import run_lock, run_path
from lar.store import content_hash


def big_text(n=10, extra=""):
    """Lines of exactly 15 bytes; lines 3 and 8 hold the keyword."""
    return "".join(f"row {i:02d} {'keyword' if i in (3, 8) else 'plain..'}\n" for i in range(1, n + 1)) + extra


A = "alpha\nkeyword one\nbeta\n"  # 23 bytes
B = "nothing here\n"  # 13 bytes
C = "keyword in docs\n"  # 16 bytes

# batch_bytes=64: a.txt + b.md (36 bytes), then big.txt (150 bytes) in parts of four lines,
# its last part sharing a batch with docs/c.txt
EXPECTED_BATCHES = [
    [("a.txt", (0, 23), (1, 3)), ("b.md", (0, 13), (1, 1))],
    [("big.txt:L1-4", (0, 60), (1, 4))],
    [("big.txt:L5-8", (60, 120), (5, 8))],
    [("big.txt:L9-10", (120, 150), (9, 10)), ("docs/c.txt", (0, 16), (1, 1))],
]


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "corpus"
    (root / "docs").mkdir(parents=True)
    (root / "a.txt").write_text(A)
    (root / "b.md").write_text(B)
    (root / "big.txt").write_text(big_text())
    (root / "docs" / "c.txt").write_text(C)
    return root


@pytest.fixture
def eng(folder, tmp_path):
    e = lar.open(folder, state=tmp_path / "state")
    yield e
    e.close()


class Recorder:
    """Remembers every batch it saw; returns the lines that contain ``keyword``."""

    def __init__(self, keyword="keyword"):
        self.keyword = keyword
        self.seen = []

    def __call__(self, batch):
        self.seen.append(batch)
        out = []
        for it in batch:
            for n, line in enumerate(it.text.splitlines(), it.lines[0]):
                if self.keyword in line:
                    out.append({"item": it.address, "lines": [n, n], "note": f"line {n}"})
        return out

    def layout(self):
        return [[(it.address, it.span, it.lines) for it in b] for b in self.seen]


def test_batches_of_known_units_with_addresses_and_spans(eng):
    rec = Recorder()
    run = screen(eng, rec, run="layout", batch_bytes=64)
    assert rec.layout() == EXPECTED_BATCHES
    for batch in rec.seen:
        for it in batch:
            assert isinstance(it, BatchItem)
            assert eng.read_bytes(it.hash, it.span).decode() == it.text
    assert [u.path for u in run.units] == ["a.txt", "b.md", "big.txt", "docs/c.txt"]
    assert [b.addresses for b in run.batches] == [tuple(a for a, _, _ in b) for b in EXPECTED_BATCHES]
    p = run.progress()
    assert p["units_total"] == p["units_processed"] == 4
    assert p["bytes_total"] == p["bytes_processed"] == 23 + 13 + 150 + 16
    assert p["batches"] == {"pending": 0, "processed": 4, "failed": 0}
    assert p["fraction"] == 1.0 and run.unprocessed() == [] and run.complete


def test_split_of_a_large_unit_at_line_boundaries_and_inside_long_lines():
    data = big_text().encode()
    assert split_text(data, 64) == [(0, 60), (60, 120), (120, 150)]
    assert split_text(data, 150) == [(0, 150)]
    long = b"x" * 150 + b"\n" + b"y" * 60 + b"\n"
    assert split_text(long, 64) == [(0, 64), (64, 128), (128, 151), (151, 212)]
    h = content_hash(long)
    assert [(i.address, i.start, i.end, i.line_a, i.line_b) for i in plan_unit(0, "l.txt", h, long, 64)] == [
        ("l.txt:L1-1:B0-64", 0, 64, 1, 1), ("l.txt:L1-1:B64-128", 64, 128, 1, 1),
        ("l.txt:L1-1:B128-151", 128, 151, 1, 1), ("l.txt:L2-2", 151, 212, 2, 2)]
    accents = ("é" * 40).encode()  # 2-byte characters: never cut in the middle of one
    assert split_text(accents, 63) == [(0, 62), (62, 80)]


def test_keyword_screener_gives_the_expected_fetchable_hits(eng):
    run = screen(eng, Recorder(), run="kw", batch_bytes=64, question="where is the keyword?")
    got = [(h.path, h.lines, (h.span.start, h.span.end), h.excerpt) for h in run.candidates]
    assert got == [("a.txt", (2, 2), (6, 17), "keyword one"),
                   ("big.txt", (3, 3), (30, 44), "row 03 keyword"),
                   ("big.txt", (8, 8), (105, 119), "row 08 keyword"),
                   ("docs/c.txt", (1, 1), (0, 15), "keyword in docs")]
    for h in run.candidates:
        assert h.signals == ("screen",)
        ev = h.evidence["screen"]
        assert ev.query == "where is the keyword?" and ev.details["note"] == f"line {h.lines[0]}"
        assert eng.fetch(h.id).text == h.excerpt
    assert [h.evidence["screen"].rank for h in run.candidates] == [1, 2, 3, 4]
    assert [b.outcome for b in run.batches] == ["candidates"] * 4
    assert [b.n_candidates for b in run.batches] == [1, 1, 1, 1]
    d = json.loads(run.to_json())
    assert d["progress"]["candidates"] == 4 and d["candidates"][0]["id"] == run.candidates[0].id
    df = run.to_polars()
    assert df.height == 4 and df["line_start"].to_list() == [2, 3, 8, 1]
    assert "kw" in run._repr_html_() and "keyword one" in str(run)


def test_engine_screen_is_the_same_route(eng):
    run = lar.screen(eng, Recorder(), run="via-engine", batch_bytes=64)
    assert [(h.path, h.lines) for h in run.candidates] == [
        ("a.txt", (2, 2)), ("big.txt", (3, 3)), ("big.txt", (8, 8)), ("docs/c.txt", (1, 1))]
    assert run.progress()["fraction"] == 1.0


def test_a_failing_batch_is_recorded_and_the_run_goes_on(eng):
    calls = []

    def flaky(batch):
        calls.append(batch[0].address)
        if len(calls) == 2:
            raise RuntimeError("model timed out")
        return []

    run = screen(eng, flaky, run="flaky", batch_bytes=64)
    assert [b.state for b in run.batches] == ["processed", "failed", "processed", "processed"]
    assert run.batch(2).error == "RuntimeError: model timed out"
    assert run.unprocessed() == ["big.txt:L1-4"]
    assert run.progress()["batches"] == {"pending": 0, "processed": 3, "failed": 1}
    assert run.last_call["stopped_by"] == "complete" and run.last_call["batches_failed"] == 1
    again = screen(eng, Recorder(), run="flaky")  # failed batches wait for retry_failed
    assert again.last_call["batches_processed"] == 0 and again.batch(2).state == "failed"
    rec = Recorder()
    fixed = screen(eng, rec, run="flaky", retry_failed=True)
    assert rec.layout() == [EXPECTED_BATCHES[1]]
    assert fixed.batch(2).state == "processed" and fixed.batch(2).attempts == 2 and fixed.complete


def test_stop_on_error_raises_after_recording(eng):
    def broken(batch):
        raise ValueError("bad prompt")

    with pytest.raises(ScreenerFailedError, match="retry_failed=True"):
        screen(eng, broken, run="stop", batch_bytes=64, stop_on_error=True)
    run = load_run(eng, "stop")
    assert [b.state for b in run.batches] == ["failed", "pending", "pending", "pending"]
    assert run.batch(1).error == "ValueError: bad prompt"


def test_max_batches_then_resume_processes_exactly_the_rest(eng):
    first = Recorder()
    run = screen(eng, first, run="part", batch_bytes=64, max_batches=1)
    assert first.layout() == EXPECTED_BATCHES[:1]
    assert run.last_call["stopped_by"] == "max_batches"
    assert run.progress()["batches"] == {"pending": 3, "processed": 1, "failed": 0}
    assert run.progress()["units_processed"] == 2 and run.progress()["bytes_processed"] == 36
    assert run.unprocessed() == ["big.txt:L1-4", "big.txt:L5-8", "big.txt:L9-10", "docs/c.txt"]
    rest = Recorder()
    done = screen(eng, rest, run="part")
    assert rest.layout() == EXPECTED_BATCHES[1:]
    assert done.complete and len(done.candidates) == 4
    nothing = Recorder()
    assert screen(eng, nothing, run="part").last_call["batches_processed"] == 0 and nothing.seen == []


def test_an_interrupted_call_loses_only_the_current_batch(eng):
    n = []

    def interrupted(batch):
        n.append(1)
        if len(n) == 2:
            raise KeyboardInterrupt
        return [0]

    with pytest.raises(KeyboardInterrupt):
        screen(eng, interrupted, run="killed", batch_bytes=64)
    run = load_run(eng, "killed")
    assert [b.state for b in run.batches] == ["processed", "pending", "pending", "pending"]
    assert [h.path for h in run.candidates] == ["a.txt"]
    rest = Recorder()
    assert screen(eng, rest, run="killed").complete and rest.layout() == EXPECTED_BATCHES[1:]


def test_invalid_candidates_are_recorded_with_reasons(eng):
    def sloppy(batch):
        if batch[0].address != "a.txt":
            return None
        return ["a.txt:L2", {"item": "nope.txt"}, 7, {"item": 0, "span": [0, 1000]},
                {"item": 0, "quote": "not there"}, {"item": 0, "lines": [1, 1], "span": [0, 1]},
                object(), {"item": 0, "colour": "red"}, {"item": "b.md", "lines": [5, 5]},
                ScreenCandidate("a.txt", quote="alpha  keyword", score=0.5),
                Unknown("cannot tell", item="b.md"), {"unknown": "too vague"}]

    run = screen(eng, sloppy, run="sloppy", batch_bytes=64)
    reasons = [x["reason"] for x in run.invalid]
    assert len(reasons) == 8
    assert "'nope.txt' names no item of this batch" in reasons[0]
    assert "item index 7 is not in this batch of 2 items (0..1)" in reasons[1]
    assert "span [0, 1000] is not a non-empty range inside item 'a.txt' (bytes 0-23)" in reasons[2]
    assert "quote 'not there' does not occur in item 'a.txt'" in reasons[3]
    assert "give at most one of span, lines, quote" in reasons[4]
    assert "got object" in reasons[5]
    assert "unknown candidate keys ['colour']" in reasons[6]
    assert "lines 5-5 are not inside item 'b.md' (lines 1-1)" in reasons[7]
    assert [(h.lines, h.excerpt) for h in run.candidates] == [((2, 2), "keyword one"),
                                                               ((1, 2), "alpha keyword")]
    assert run.candidates[1].evidence["screen"].score == 0.5
    assert [(u["item"], u["reason"]) for u in run.unknown] == [("b.md", "cannot tell"), (None, "too vague")]
    b1 = run.batch(1)
    assert (b1.n_candidates, b1.n_invalid, b1.n_unknown, b1.outcome) == (2, 8, 2, "candidates")
    assert [b.outcome for b in run.batches[1:]] == ["none"] * 3


def test_candidate_types_validate_their_values():
    with pytest.raises(CandidateError):
        ScreenCandidate(item=-1)
    with pytest.raises(CandidateError):
        ScreenCandidate(item="a.txt", score=float("nan"))
    with pytest.raises(CandidateError):
        ScreenCandidate(item="a.txt", span=(1, 2), quote="x")
    with pytest.raises(ScreeningConfigError):
        BatchItem("a.txt", "a.txt", "0" * 32, (5, 2), (1, 1), "")


def test_changed_and_new_units_are_reported_on_resume(folder, tmp_path):
    for keep in (False, True):
        state = tmp_path / f"state-{keep}"
        with lar.open(folder, state=state) as e:
            screen(e, Recorder(), run="snap", batch_bytes=64, max_batches=1, keep_text=keep)
        (folder / "big.txt").write_text(big_text(extra="row 11 keyword\n"))
        (folder / "new.txt").write_text("keyword new\n")
        with lar.open(folder, state=state) as e:  # a later process
            rec = Recorder()
            run = screen(e, rec, run="snap")
            assert [(c["path"], c["change"]) for c in run.changed] == [("big.txt", "modified")]
            assert run.changed[0]["current_hash"] == content_hash(big_text(extra="row 11 keyword\n").encode())
            assert run.not_in_snapshot == ("new.txt",)
            assert run.progress()["changed"] == 1 and run.progress()["not_in_snapshot"] == 1
            if keep:  # the snapshot's own text is screened
                assert rec.layout() == EXPECTED_BATCHES[1:] and run.complete
                assert [h.lines for h in run.candidates if h.path == "big.txt"] == [(3, 3), (8, 8)]
                assert all(e.fetch(h.id).text == h.excerpt for h in run.candidates)
            else:  # its text is gone: recorded as unreadable, never screened silently
                assert rec.layout() == [[("docs/c.txt", (0, 16), (1, 1))]]
                assert [b.state for b in run.batches] == ["processed", "failed", "failed", "processed"]
                assert "none of its items could be read" in run.batch(2).error
                assert run.unprocessed() == ["big.txt:L1-4", "big.txt:L5-8", "big.txt:L9-10"]
                assert run.progress()["items_unreadable"] == 3
        (folder / "big.txt").write_text(big_text())
        (folder / "new.txt").unlink()


def test_scope_restricts_the_snapshot(eng, folder):
    rec = Recorder()
    run = screen(eng, rec, run="docs", scope="docs/**", batch_bytes=64)
    assert [u.path for u in run.units] == ["docs/c.txt"]
    assert rec.layout() == [[("docs/c.txt", (0, 16), (1, 1))]]
    assert [h.path for h in run.candidates] == ["docs/c.txt"] and run.not_in_snapshot == ()
    (folder / "docs" / "d.txt").write_text("later\n")
    (folder / "outside.txt").write_text("later\n")
    assert load_run(eng, "docs").not_in_snapshot == ("docs/d.txt",)
    with pytest.raises(ScreeningConfigError, match="omit scope"):
        screen(eng, rec, run="docs", scope="src/**")


def test_settings_names_and_errors(eng):
    with pytest.raises(ScreeningConfigError, match="must be callable"):
        screen(eng, "not a function")
    with pytest.raises(ScreeningConfigError, match="run name"):
        screen(eng, Recorder(), run="../escape")
    with pytest.raises(ScreeningConfigError, match="batch_bytes"):
        screen(eng, Recorder(), batch_bytes=10)
    with pytest.raises(ScreeningConfigError, match="order"):
        screen(eng, Recorder(), order="relevance")
    with pytest.raises(RunNotFoundError, match="list_runs"):
        load_run(eng, "missing")
    screen(eng, Recorder(), run="r1", batch_bytes=64, max_batches=1)
    with pytest.raises(ScreeningConfigError, match="batch_bytes=64"):
        screen(eng, Recorder(), run="r1", batch_bytes=128)
    with run_lock(run_path(eng, "r1")):
        with pytest.raises(RunLockedError, match="another caller"):
            screen(eng, Recorder(), run="r1")
    auto = screen(eng, Recorder(), max_batches=1)
    runs = list_runs(eng)
    assert [r["run"] for r in runs] == ["r1", auto.id]
    assert runs[0]["batches"] == {"pending": 3, "processed": 1, "failed": 0}
    assert runs[1]["batches"] == {"pending": 0, "processed": 1, "failed": 0}  # 202 bytes: one batch


def test_orders_and_async_screeners(eng):
    a = screen(eng, Recorder(), run="s1", order="shuffle", seed=3, max_batches=1)
    b = screen(eng, Recorder(), run="s2", order="shuffle", seed=3, max_batches=1)
    assert [u.path for u in a.units] == [u.path for u in b.units]
    assert sorted(u.path for u in a.units) == ["a.txt", "b.md", "big.txt", "docs/c.txt"]
    c_hash = content_hash(C.encode())
    eng.index.touch_usage([c_hash], kind="fetches")
    assert screen(eng, Recorder(), run="u", order="usage", max_batches=1).units[0].path == "docs/c.txt"

    async def async_screener(batch):
        return [ScreenCandidate(it.address, note="async") for it in batch if "docs" in it.path]

    run = screen(eng, async_screener, run="async", batch_bytes=64)
    assert [(h.path, h.evidence["screen"].details["note"]) for h in run.candidates] == [("docs/c.txt", "async")]
