"""Paraphrase pairs the corpus holds (docstring / code, heading / section, caption / text,
reference / environment), blanking of the query's own prose, leak rejection, determinism,
the mixed kind and merging blanked parts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lar_evals.generate import generate
from lar_evals.generate_many import generate_many
from lar_evals.generators.pairs import prose_query

MERGE = '''def merge_intervals(spans):
    """Join overlapping ranges into disjoint pieces."""
    ordered = sorted(spans)
    out = [list(ordered[0])]
    for lo, hi in ordered[1:]:
        if lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def zorblax_total(items):
    """Sum the zorblax weights of the items given to the counter."""
    zorblax = 0
    for it in items:
        zorblax += it
    total = zorblax * 2
    return total + len(items) - 1
'''

NOTES = """# Backward compatibility

Old files keep working without changes. The reader accepts every earlier layout and converts it
on the fly, so nothing needs to be rewritten by hand when upgrading to a newer release.
"""

MAIN = r"""\section{Results}
\label{sec:res}
Our measurements on the benchmark collection appear below.

As Figure~\ref{fig:curve} shows, retrieval quality climbs steadily while the deadline grows,
and the cheap routes already recover most relevant documents early in the run.

\begin{figure}
\includegraphics{curve.pdf}
\caption{Answer goodness versus permitted waiting period}
\label{fig:curve}
\end{figure}

The argument in Lemma~\ref{lem:mono} is short and purely combinatorial.
"""

THEORY = r"""\begin{lemma}\label{lem:mono}
Adding a route never lowers the recall of the fused list at any depth, because fusion keeps
every candidate that some route contributed to the pool.
\end{lemma}
"""


@pytest.fixture(scope="module")
def pair_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pairs") / "corpus"
    (root / "src").mkdir(parents=True)
    (root / "paper").mkdir()
    (root / "src" / "spans.py").write_text(MERGE, encoding="utf-8")
    (root / "notes.md").write_text(NOTES, encoding="utf-8")
    (root / "paper" / "main.tex").write_text(MAIN, encoding="utf-8")
    (root / "paper" / "theory.tex").write_text(THEORY, encoding="utf-8")
    # "lemma" and "figure" in three documents: common words here, not rare terms a query leaks
    (root / "paper" / "README.md").write_text("Every lemma and every figure of the paper.\n")
    (root / "paper" / "appendix.tex").write_text("Each lemma and figure is restated here.\n")
    return root


def read(out: Path):
    corpus = {json.loads(x)["_id"]: json.loads(x)["text"] for x in (out / "corpus.jsonl").read_text().splitlines()}
    queries = {json.loads(x)["text"]: json.loads(x) for x in (out / "queries.jsonl").read_text().splitlines()}
    qrels = [tuple(x.split("\t")) for x in (out / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    return corpus, queries, qrels, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def para_set(pair_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("para-out")
    generate(pair_corpus, "paraphrase", 20, 0, out / "a")
    generate(pair_corpus, "paraphrase", 20, 0, out / "b")
    return out


def test_each_pair_kind_pairs_human_prose_with_what_it_describes(para_set, pair_corpus):
    corpus, queries, qrels, report = read(para_set / "a")
    got = {q["metadata"]["type"]: (text, q) for text, q in queries.items()}
    assert set(got) == {"doc2code", "heading2section", "caption2text", "ref2env"}
    assert got["heading2section"][0] == "Backward compatibility: Old files keep working without changes."
    assert got["doc2code"][0] == "Join overlapping ranges into disjoint pieces."
    assert got["caption2text"][0] == "Answer goodness versus permitted waiting period"
    assert got["ref2env"][0] == "The argument in Lemma is short and purely combinatorial."
    answers = {t: q["metadata"]["answer"] for t, (_, q) in got.items()}
    head = queries["Backward compatibility: Old files keep working without changes."]["metadata"]["answer"]
    assert corpus["notes.md"].encode()[head["start"]:head["end"]].decode().startswith("The reader accepts")
    assert answers["doc2code"]["doc"] == "src/spans.py"
    assert answers["caption2text"]["doc"] == "paper/main.tex"
    assert answers["ref2env"]["doc"] == "paper/theory.tex"
    span = corpus["paper/theory.tex"].encode()[answers["ref2env"]["start"]:answers["ref2env"]["end"]]
    assert span.decode().startswith("\\begin{lemma}") and span.decode().endswith("\\end{lemma}")
    span = corpus["paper/main.tex"].encode()[answers["caption2text"]["start"]:answers["caption2text"]["end"]]
    assert span.decode().startswith("As Figure~\\ref{fig:curve} shows")
    rel = {q: d for q, d, _ in qrels}
    assert rel[got["doc2code"][1]["_id"]] == "src/spans.py"
    assert report["sources"] == {"caption2text": 1, "doc2code": 1, "heading2section": 1, "ref2env": 1}
    # "As Figure~\ref{fig:curve} shows, ..." is the caption's answer: the reference-sentence
    # query made from it (ref2env of the figure), and the Results section whose body holds the
    # blanked caption, are rejected rather than blank another query's answer
    assert report["rejected"]["blank-conflict"] == 2


def test_the_written_corpus_blanks_each_querys_own_prose(para_set, pair_corpus):
    corpus, queries, _, report = read(para_set / "a")
    for rel in ("src/spans.py", "notes.md", "paper/main.tex"):
        original = (pair_corpus / rel).read_bytes()
        written = corpus[rel].encode()
        assert len(written) == len(original)  # byte for byte: every offset stays valid
        assert written.count(b"\n") == original.count(b"\n")
    assert "Join overlapping" not in corpus["src/spans.py"] and "def merge_intervals" in corpus["src/spans.py"]
    assert "Backward compatibility" not in corpus["notes.md"] and "The reader accepts" in corpus["notes.md"]
    assert "Answer goodness" not in corpus["paper/main.tex"]
    assert "purely combinatorial" not in corpus["paper/main.tex"]  # the referring sentence
    assert corpus["paper/theory.tex"] == THEORY  # the answer itself is untouched
    for q in queries.values():  # no query's words are left where they stood
        assert q["text"] not in " ".join(" ".join(corpus.values()).split())
    assert report["redacted"]["docs"] == 3


def test_a_query_sharing_its_targets_rare_words_is_rejected(para_set):
    _, queries, _, report = read(para_set / "a")
    assert not any("zorblax" in t for t in queries)
    assert report["rejected"].get("rare-token-leak", 0) >= 1
    assert report["overlap"]["rare_leak"]["max"] == 0
    assert report["overlap_generated"]["rare_leak"]["max"] > 0


def test_pair_sets_are_deterministic(para_set, pair_corpus, tmp_path):
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (para_set / "a" / name).read_bytes() == (para_set / "b" / name).read_bytes(), name
    one = generate(pair_corpus, "doc2code", 5, 0, tmp_path / "d")
    assert one["n_written"] == 1 and one["kind"] == "doc2code"
    assert json.loads((tmp_path / "d" / "queries.jsonl").read_text())["_id"] == "d2c-00001"


def test_prose_query_drops_code_and_markup():
    assert prose_query("Return the :func:`os.path` of ``x`` for a_b and fooBar() cached values "
                       "quickly v2") == "Return the of for and cached values quickly"
    assert prose_query("too few words") is None
    assert prose_query(r"See \cref{fig:x} for the measured nDCG values on every split", latex=True,
                       code=False) == "See for the measured nDCG values on every split"


def test_mixed_queries_are_a_rare_name_and_its_intent(pair_corpus, tmp_path):
    rep = generate(pair_corpus, "mixed", 5, 0, tmp_path / "m")
    corpus, queries, qrels, _ = read(tmp_path / "m")
    assert "merge_intervals Join overlapping ranges into disjoint pieces" in queries
    q = queries["merge_intervals Join overlapping ranges into disjoint pieces"]
    assert q["metadata"]["type"] == "mixed" and q["metadata"]["term"] == "merge_intervals"
    assert (q["_id"], "src/spans.py", "2") in qrels
    assert "Join overlapping" in corpus["src/spans.py"]  # mixed blanks nothing
    assert rep["redacted"]["docs"] == 0


def test_merging_blanked_parts_blanks_the_union(pair_corpus, tmp_path):
    rep = generate_many(pair_corpus, ["paraphrase", "mixed", "rare-term"], 10, 0, tmp_path / "all")
    corpus, queries, qrels, _ = read(tmp_path / "all")
    assert "Join overlapping" not in corpus["src/spans.py"]  # the paraphrase part blanked it
    # the mixed query keeps its term in its answer: still valid, kept
    assert "merge_intervals Join overlapping ranges into disjoint pieces" in queries
    assert rep["n_written"] - rep["dropped_blanked_answers"] == len(queries)
    assert {q for q, _, _ in qrels} == {q["_id"] for q in queries.values()}


def test_overlap_is_reported_per_pair_kind_and_by_set_stats(para_set, capsys):
    from lar_evals.set_stats import main, set_stats

    report = json.loads((para_set / "a" / "report.json").read_text())
    assert set(report["overlap_by_source"]) == {"doc2code", "heading2section", "caption2text", "ref2env"}
    assert all(v["jaccard"]["n"] == 1 and v["rare_leak"]["max"] == 0
               for v in report["overlap_by_source"].values())
    stats = set_stats(para_set / "a", samples=5)
    _, queries, _, _ = read(para_set / "a")
    for t, st in stats.items():
        qs = [q for q in queries.values() if q["metadata"]["type"] == t]
        assert st["n"] == len(qs) and st["jaccard"]["median"] == qs[0]["metadata"]["overlap"]
    assert main([str(para_set / "a"), "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "| doc2code | 1 |" in out and "Join overlapping ranges into disjoint pieces." in out


SPLIT = '''class Splitter:
    def __init__(self, size):
        self.size = size

    def pieces(self, text):
        words = text.split()
        out = []
        for i in range(0, len(words), self.size):
            out.append(" ".join(words[i:i + self.size]))
        return out


class Frobnicator:
    def __init__(self):
        self.quorvex = {}

    def lookup(self, key):
        if key not in self.quorvex:
            self.quorvex[key] = len(key) * 2
        return self.quorvex[key]
'''

LOAD_CODE = ['import pandas as pd\n', 'frame = pd.read_csv("timings.csv")\n',
             'frame = frame[frame["status"] == "done"]\n', 'frame.describe()']
PLOT_CODE = ['import matplotlib.pyplot as plt\n', 'values = frame.groupby("quarter").size()\n',
             'plt.bar(values.index, values, label="zentrix totals per quarter")\n', 'plt.legend()']
NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "markdown", "metadata": {}, "source": [
        "## Loading the measurements\n",
        "Pull the recorded durations from disk and keep only the completed experiments.\n"]},
    {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [], "source": LOAD_CODE},
    # the plot's label says "zentrix": a rare word of the code cell the query would leak
    {"cell_type": "markdown", "metadata": {}, "source": "Plot the quarterly zentrix figures as bars."},
    {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [], "source": PLOT_CODE},
    {"cell_type": "markdown", "metadata": {}, "source": "A closing remark with no code after it at all."}]}
README_CODE_Q = "The cuts long documents into even chunks before they are indexed."
CELL_Q = ("Loading the measurements: Pull the recorded durations from disk and keep only the "
          "completed experiments.")


@pytest.fixture(scope="module")
def doc_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("docpairs") / "corpus"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "nb").mkdir()
    (root / "src" / "split.py").write_text(SPLIT, encoding="utf-8")
    (root / "README.md").write_text(
        "The Splitter cuts long documents into even chunks before they are indexed.\n\n"
        "```\nSplitter(3)\n```\n", encoding="utf-8")
    # "quorvex" is a rare word of the Frobnicator class: the query would leak it
    (root / "docs" / "guide.md").write_text(
        "A Frobnicator keeps a quorvex table of earlier answers so repeated calls stay cheap.\n"
        "Its pieces are never cached in any other place.\n", encoding="utf-8")
    (root / "nb" / "demo.ipynb").write_text(json.dumps(NOTEBOOK, indent=1), encoding="utf-8")
    return root


def test_readme_sentence_pairs_with_the_definition_it_names(doc_corpus, tmp_path):
    rep = generate(doc_corpus, "readme2code", 10, 0, tmp_path / "r")
    corpus, queries, qrels, _ = read(tmp_path / "r")
    assert list(queries) == [README_CODE_Q]  # "Splitter" removed from the sentence
    q = queries[README_CODE_Q]
    assert q["_id"] == "rd2c-00001" and q["metadata"]["type"] == "readme2code"
    ans = q["metadata"]["answer"]
    span = corpus["src/split.py"].encode()[ans["start"]:ans["end"]].decode()
    assert ans["doc"] == "src/split.py" and span == SPLIT[:SPLIT.index("\n\n\nclass Frob")]
    assert q["metadata"]["source"]["name"] == "Splitter"
    assert q["metadata"]["source"]["sentence_doc"] == "README.md"
    assert qrels == [(q["_id"], "src/split.py", "1")]
    # the Frobnicator sentence shares "quorvex" with the class: rejected; "pieces" (a plain
    # word, not written as code) pairs with nothing
    assert rep["candidates"] == 2 and rep["rejected"] == {"rare-token-leak": 1}
    assert corpus["README.md"].startswith(" " * len(README_CODE_Q.replace("The ", "The Splitter ")))
    assert "Splitter(3)" in corpus["README.md"] and corpus["src/split.py"] == SPLIT
    assert "quorvex table" in corpus["docs/guide.md"]  # a rejected query blanks nothing


def test_notebook_markdown_cell_pairs_with_the_next_code_cell(doc_corpus, tmp_path):
    rep = generate(doc_corpus, "cell2code", 10, 0, tmp_path / "c")
    corpus, queries, qrels, _ = read(tmp_path / "c")
    assert list(queries) == [CELL_Q]
    q = queries[CELL_Q]
    assert q["_id"] == "nb2c-00001" and q["metadata"]["type"] == "cell2code"
    ans = q["metadata"]["answer"]
    span = corpus["nb/demo.ipynb"].encode()[ans["start"]:ans["end"]].decode()
    assert ans["doc"] == "nb/demo.ipynb" and json.loads(span) == LOAD_CODE  # the code cell's source
    assert qrels == [(q["_id"], "nb/demo.ipynb", "1")]
    assert rep["candidates"] == 2 and rep["rejected"] == {"rare-token-leak": 1}  # the zentrix plot
    written = json.loads(corpus["nb/demo.ipynb"])  # blanked inside the brackets: still JSON
    assert written["cells"][0]["source"] == [] and written["cells"][1]["source"] == LOAD_CODE
    assert written["cells"][2]["source"] == NOTEBOOK["cells"][2]["source"]
    assert len(corpus["nb/demo.ipynb"]) == len(json.dumps(NOTEBOOK, indent=1))


def test_doc_pair_kinds_are_reported_per_kind_in_paraphrase_sets(doc_corpus, tmp_path):
    rep = generate(doc_corpus, "paraphrase", 10, 0, tmp_path / "p")
    _, queries, _, _ = read(tmp_path / "p")
    assert {q["metadata"]["type"] for q in queries.values()} == {"readme2code", "cell2code"}
    assert rep["sources"] == {"cell2code": 1, "readme2code": 1}
    assert set(rep["overlap_by_source"]) == {"cell2code", "readme2code"}
    assert all(v["jaccard"]["n"] == 1 and v["rare_leak"]["max"] == 0
               for v in rep["overlap_by_source"].values())
    assert rep["overlap_generated"]["rare_leak"]["max"] > 0  # the two leaking queries


def test_notebook_cells_locates_each_source_in_the_json():
    from lar_evals.generators.doc_pairs import notebook_cells

    text = json.dumps(NOTEBOOK, indent=1)
    cells = notebook_cells(text)
    assert [c[0] for c in cells] == ["markdown", "code", "markdown", "code", "markdown"]
    assert cells[1][1] == "".join(LOAD_CODE)
    assert all(json.loads(text[a:b]) == NOTEBOOK["cells"][i]["source"]
               for i, (_, _, (a, b)) in enumerate(cells))
    assert notebook_cells("not json") == [] and notebook_cells('{"cells": 3}') == []


def test_readme_sentences_are_cut_to_their_list_item_and_mostly_code_ones_dropped():
    from lar_evals.generators.common import Doc
    from lar_evals.generators.doc_pairs import defined_names, readme_targets

    docs = [Doc("docs/api.md", "Two helpers:\n- the Splitter cuts long documents into even chunks\n"
                               "- the Frobnicator `x` `y` `z` `w` remembers old answers kindly\n"),
            Doc("src/split.py", SPLIT)]
    names = defined_names(docs)
    assert sorted(names) == ["Frobnicator", "Splitter", "lookup", "pieces"]  # __init__: twice
    got = readme_targets(docs, names, prose_query, 20_000, 12)
    # the first item alone (not "Two helpers: - the ..."); the second lost 4 of 9 words to code
    assert [(t.source_text, t.name) for t in got] == [("the cuts long documents into even chunks",
                                                       "Splitter")]
    (doc, ((a, b),)) = got[0].aux["redact_in"]
    assert doc.text[a:b] == "the Splitter cuts long documents into even chunks"
