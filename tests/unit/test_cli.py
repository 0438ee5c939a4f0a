import json

import pytest

from lar.apps.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_json_is_stable(corpus, tmp_path, capsys):
    state = str(tmp_path / "state")
    code, out, _ = run(capsys, "search", "parse_deadline", "--root", str(corpus), "--state", state,
                       "--timebox", "2s", "--k", "3", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["k"] == 3 and doc["fusion"] == "adaptive"
    assert set(doc["hits"][0]) == {"id", "path", "lines", "excerpt", "signals", "rank", "score"}
    assert [h["rank"] for h in doc["hits"]] == list(range(1, len(doc["hits"]) + 1))
    scores = [h["score"] for h in doc["hits"]]
    assert scores == sorted(scores, reverse=True) and doc["score_scale"].startswith(("adaptive-", "rrf"))
    import lar
    from lar.engine.variants import default_variants

    assert {r["name"] for r in doc["runs"]} == set(lar.registered_layers()) | set(default_variants())
    hit_id = doc["hits"][0]["id"]
    code, out, _ = run(capsys, "fetch", hit_id, "--root", str(corpus), "--state", state, "--json")
    assert code == 0 and json.loads(out)["text"] == "def parse_deadline(value):"


def test_mapping_query_full_evidence(corpus, tmp_path, capsys):
    code, out, _ = run(capsys, "search", '{"grep": {"regex": "class \\\\w+"}}', "--root", str(corpus),
                       "--state", str(tmp_path / "s"), "--json", "--full")
    doc = json.loads(out)
    assert code == 0 and doc["hits"][0]["excerpt"] == "class AnytimeScheduler:"
    ev = doc["hits"][0]["evidence"]["grep"]
    assert ev["rank"] == 1 and ev["query"]["regex"] is True


def test_status_inventory_and_read(corpus, tmp_path, capsys):
    state = str(tmp_path / "state")
    code, out, _ = run(capsys, "status", "--root", str(corpus), "--state", state, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["units"] == 6 and doc["skipped"][0]["path"] == "blob.bin"
    code, out, _ = run(capsys, "inventory", "--root", str(corpus), "--state", state, "--json")
    assert "docs/fusion.md" in {u["path"] for u in json.loads(out)["units"]}
    code, out, _ = run(capsys, "read", "docs/fusion.md", "--root", str(corpus), "--state", state)
    assert code == 0 and out.startswith("# Reciprocal rank fusion")


def test_errors_are_one_line_and_exit_2(corpus, tmp_path, capsys):
    code, _, err = run(capsys, "search", "x", "--root", str(corpus), "--state", str(tmp_path / "s"),
                       "--layers", "nope")
    assert code == 2 and err.startswith("lar: error: unknown layer 'nope'")
    code, _, err = run(capsys, "fetch", "zzz", "--root", str(corpus), "--state", str(tmp_path / "s"))
    assert code == 2 and "not a lar hit id" in err
    code, _, err = run(capsys, "read", "../etc/passwd", "--root", str(corpus), "--state", str(tmp_path / "s"))
    assert code == 2 and "'..'" in err
    with pytest.raises(SystemExit) as exc:
        main(["search", "x", "--timebox", "soon"])
    assert exc.value.code == 2
    assert "cannot read duration" in capsys.readouterr().err


def test_text_output_lists_the_named_layers_with_ranks_and_scores(corpus, tmp_path, capsys):
    code, out, _ = run(capsys, "search", "parse_deadline", "--root", str(corpus), "--state",
                       str(tmp_path / "s"), "--layers", "grep,names", "--fusion", "rrf")
    assert code == 0
    runs = [line.split(":")[0].strip("- ") for line in out.splitlines() if line.startswith("  - ")]
    assert runs == ["grep", "names"]
    assert "layers skipped; --all-runs lists them" in out
    first = out.splitlines()[1]
    assert first.startswith("  1. 0.01639  ") and "timebox.py:4  [grep]" in first  # 1/(60 + 1)
    assert "scores on the rrf scale" in out.splitlines()[0]
    code, out, _ = run(capsys, "search", "parse_deadline", "--root", str(corpus), "--state",
                       str(tmp_path / "s"), "--layers", "grep,names", "--all-runs")
    assert "  - bm25: skipped" in out and "--all-runs lists them" not in out


def test_a_search_whose_only_layer_failed_exits_1(corpus, tmp_path, capsys):
    code, out, err = run(capsys, "search", '{"grep": {"regex": "(unclosed"}}', "--root", str(corpus),
                         "--state", str(tmp_path / "s"), "--layers", "grep", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["runs"][0]["state"] == "failed"
    assert err.startswith("lar: error: grep failed: ")
    code, _, _ = run(capsys, "search", "parse_deadline", "--root", str(corpus), "--state",
                     str(tmp_path / "s"), "--layers", "grep,names", "--json")
    assert code == 0
