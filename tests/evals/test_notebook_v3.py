"""cell2code on an nbformat-3 notebook: cells inside ``worksheets``, code in ``input``, ``heading``
cells read as markdown headings. The fixture is written by hand in the layout IPython 1-2 saved
(one-space indents, ``prompt_number``, ``language``), not produced with json.dumps."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lar_evals.generate import generate
from lar_evals.generators.doc_pairs import notebook_cells

V3 = """{
 "metadata": {
  "name": "timings"
 },
 "nbformat": 3,
 "nbformat_minor": 0,
 "worksheets": [
  {
   "cells": [
    {
     "cell_type": "heading",
     "level": 2,
     "metadata": {},
     "source": [
      "Loading the measurements"
     ]
    },
    {
     "cell_type": "markdown",
     "metadata": {},
     "source": [
      "Pull the recorded durations from disk and keep only the completed experiments."
     ]
    },
    {
     "cell_type": "code",
     "collapsed": false,
     "input": [
      "import pandas as pd\\n",
      "frame = pd.read_csv(\\"timings.csv\\")\\n",
      "frame = frame[frame[\\"status\\"] == \\"done\\"]\\n",
      "frame.describe()"
     ],
     "language": "python",
     "metadata": {},
     "outputs": [],
     "prompt_number": 1
    },
    {
     "cell_type": "markdown",
     "metadata": {},
     "source": [
      "Plot the quarterly zentrix figures as bars."
     ]
    },
    {
     "cell_type": "code",
     "collapsed": false,
     "input": [
      "import matplotlib.pyplot as plt\\n",
      "values = frame.groupby(\\"quarter\\").size()\\n",
      "plt.bar(values.index, values, label=\\"zentrix totals per quarter\\")\\n",
      "plt.legend()"
     ],
     "language": "python",
     "metadata": {},
     "outputs": [],
     "prompt_number": 2
    }
   ],
   "metadata": {}
  },
  {
   "cells": [
    {
     "cell_type": "markdown",
     "metadata": {},
     "source": "Average the finished durations for every worker machine and list the worst five."
    },
    {
     "cell_type": "code",
     "collapsed": false,
     "input": "means = frame.groupby(\\"host\\")[\\"seconds\\"].mean()\\nslowest = means.sort_values(ascending=False).head(5)\\nprint(slowest.round(2))",
     "language": "python",
     "metadata": {},
     "outputs": [],
     "prompt_number": 3
    },
    {
     "cell_type": "raw",
     "metadata": {},
     "source": "A raw cell with no code after it."
    }
   ],
   "metadata": {}
  }
 ]
}
"""
LOAD = ('import pandas as pd\nframe = pd.read_csv("timings.csv")\n'
        'frame = frame[frame["status"] == "done"]\nframe.describe()')
MEANS = ('means = frame.groupby("host")["seconds"].mean()\n'
         'slowest = means.sort_values(ascending=False).head(5)\nprint(slowest.round(2))')
HEADING_Q = ("Loading the measurements: Pull the recorded durations from disk and keep only the "
             "completed experiments.")
MEANS_Q = "Average the finished durations for every worker machine and list the worst five."


def test_v3_cells_are_read_from_every_worksheet_with_code_in_input():
    cells = notebook_cells(V3)
    assert [c[0] for c in cells] == ["markdown", "markdown", "code", "markdown", "code", "markdown",
                                     "code", "raw"]
    assert cells[0][1] == "## Loading the measurements"  # a level-2 heading cell
    assert cells[2][1] == LOAD and cells[6][1] == MEANS
    nb = json.loads(V3)
    sheets = [c for w in nb["worksheets"] for c in w["cells"]]
    # each span is the JSON value of the cell's text field: input for code, source otherwise
    assert [json.loads(V3[a:b]) for _, _, (a, b) in cells] == [
        c["input"] if c["cell_type"] == "code" else c["source"] for c in sheets]


@pytest.fixture(scope="module")
def v3_set(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("nb3") / "corpus"
    (root / "nb").mkdir(parents=True)
    (root / "nb" / "timings.ipynb").write_text(V3, encoding="utf-8")
    (root / "notes.md").write_text("Other notes about machines and plots.\n", encoding="utf-8")
    out = root.parent / "set"
    return out, generate(root, "cell2code", 10, 0, out)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_v3_markdown_and_heading_cells_pair_with_the_next_code_cell(v3_set):
    out, rep = v3_set
    queries = {q["text"]: q for q in _lines(out / "queries.jsonl")}
    corpus = {d["_id"]: d["text"] for d in _lines(out / "corpus.jsonl")}
    # the heading cell starts the query of the markdown cell after it (nbformat 3 keeps
    # headings in cells of their own)
    assert sorted(queries) == sorted([MEANS_Q, HEADING_Q])
    # the zentrix cell shares a rare word of its code cell: rejected
    assert rep["candidates"] == 3 and rep["rejected"].get("rare-token-leak") == 1
    data = corpus["nb/timings.ipynb"].encode()
    got = {q["text"]: json.loads(data[q["metadata"]["answer"]["start"]:q["metadata"]["answer"]["end"]])
           for q in queries.values()}
    assert got[HEADING_Q] == json.loads(V3)["worksheets"][0]["cells"][2]["input"]
    assert got[MEANS_Q] == MEANS
    assert all(q["metadata"]["type"] == "cell2code" for q in queries.values())


def test_v3_written_notebook_blanks_the_query_cells_and_stays_json(v3_set):
    out, _ = v3_set
    text = {d["_id"]: d["text"] for d in _lines(out / "corpus.jsonl")}["nb/timings.ipynb"]
    assert len(text) == len(V3)  # blanked in place: offsets stay valid
    w0, w1 = (w["cells"] for w in json.loads(text)["worksheets"])
    assert w0[0]["source"] == [] and w0[1]["source"] == []  # the heading and its text
    assert w1[0]["source"] == " " * len(MEANS_Q)
    assert w0[3]["source"] == ["Plot the quarterly zentrix figures as bars."]  # rejected: kept
    assert w0[2]["input"][0] == "import pandas as pd\n" and w1[1]["input"] == MEANS


def test_v3_sets_are_deterministic(v3_set, tmp_path):
    out, _ = v3_set
    root = out.parent / "corpus"
    generate(root, "cell2code", 10, 0, tmp_path / "again")
    for name in ("queries.jsonl", "corpus.jsonl", "qrels/test.tsv"):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()
