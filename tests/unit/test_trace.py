"""Traces: JSONL recording of every call, loading, and replay with a diff (lar.record.trace)."""
import asyncio
import json
import threading

import pytest

import lar
from lar.apps.cli import main
from lar.core.errors import ConfigError, UnknownLayerError
from lar.store import content_hash
from lar.record.replay import replay, replay_step
from lar.record.trace import TraceError, TraceRecorder, TraceStep, load_trace

# ids on the conftest corpus (content is fixed, so hash + span ids are too)
GREP_TIMEBOX = ["6e03741ff5ce:0-22", "248e6bb331b8:0-26", "6e03741ff5ce:52-106",
                "248e6bb331b8:169-191"]
NAMES_TIMEBOX = ["6e03741ff5ce:0-227"]
FIELDS = {"schema", "seq", "t", "session", "source", "call", "params", "returned_ids", "runs",
          "elapsed_ms", "error"}


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_recorder_appends_one_line_per_call_and_continues_seq(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceRecorder(path, session="s") as rec:
        rec.record("search", {"query": "q", "timebox": 0.5}, ["abcdef012345:0-4"],
                   [{"name": "grep", "state": "ran", "reason": "", "contributions": 1,
                     "elapsed": 0.001, "coverage": 1.0}], elapsed_ms=1.5)
        threads = [threading.Thread(target=lambda: [rec.record("status") for _ in range(25)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with TraceRecorder(path) as rec:  # appending continues the sequence
        rec.record("fetch", {"id": "abcdef012345:0-4"}, error="HitNotFoundError: gone", source="mcp")
    got = lines(path)
    assert [d["seq"] for d in got] == list(range(102))
    assert all(set(d) == FIELDS and d["schema"] == 1 for d in got)
    first, last = got[0], got[-1]
    assert first["session"] == "s" and first["source"] == "api" and first["elapsed_ms"] == 1.5
    assert first["returned_ids"] == ["abcdef012345:0-4"] and first["runs"][0]["name"] == "grep"
    assert first["t"].endswith("+00:00")
    assert last["source"] == "mcp" and last["error"] == "HitNotFoundError: gone"
    assert last["session"] != "s"  # a new recorder without a session gets its own
    with pytest.raises(TraceError, match="closed"):
        rec.record("status")
    with pytest.raises(ConfigError, match="not one of"):
        TraceRecorder(tmp_path / "u.jsonl").record("delete")
    with pytest.raises(TraceError, match="is a folder"):
        TraceRecorder(tmp_path)


def test_load_trace_names_file_and_line_of_a_bad_record(tmp_path):
    good = json.dumps({"schema": 1, "seq": 0, "t": "x", "session": "s", "source": "api",
                       "call": "status", "params": {}, "returned_ids": [], "runs": [],
                       "elapsed_ms": 1.0, "error": None})
    p = tmp_path / "t.jsonl"
    p.write_text(good + "\n\n" + "{not json\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:3: not a JSON line"):
        load_trace(p)
    p.write_text(good + "\n" + good.replace('"call": "status"', '"call": "drop"') + "\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: not a lar trace record: .*'drop'"):
        load_trace(p)
    p.write_text(good.replace(', "runs": []', "") + "\n")
    with pytest.raises(TraceError, match=":1: .*missing fields runs"):
        load_trace(p)
    p.write_text(good.replace('"schema": 1', '"schema": 9') + "\n")
    with pytest.raises(TraceError, match=":1: .*schema 9"):
        load_trace(p)
    with pytest.raises(TraceError, match="no trace file"):
        load_trace(tmp_path / "missing.jsonl")
    p.write_text("[1, 2]\n")
    with pytest.raises(TraceError, match="a JSON object"):
        load_trace(p)
    with pytest.raises(TraceError, match="last line is not a lar trace record"):
        TraceRecorder(p)
    with pytest.raises(ConfigError, match="elapsed_ms"):
        TraceStep(0, "t", "s", "api", "status", {}, (), (), -1.0)


def test_engine_records_each_public_call_with_source_and_errors(engine, tmp_path):
    path = tmp_path / "trace.jsonl"
    rec = engine.record_trace(path, session="exp")
    res = engine.search("timebox", timebox=5, layers=["grep"])
    engine.fetch(res.hits[0].id, context=1)
    with engine.trace_source("mcp"):
        engine.status()
        engine.inventory(scope="docs/*.md")
    with engine.trace_source("magic", session="nb"):
        engine.read("docs/fusion.md", (0, 25))
    with pytest.raises(UnknownLayerError):
        engine.search("x", layers=["nope"])
    engine.record_call("run_tool", {"cmd": "ls"}, ["t1"], elapsed_ms=2.0, source="mcp")
    with engine.trace_source("magic"):  # the async form is recorded once, from its own task
        asyncio.run(engine.asearch("timebox", timebox=5, layers=["grep"]))
    engine.stop_trace()
    assert rec.closed and engine.trace is None
    engine.search("not recorded", layers=["grep"])  # after stop_trace
    steps = load_trace(path).steps
    assert [s.call for s in steps] == ["search", "fetch", "status", "inventory", "read", "search",
                                       "run_tool", "search"]
    assert [s.source for s in steps] == ["api", "api", "mcp", "mcp", "magic", "api", "mcp", "magic"]
    assert [s.session for s in steps] == ["exp", "exp", "exp", "exp", "nb", "exp", "exp", "exp"]
    search, fetch, status, inv, read, failed, tool, asearch = steps
    assert asearch.returned_ids == tuple(GREP_TIMEBOX)
    assert search.returned_ids == tuple(GREP_TIMEBOX)
    assert search.params["query"] == "timebox" and search.params["timebox"] == 5.0
    assert search.params["layers"] == ["grep"] and search.states["grep"] == "ran"
    assert search.states["names"] == "skipped" and len(search.runs) == len(engine.layers)
    assert fetch.params == {"id": GREP_TIMEBOX[0], "context": 1}
    assert fetch.returned_ids == (GREP_TIMEBOX[0],)
    assert {r["name"] for r in status.runs} == set(engine.layers) and status.states["grep"] == "status"
    assert inv.returned_ids == ("docs/fusion.md@" + read.returned_ids[0][:12],)
    assert read.params == {"path_or_hash": "docs/fusion.md", "span": [0, 25]}
    assert read.returned_ids[0].endswith(":0-25")
    assert failed.returned_ids == () and failed.error.startswith("UnknownLayerError: unknown layer 'nope'")
    assert tool.returned_ids == ("t1",) and tool.elapsed_ms == 2.0
    assert all(s.elapsed_ms >= 0 for s in steps)
    with pytest.raises(ConfigError, match="trace source 'web'"):
        with engine.trace_source("web"):
            pass
    with pytest.raises(ConfigError, match="call 'delete'"):
        engine.record_call("delete")


def test_replay_unchanged_is_identical_and_other_layers_give_a_diff(engine, corpus, tmp_path):
    path = tmp_path / "trace.jsonl"
    engine.record_trace(path)
    res = engine.search("timebox", timebox=5, layers=["grep"])
    engine.fetch(res.hits[0].id)
    engine.build(timebox=1, layers=["trigram"])
    engine.read("docs/paper.tex")
    engine.stop_trace()

    same = replay(path, engine)
    assert [s.jaccard for s in same.steps] == [1.0, 1.0, None, 1.0]
    assert not any(s.changed for s in same.steps)
    build = same.steps[2]
    assert build.skipped.startswith("build changes state") and build.new_ids == ()
    assert same.summary()["mean_jaccard"] == 1.0 and same.summary()["changed"] == 0
    assert path.read_text().count("\n") == 4  # replays are not recorded

    other = replay(path, engine, layers=["names"], steps=[0])
    (d,) = other.steps
    assert d.old_ids == tuple(GREP_TIMEBOX) and d.new_ids == tuple(NAMES_TIMEBOX)
    assert d.added == tuple(NAMES_TIMEBOX) and d.removed == tuple(GREP_TIMEBOX) and d.kept == ()
    assert d.jaccard == 0.0 and d.changed
    assert d.old_states["grep"] == "ran" and d.new_states["grep"] == "skipped"
    assert d.new_states["names"] == "ran" and d.params_used["layers"] == ["names"]
    both = replay_step(load_trace(path).steps[0], engine, layers=["names", "grep"], k=2)
    assert both.new_ids == (GREP_TIMEBOX[0], GREP_TIMEBOX[1])
    assert both.removed == tuple(GREP_TIMEBOX[2:]) and both.jaccard == 0.5
    assert both.new_states["names"] == "ran"  # names found the first grep hit's unit too

    (corpus / "docs" / "paper.tex").write_text("no more of that word here\n")
    engine.index_now()
    edited = replay(path, engine, timebox="2s")
    s0, _, _, s3 = edited.steps
    assert s0.removed == (GREP_TIMEBOX[1], GREP_TIMEBOX[3]) and s0.added == ()
    assert s0.rank_changes == {GREP_TIMEBOX[2]: (3, 2)} and s0.jaccard == 0.5
    assert s0.params_used["timebox"] == 2.0
    new_hash = content_hash(b"no more of that word here\n")[:12]
    assert s3.removed == ("248e6bb331b8:0-206",) and s3.added == (f"{new_hash}:0-26",) and s3.changed
    summary = edited.summary()
    assert summary["replayed"] == 3 and summary["skipped"] == 1 and summary["changed"] == 2
    assert summary["overrides"] == {"timebox": 2.0}

    doc = json.loads(json.dumps(edited.to_dict()))
    assert doc["steps"][0]["rank_changes"] == {GREP_TIMEBOX[2]: [3, 2]}
    assert "jaccard 0.50" in str(edited) and "<table>" in edited._repr_html_()
    df = edited.to_polars()
    assert df.columns[:4] == ["seq", "call", "label", "skipped"] and df["jaccard"].to_list()[0] == 0.5
    with pytest.raises(UnknownLayerError):
        replay(path, engine, layers=["nope"])
    with pytest.raises(ConfigError, match=r"steps \[9\]"):
        replay(path, engine, steps=[9])


def test_open_with_trace_and_the_cli_trace_replay(corpus, tmp_path, capsys, monkeypatch):
    path = tmp_path / "t.jsonl"
    with lar.open(corpus, state=tmp_path / "s", trace=path, session="opened") as eng:
        eng.search("timebox", timebox=5, layers=["grep"])
    assert [(d["session"], d["returned_ids"]) for d in lines(path)] == [("opened", GREP_TIMEBOX)]
    monkeypatch.setenv("LAR_SESSION", "shell-1")
    common = ["--root", str(corpus), "--state", str(tmp_path / "s")]
    assert main(["search", "timebox", "--layers", "grep", "--trace", str(path), *common]) == 0
    assert main(["fetch", GREP_TIMEBOX[1], "--trace", str(path), *common]) == 0
    capsys.readouterr()
    got = lines(path)
    assert [(d["seq"], d["source"], d["session"], d["call"]) for d in got[1:]] == [
        (1, "cli", "shell-1", "search"), (2, "cli", "shell-1", "fetch")]
    assert main(["replay", str(path), "--layers", "names", "--json", *common]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["jaccard"] for s in doc["steps"]] == [0.0, 0.0, 1.0]
    assert doc["steps"][1]["added"] == NAMES_TIMEBOX and doc["summary"]["changed"] == 2
    assert main(["replay", str(tmp_path / "none.jsonl"), *common]) == 2
    assert "no trace file" in capsys.readouterr().err
