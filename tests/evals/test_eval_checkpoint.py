"""Per-query checkpoints: a stopped harness run resumes without searching finished queries."""
import json
from pathlib import Path

import pytest

from lar_evals import evaluate_beir, load_beir
from lar_evals import run as run_module
from lar_evals.checkpoint import Checkpoint
from lar_evals.errors import EvalConfigError

ROUTES = ["grep", "bm25", "names", "trigram"]  # as the shared evaluation in conftest.py


def _run(beir_dir, tmp_path, ckpt, **kw):
    data = load_beir(beir_dir, "test")
    return evaluate_beir(data, routes=ROUTES, timebox=2.0, build_timebox=60.0, k=20,
                         cache_root=tmp_path / "cache", checkpoint=ckpt, **kw)


def test_a_rerun_with_the_checkpoint_searches_nothing_and_scores_the_same(beir_dir, tmp_path, monkeypatch):
    ckpt = tmp_path / "ck.jsonl"
    first = _run(beir_dir, tmp_path, ckpt)
    lines = ckpt.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "lar-beir-checkpoint"
    assert sorted(json.loads(x)["qid"] for x in lines[1:]) == sorted(first.qids)
    assert first.summary["settings"]["resumed_queries"] == 0
    # the harness keeps no call log (its searches are not an agent's calls)
    assert not (Path(first.summary["settings"]["state_dir"]) / "calls.sqlite").exists()

    def no_search(*a, **k):
        raise AssertionError("a checkpointed query was searched again")

    monkeypatch.setattr(run_module, "run_query", no_search)
    again = _run(beir_dir, tmp_path, ckpt)
    assert again.summary["settings"]["resumed_queries"] == len(first.qids)
    for part in ("routes", "fusion", "default"):
        assert again.summary[part] == first.summary[part]
    assert len(ckpt.read_text().splitlines()) == len(lines)  # nothing appended twice


def test_a_torn_last_line_is_dropped_and_that_query_runs_again(beir_dir, tmp_path, monkeypatch):
    ckpt = tmp_path / "ck.jsonl"
    first = _run(beir_dir, tmp_path, ckpt)
    lines = ckpt.read_text().splitlines()
    torn_qid = json.loads(lines[-1])["qid"]
    ckpt.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # a kill mid-write
    searched = []
    real = run_module.run_query

    def counting(eng, text, **kw):
        searched.append(text)
        return real(eng, text, **kw)

    monkeypatch.setattr(run_module, "run_query", counting)
    again = _run(beir_dir, tmp_path, ckpt)
    assert len(searched) == 1 and again.summary["settings"]["resumed_queries"] == len(first.qids) - 1
    assert again.summary["routes"] == first.summary["routes"]
    rows = [json.loads(x) for x in ckpt.read_text().splitlines()[1:]]  # every line whole again
    assert sorted(r["qid"] for r in rows) == sorted(first.qids) and rows[-1]["qid"] == torn_qid


def test_a_checkpoint_from_other_settings_or_another_file_is_refused(tmp_path):
    path = tmp_path / "ck.jsonl"
    Checkpoint(path, "tiny", "test", {"k": 20, "timebox": 2.0}).close()
    with pytest.raises(EvalConfigError, match=r"another settings \(now \{'k': 10\}\)"):
        Checkpoint(path, "tiny", "test", {"k": 10, "timebox": 2.0})
    with pytest.raises(EvalConfigError, match="another split"):
        Checkpoint(path, "tiny", "dev", {"k": 20, "timebox": 2.0})
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(EvalConfigError, match="not a lar beir checkpoint"):
        Checkpoint(other, "tiny", "test", {})
    other.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(EvalConfigError, match="not a lar beir checkpoint"):
        Checkpoint(other, "tiny", "test", {})
    assert other.read_bytes() == b"\xff\xfe\x00binary"  # left as it was
    # a line whose newline was lost in a kill: the next line still starts on its own
    ck = Checkpoint(path, "tiny", "test", {"k": 20, "timebox": 2.0})
    ck.add("q1", {"rankings": {}})
    ck.close()
    path.write_text(path.read_text().rstrip("\n"))
    ck = Checkpoint(path, "tiny", "test", {"k": 20, "timebox": 2.0})
    assert set(ck.done) == {"q1"} and ck.torn == 0
    ck.add("q2", {"rankings": {}})
    ck.close()
    assert set(Checkpoint(path, "tiny", "test", {"k": 20, "timebox": 2.0}).done) == {"q1", "q2"}
