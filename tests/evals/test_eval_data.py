"""Loading BEIR folders: accounting of unscorable judgments, errors with file and line, and the
corpus written as files."""
from __future__ import annotations

import json

import pytest

from lar_evals.data import load_beir, materialise
from lar_evals.errors import EvalDataError
from lar.core.errors import LarError


def test_counts_what_cannot_be_scored(beir_dir):
    data = load_beir(beir_dir, "test")
    rep = data.report
    assert rep["corpus_docs"] == 14 and rep["queries"] == 6 and rep["qrels_pairs"] == 8
    assert rep["qrels_docs_missing_from_corpus"] == 1
    assert rep["examples"]["docs_missing_from_corpus"] == [["q5", "d404"]]
    assert rep["qrels_queries_missing"] == 1 and rep["examples"]["queries_missing"] == ["q99"]
    assert rep["queries_without_qrels"] == 1  # q6
    assert rep["queries_scored"] == 5
    assert data.qrels["q5"] == {"d4": 2}  # the missing document is not scored
    assert "q99" not in data.qrels
    assert data.scored_queries() == ["q1", "q2", "q3", "q4", "q5"]
    assert data.name == "tiny" and data.split == "test" and len(data.corpus_hash) == 32


def test_keeps_query_type_and_extra_fields(beir_dir):
    data = load_beir(beir_dir, "test")
    assert data.queries["q1"]["type"] == "rare-term"  # top-level type
    assert data.queries["q2"]["type"] == "paraphrase"  # type inside metadata
    assert data.queries["q2"]["meta"]["answer"] == [4, 11]
    assert "type" not in data.queries["q3"] and data.query_type("q3") is None
    assert data.corpus["d2"] == {"title": "Quokka",
                                 "text": "The quokka is a small marsupial living on Rottnest Island."}


def test_qrels_header_is_optional(tmp_path, make_beir):
    data = load_beir(make_beir(tmp_path / "b", header=False), "test")
    assert data.report["qrels_pairs"] == 8 and data.qrels["q1"] == {"d2": 1}


def test_malformed_corpus_line_names_file_and_line(tmp_path, make_beir):
    folder = make_beir(tmp_path / "b")
    lines = (folder / "corpus.jsonl").read_text().splitlines()
    lines[2] = '{"_id": "d3", "text": "unterminated'
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(EvalDataError) as err:
        load_beir(folder, "test")
    assert isinstance(err.value, LarError)
    assert "corpus.jsonl, line 3: malformed JSON" in str(err.value)
    assert err.value.line == 3


@pytest.mark.parametrize("bad, message", [
    ("q1\td2", "line 3: expected 3 fields (query-id, corpus-id, score), got 2"),
    ("q1\td2\tyes", "line 3: score 'yes' is not an integer"),
])
def test_malformed_qrels_line_names_file_and_line(tmp_path, make_beir, bad, message):
    folder = make_beir(tmp_path / "b")
    path = folder / "qrels" / "test.tsv"
    lines = path.read_text().splitlines()
    lines[2] = bad
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(EvalDataError, match="test.tsv") as err:
        load_beir(folder, "test")
    assert message in str(err.value)


def test_query_without_text_and_unknown_split(tmp_path, make_beir):
    folder = make_beir(tmp_path / "b", queries=[{"_id": "q1", "text": "ok"}, {"_id": "q2"}])
    with pytest.raises(EvalDataError, match=r'queries.jsonl, line 2: field "text" is missing'):
        load_beir(folder, "test")
    with pytest.raises(EvalDataError, match="no qrels for split 'dev'; available splits: test"):
        load_beir(folder, "dev")


def test_materialise_writes_and_reuses(tmp_path, beir_dir):
    data = load_beir(beir_dir, "test")
    root, paths = materialise(data, tmp_path / "cache")
    assert len(paths) == 14 and all(p.endswith(".txt") for p in paths)
    by_doc = {d: p for p, d in paths.items()}
    assert (root / by_doc["d2"]).read_text() == (
        "Quokka\n\nThe quokka is a small marsupial living on Rottnest Island.")
    marker = json.loads((root.parent / "COMPLETE.json").read_text())
    assert marker == {"layout": 1, "docs": 14, "ext": ".txt"}
    (root / "sentinel").write_text("kept")
    again, _ = materialise(data, tmp_path / "cache")
    assert again == root and (root / "sentinel").exists()  # complete: reused as is
    (root.parent / "COMPLETE.json").unlink()
    again, _ = materialise(data, tmp_path / "cache")
    assert again == root and not (root / "sentinel").exists()  # incomplete: written anew


def test_materialise_picks_py_for_code(tmp_path, make_beir):
    docs = [(f"c{i}", "", f"def f{i}(x):\n    return x + {i}\n") for i in range(8)]
    docs.append(("p1", "", "This is prose, not code."))
    folder = make_beir(tmp_path / "code", docs=docs, queries=[{"_id": "q", "text": "f1"}],
                       qrels=[("q", "c1", 1)])
    root, paths = materialise(load_beir(folder, "test"), tmp_path / "cache")
    assert all(p.endswith(".py") for p in paths)
    root2, paths2 = materialise(load_beir(folder, "test"), tmp_path / "cache", ext=".txt")
    assert root2 != root and all(p.endswith(".txt") for p in paths2)
