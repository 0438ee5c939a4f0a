"""The call log (lar.record.calllog): tokens, fetched ids, follow-up turns, summaries."""
import json

import pytest

import lar
from lar.record import calllog
from lar.record.calllog import CallLog, count_tokens, token_counter
from lar.apps.cli import main
from lar.core.errors import ConfigError
from lar.record.replay import replay_step
from lar.record.trace import TraceStep

ID1, ID2, ID3, ID4 = ("aaaaaaaaaaaa:0-10", "bbbbbbbbbbbb:5-9", "cccccccccccc:1-2", "dddddddddddd:0-1")


def test_count_tokens_uses_the_packaged_minilm_tokenizer():
    assert token_counter()[1] == "all-MiniLM-L6-v2"
    assert count_tokens("hello world") == 2
    assert count_tokens("parse_deadline") == 4  # parse _ dead ##line
    assert count_tokens("") == 0
    with pytest.raises(ConfigError, match="needs a string"):
        count_tokens(b"bytes")


def test_count_tokens_counts_what_the_full_encoding_counts():
    """The counter skips offsets (``encode_batch_fast``); the ids are those of ``encode``."""
    from lar.record.calllog import _load_tokenizer

    tok = _load_tokenizer()
    texts = ["hello world", "parse_deadline(x)\n\tif x:", "Ünïcödé naïve café — 東京 🙂",
             '{"hits": [{"id": "ab12:0-10", "text": "a\\nb \\"q\\""}]}' * 50,
             "x" * 300 + " y", " ".join(f"w{i}" for i in range(2000))]
    for t in texts:
        assert count_tokens(t) == len(tok.encode(t, add_special_tokens=False).ids) > 0


def test_count_tokens_falls_back_to_four_characters(monkeypatch):
    monkeypatch.setattr(calllog, "_tok", {})
    monkeypatch.setattr(calllog, "_load_tokenizer", lambda: None)
    assert token_counter()[1] == "chars/4"
    assert count_tokens("abcdefgh") == 2 and count_tokens("abcde") == 2


def scripted(log: CallLog) -> None:
    """Session A: a search, a fetch of one of its ids, a second search 30 s later, a fetch by a
    short hash prefix, a failed search much later; session B fetches an id A saw."""
    log.record("search", session="A", returned_ids=[ID1, ID2, ID3], raw_tokens=1000,
               view_tokens=100, ts=0.0, derived_only=[ID1])
    log.record("fetch", session="A", params={"id": ID2}, returned_ids=[ID2], view_tokens=50, ts=10.0)
    log.record("fetch", session="B", params={"id": ID1}, view_tokens=40, ts=12.0, source="mcp")
    log.record("search", session="A", returned_ids=[ID3, ID4], raw_tokens=500, view_tokens=100,
               ts=30.0)
    log.record("fetch", session="A", params={"id": "cccccccc:1-2"}, view_tokens=10, ts=40.0)
    log.record("search", session="A", raw_tokens=0, view_tokens=0, ts=200.0,
               error="UnknownLayerError: unknown layer 'x'")


def test_fetched_ids_follow_up_turns_and_summary(tmp_path):
    with CallLog(tmp_path / "calls.sqlite", follow_up_window=60) as log:
        scripted(log)
        rows = log.rows("A")
        assert [r["follow_up_turns"] for r in rows] == [3, 1, 1, 0, 0]
        assert rows[0]["fetched_ids"] == [ID2, ID3] and rows[0]["returned_ids"] == [ID1, ID2, ID3]
        assert rows[2]["fetched_ids"] == [ID3] and rows[0]["derived_only_ids"] == [ID1]
        assert rows[1]["raw_tokens"] == rows[1]["view_tokens"] == 50  # fetch: raw is the view
        s = log.summary("A")
        assert (s["calls"], s["errors"], s["raw_tokens"], s["view_tokens"]) == (5, 1, 1560, 260)
        assert s["ratio"] == 0.1667 and s["returned_ids"] == 5 and s["fetched_ids"] == 3
        assert s["fetched_share"] == 0.6 and s["mean_follow_up_turns"] == 1.0
        assert s["tokens_saved"] == 900 * 4 + 400 * 2
        assert s["derived_only"] == {"returned": 1, "fetched": 0}
        assert s["tokenizer"] == ["caller"] and s["follow_up_window_s"] == 60.0
        search = s["by_call"]["search"]
        assert (search["calls"], search["raw_tokens"], search["fetched_share"]) == (3, 1500, 0.6)
        assert search["mean_follow_up_turns"] == 1.3333 and set(s["by_call"]) == {"search", "fetch"}
        everyone = log.summary()
        assert everyone["calls"] == 6 and everyone["sessions"] == 2
        assert log.summary("B")["by_call"]["fetch"]["mean_follow_up_turns"] == 0.0
        text = log.format_summary("A")
        assert "5 calls, 1 failed" in text and "fetched later 3 (60.0%)" in text
        assert "derived-only hits: 1 returned, 0 fetched" in text
        df = log.to_polars()
        assert df.height == 6 and df["follow_up_turns"].to_list() == [3, 1, 0, 1, 0, 0]
        assert df["source"].to_list()[2] == "mcp"
    with CallLog(tmp_path / "calls.sqlite") as again:  # persisted
        assert again.summary("A")["fetched_ids"] == 3


def test_texts_are_counted_in_the_writer_and_inputs_are_checked(tmp_path):
    with CallLog(tmp_path / "c.sqlite") as log:
        log.record("read", session="C", view_text="hello world")
        log.record("run_tool", session="C", raw_text=lambda: "hello world " * 10, view_text="hello",
                   returned_ids=["t:1"])
        rows = log.rows("C")
        assert [(r["raw_tokens"], r["view_tokens"]) for r in rows] == [(2, 2), (20, 1)]
        assert log.summary("C")["tokenizer"] == ["all-MiniLM-L6-v2"]
        for bad, match in ((dict(call="drop", session="C"), "call 'drop'"),
                           (dict(call="search", session=""), "session"),
                           (dict(call="search", session="C", source="web"), "source 'web'"),
                           (dict(call="search", session="C", raw_tokens=-1), "raw_tokens")):
            with pytest.raises(ConfigError, match=match):
                log.record(bad.pop("call"), **bad)
    with pytest.raises(ConfigError, match="follow_up_window"):
        CallLog(tmp_path / "d.sqlite", follow_up_window=0)


def test_engine_logs_search_and_fetch_with_view_and_one_stage_tokens(engine):
    res = engine.search("timebox", timebox=5, layers=["grep"])
    engine.fetch(res.hits[1].id)
    step = TraceStep(0, "t", "s", "api", "search", {"query": "timebox", "layers": ["grep"]},
                     [h.id for h in res.hits], (), 1.0)
    replay_step(step, engine)  # replays are not logged
    search, fetch = engine.call_log.rows(engine.session)
    assert search["view_tokens"] == count_tokens(res.to_json())
    assert search["raw_tokens"] == count_tokens(engine._one_stage_text(res)) > search["view_tokens"]
    assert search["returned_ids"] == [h.id for h in res.hits]
    assert search["fetched_ids"] == [res.hits[1].id] and search["follow_up_turns"] == 1
    assert fetch["params"] == {"id": res.hits[1].id, "context": 0} and fetch["source"] == "api"
    assert engine.call_log.summary()["fetched_share"] == 0.25


def test_call_log_can_be_switched_off_and_the_cli_prints_it(corpus, tmp_path, capsys, monkeypatch):
    with lar.open(corpus, state=tmp_path / "off", config={"call_log": False}) as eng:
        eng.search("timebox", layers=["grep"])
        assert eng.call_log is None
    assert not (tmp_path / "off" / "calls.sqlite").exists()
    monkeypatch.setenv("LAR_SESSION", "shell-7")
    common = ["--root", str(corpus), "--state", str(tmp_path / "s")]
    assert main(["search", "parse_deadline", "--layers", "grep", "--json", *common]) == 0
    hit = json.loads(capsys.readouterr().out)["hits"][0]["id"]
    assert main(["fetch", hit, *common]) == 0
    capsys.readouterr()
    assert main(["calls", "--json", "--session", "shell-7", *common]) == 0
    s = json.loads(capsys.readouterr().out)
    assert (s["calls"], s["fetched_ids"], s["by_call"]["search"]["mean_follow_up_turns"]) == (2, 1, 1.0)
    assert main(["calls", *common]) == 0
    assert "lar call log (1 session(s)): 2 calls" in capsys.readouterr().out
    assert main(["calls", "--root", str(corpus), "--state", str(tmp_path / "none")]) == 2
    assert "no call log" in capsys.readouterr().err


def _rows(path) -> int:
    import sqlite3

    with sqlite3.connect(str(path)) as db:
        return db.execute("SELECT count(*) FROM calls").fetchone()[0]


def test_back_to_back_searches_do_not_let_the_queue_grow_and_close_writes_it_all(tmp_path):
    import threading
    import time

    busy = threading.Event()  # never set: a search is always running, as in a harness run
    log = CallLog(tmp_path / "calls.sqlite", idle=busy, max_defer=5.0)
    for i in range(40):
        log.record("search", session="s", view_tokens=3, raw_tokens=5)
    time.sleep(2.0)  # deferring every record would have written none by now
    assert _rows(tmp_path / "calls.sqlite") >= 40 - calllog.DEFER_BACKLOG
    log.close()  # the rest go out at once: no deferral once closed
    assert _rows(tmp_path / "calls.sqlite") == 40
    assert log.dropped == 0 and log.write_errors == 0 and not log._thread.is_alive()


def test_close_gives_up_on_a_slow_backlog_and_says_so(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(calllog, "CLOSE_TIMEOUT", 0.3)
    log = CallLog(tmp_path / "calls.sqlite")

    def slow_text():
        time.sleep(0.05)
        return "some text"

    for i in range(60):
        log.record("search", session="s", view_text=slow_text)
    t0 = time.monotonic()
    log.close()
    assert time.monotonic() - t0 < 2.0
    assert not log._thread.is_alive()  # no writer left running into the interpreter's exit
    written = _rows(tmp_path / "calls.sqlite")
    assert log.dropped > 0 and written + log.dropped == 60
    assert log.write_errors == log.dropped and "were not written" in log.last_error
