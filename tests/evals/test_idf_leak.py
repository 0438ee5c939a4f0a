"""The IDF-weighted leak check of generated paraphrase queries: the share of the query's IDF
mass (content terms, stopwords out, stemmed) that its answer holds, rejected above the set's
threshold, the threshold recorded in the report."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lar_evals.generate import GenerateError, generate
from lar_evals.generators.common import Doc
from lar_evals.generators.verify import MAX_IDF_LEAK, CorpusStats, idf_leak, overlap, terms

# load_settings's docstring repeats common words of its body (read, settings, values: in every
# document, so not rare: the rare-term check lets it through); merge_intervals's shares none
CONFIG = '''def load_settings(path):
    """Read the stored settings file into values."""
    with open(path) as handle:
        settings = handle.read().split()
    values = [s.strip() for s in settings]
    return [v for v in values if v]


def merge_intervals(spans):
    """Join overlapping ranges into disjoint pieces."""
    ordered = sorted(spans)
    out = [list(ordered[0])]
    for lo, hi in ordered[1:]:
        if lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out
'''
NOTES = {"a.md": "Each stored file holds settings and values you read back.\n",
         "b.md": "The settings file stored the values read at start.\n",
         "c.md": "Values and settings come from one stored file read per run.\n"}
LEAKY = "Read the stored settings file into values."
CLEAN = "Join overlapping ranges into disjoint pieces."


@pytest.fixture(scope="module")
def leak_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("leak") / "corpus"
    (root / "src").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "src" / "config.py").write_text(CONFIG, encoding="utf-8")
    for name, text in NOTES.items():
        (root / "notes" / name).write_text(text, encoding="utf-8")
    return root


def _queries(out: Path) -> dict[str, dict]:
    return {q["text"]: q for q in map(json.loads, (out / "queries.jsonl").read_text().splitlines())}


def test_idf_leak_is_the_idf_weighted_share_of_the_query_found_in_the_target():
    # df over 4 docs: cat 4, dog 2, bird 1, fish 1; lucene idf = ln(1 + (N - df + .5) / (df + .5))
    docs = [Doc("1.md", "cat dog fish"), Doc("2.md", "cat dog"), Doc("3.md", "cat bird"),
            Doc("4.md", "cat")]
    stats = CorpusStats(docs)
    cat, dog, bird = math.log(1 + 0.5 / 4.5), math.log(2.0), math.log(1 + 3.5 / 1.5)
    assert stats.bm25_idf("dog") == pytest.approx(dog)
    got = idf_leak(terms("the cat and the dog saw a bird"), terms(docs[0].text), stats)
    assert got == pytest.approx((cat + dog) / (cat + dog + bird))  # 0.3988
    assert round(got, 4) == 0.3988  # unweighted it would be 2 of 3 terms: 0.6667
    assert idf_leak(terms("bird"), terms("cat dog"), stats) == 0.0
    assert idf_leak(set(), terms("cat"), stats) == 0.0  # no content terms
    assert overlap("cat dog bird", "cat dog fish", stats)["idf_leak"] == pytest.approx(got)


def test_a_query_repeating_common_words_of_its_answer_is_rejected(leak_corpus, tmp_path):
    rep = generate(leak_corpus, "doc2code", 10, 0, tmp_path / "d", max_idf_leak=0.5)
    assert list(_queries(tmp_path / "d")) == [CLEAN]
    assert _queries(tmp_path / "d")[CLEAN]["metadata"]["idf_leak"] == 0.0
    # read, settings, values are in the body; stored and file only in the (blanked) docstring:
    # 3 of 5 terms, all five in all 4 documents (equal IDF): 0.6
    assert rep["rejected"] == {"idf-leak": 1}
    assert rep["overlap_generated"]["idf_leak"]["max"] == 0.6
    assert rep["overlap"]["idf_leak"]["max"] == 0.0
    assert rep["thresholds"]["max_idf_leak"] == 0.5
    corpus = {json.loads(x)["_id"]: json.loads(x)["text"]
              for x in (tmp_path / "d" / "corpus.jsonl").read_text().splitlines()}
    assert "Read the stored settings" in corpus["src/config.py"]  # rejected: nothing blanked
    assert "Join overlapping" not in corpus["src/config.py"]


def test_the_threshold_decides_which_leaking_queries_stay(leak_corpus, tmp_path):
    kept = {}
    for th in (0.55, 0.65, 1.0):
        rep = generate(leak_corpus, "doc2code", 10, 0, tmp_path / str(th), max_idf_leak=th)
        kept[th] = sorted(_queries(tmp_path / str(th)))
        assert rep["thresholds"]["max_idf_leak"] == th
    assert kept[0.55] == [CLEAN]
    assert kept[0.65] == kept[1.0] == sorted([LEAKY, CLEAN])
    meta = _queries(tmp_path / "1.0")[LEAKY]["metadata"]
    assert meta["idf_leak"] == 0.6 and meta["leak"] == 0.0  # no rare term: only this check sees it


def test_the_default_threshold_rejects_the_leaking_query(leak_corpus, tmp_path):
    rep = generate(leak_corpus, "paraphrase", 10, 0, tmp_path / "p")
    assert rep["thresholds"]["max_idf_leak"] == MAX_IDF_LEAK < 0.6
    assert list(_queries(tmp_path / "p")) == [CLEAN] and rep["rejected"] == {"idf-leak": 1}
    with pytest.raises(GenerateError, match="max_idf_leak"):
        generate(leak_corpus, "paraphrase", 10, 0, tmp_path / "x", max_idf_leak=1.5)


def test_set_stats_and_the_cli_report_the_idf_leak(leak_corpus, tmp_path, capsys):
    from lar_evals.generate_cli import main
    from lar_evals.set_stats import set_stats

    assert main([str(leak_corpus), "--kind", "doc2code", "--out", str(tmp_path / "c"),
                 "--max-idf-leak", "1"]) == 0
    assert "wrote 2/100" in capsys.readouterr().out
    st = set_stats(tmp_path / "c")["doc2code"]
    assert st["idf_leak"]["max"] == 0.6 and st["idf_leak"]["min"] == 0.0
    assert json.loads((tmp_path / "c" / "report.json").read_text())["thresholds"]["max_idf_leak"] == 1.0
