"""The %lar magics driven through a real IPython shell, and the widgets on the shared test corpus
(tests/conftest.py): expected outputs, usage on wrong flags, results bound to variables."""
from __future__ import annotations

import json
import re

import pytest
from IPython.utils.capture import capture_output

import lar
import lar_magics
from lar_magics.results import Results, ResultsList

QUERY = "Reciprocal rank fusion"
LINE3 = "Reciprocal rank fusion adds 1/(c + rank) over the lists in which a candidate appears."


def run(ip, line: str):
    """Run a cell; return (value, stdout, stderr). The cell itself must not raise."""
    with capture_output() as cap:
        res = ip.run_cell(line)
    assert res.error_in_exec is None and res.error_before_exec is None, (cap.stdout, cap.stderr)
    assert "Traceback" not in cap.stdout + cap.stderr
    return res.result, cap.stdout, cap.stderr


@pytest.fixture
def opened(shell, corpus, tmp_path):
    _, out, _ = run(shell, f"%lar open {corpus} --state {tmp_path / 'state'}")
    assert out.startswith(f"lar: opened {corpus.resolve()} (6 units; state in ")
    return shell


def test_load_ext_registers_line_and_cell_magic(shell):
    magics = shell.magics_manager.magics
    assert "lar" in magics["line"] and "lar" in magics["cell"]


def test_charts_render_offline_as_svg(shell):
    import altair as alt

    assert alt.renderers.active == "svg"  # set by %load_ext: no CDN needed
    bundle = alt.Chart(alt.Data(values=[{"x": 1}])).mark_bar().encode(x="x:Q")._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "image/svg+xml" in data and data["image/svg+xml"].lstrip().startswith("<svg")


def test_search_before_open_says_how_to_open_one(shell):
    value, out, err = run(shell, '%lar search "anything"')
    assert value is None and out == ""
    assert err.startswith("lar: error: no lar engine is open in this notebook; open one with "
                          "`%lar open PATH`")


@pytest.mark.parametrize("line, message", [
    ('%lar search "x" --bogus', "unrecognized arguments: --bogus"),
    ('%lar search "x" --timebox soon', "argument --timebox: cannot read duration 'soon'"),
    ('%lar search "x" --k 0', "argument --k: expected a number >= 1, got 0"),
    ('%lar search "x" --emphasis loud', "argument --emphasis: invalid choice: 'loud'"),
    ("%lar search", "the following arguments are required: query"),
    ("%lar fetch", "the following arguments are required: id"),
    ("%lar frobnicate", "unknown command 'frobnicate'"),
    ("%lar", "say what to do"),
    ('%lar search "unbalanced', "cannot read the line: No closing quotation"),
    ("%lar search '{\"grep\": }'", "the query looks like JSON but is not valid"),
    ("%lar trace begin x", "argument action: invalid choice: 'begin'"),
    ("%%lar search \"q\" --k 2\nfoo", "with %%lar the first line holds flags only"),
])
def test_a_wrong_flag_prints_usage_and_no_traceback(shell, line, message):
    value, out, err = run(shell, line)
    assert value is None
    assert re.search(r"^usage: %lar", err, re.M), err
    assert f"%lar: error: {message}" in err


def test_help_lists_the_commands_and_a_command_its_flags(shell):
    _, out, err = run(shell, "%lar help")
    for cmd in ("open", "status", "search", "anytime", "fetch", "explain", "build", "eval",
                "trace", "replay", "defaults", "close"):
        assert cmd in out
    _, out, err = run(shell, "%lar search --help")
    assert err == "" and "--timebox" in out and "--fusion" in out and "--as AS_NAME" in out


def test_search_binds_a_rich_result(opened):
    value, out, err = run(opened, f'%lar search "{QUERY}" --layers grep --k 5 --timebox 5s')
    assert err == ""
    res = opened.user_ns["_lar"]
    assert value is res and isinstance(res, Results) and lar_magics.SESSION.last is res
    df = res.to_polars()
    assert df.select("path", "line_start", "line_end", "signals", "rank_grep").rows() == [
        ("docs/fusion.md", 3, 3, ["grep"], 1), ("docs/fusion.md", 1, 1, ["grep"], 2)]
    assert df["excerpt"][0] == LINE3
    assert [r.state.value for r in res.runs if r.name == "grep"] == ["ran"]
    # --as binds another name; --json prints the CLI's JSON
    run(opened, f'%lar search "{QUERY}" --layers grep --k 1 --as found')
    assert len(opened.user_ns["found"]) == 1
    value, out, _ = run(opened, f'%lar search "{QUERY}" --layers grep --k 1 --json')
    doc = json.loads(out)
    assert value is None and doc["schema"] == 1 and doc["hits"][0]["path"] == "docs/fusion.md"


def test_static_html_of_the_results_highlights_the_matches(opened):
    run(opened, f'%lar search "{QUERY}" --layers grep --k 5 --timebox 5s')
    res = opened.user_ns["_lar"]
    page = res._repr_html_()
    assert page.count("class='lar-card'") == 2
    assert ("<mark class='lar-mark' title='grep'>Reciprocal rank fusion</mark> adds 1/(c + "
            "<mark class='lar-mark' title='grep'>rank</mark>) over the lists") in page
    assert "<span class='lar-loc'>docs/fusion.md:3</span>" in page
    assert ">grep #1 <span class='lar-lscore'>" in page and ">grep #2 <span class='lar-lscore'>" in page
    # outside a kernel the bundle has no live widget, only text and HTML
    assert set(res._repr_mimebundle_()) == {"text/plain", "text/html"}


def test_fetch_magic(opened):
    run(opened, f'%lar search "{QUERY}" --layers grep --k 5')
    value, out, err = run(opened, "%lar fetch {_lar.hits[0].id} --context 1")
    f = opened.user_ns["_lar_fetched"]
    assert value.obj is f and err == ""
    assert f.text == LINE3 and f.lines == (3, 3) and f.context_lines == (2, 4)
    assert repr(value).startswith("docs/fusion.md:3-3 (")
    _, out, err = run(opened, "%lar fetch 0123456789ab:1-2")
    assert err.startswith("lar: error: ")


def test_status_magic(opened):
    value, out, err = run(opened, "%lar status")
    assert value.obj.layer("grep").coverage == 1.0 and value.obj.layer("bm25").coverage == 0.0
    assert repr(value).startswith("root ") and "<table class='lar-runs lar-coverage'>" in value._repr_html_()
    value, out, _ = run(opened, "%lar status --json")
    assert json.loads(out)["units"] == 6


def test_cell_magic_layer_mapping_is_one_search(opened):
    value, _, err = run(opened, '%%lar --k 5 --layers grep,names\ngrep: timebox\nnames: "*.md"\n')
    assert err == "" and isinstance(value, Results)
    assert value.query == {"grep": "timebox", "names": "*.md"}
    ran = {r.name for r in value.runs if r.state.value == "ran"}
    assert ran == {"grep", "names"}


def test_cell_magic_several_queries(opened):
    value, _, err = run(opened, "%%lar --k 2 --layers grep --as several\n# comment\ntimebox\n\nfusion\n")
    assert isinstance(value, ResultsList) and opened.user_ns["several"] is value
    assert [r.query for r in value] == ["timebox", "fusion"]
    df = value.to_polars()
    assert df.columns[0] == "query" and df["query"].to_list() == ["timebox"] * 2 + ["fusion"] * 2
    assert df.filter(df["query"] == "fusion")["path"].to_list() == ["docs/fusion.md"] * 2


def test_defaults_go_before_every_search(opened):
    _, out, _ = run(opened, "%lar defaults --layers grep --k 1")
    assert out == "lar: search defaults: --layers grep --k 1\n"
    res, _, _ = run(opened, f'%lar search "{QUERY}"')
    assert len(res) == 1 and {r.name for r in res.runs if r.state.value == "ran"} == {"grep"}
    res, _, _ = run(opened, f'%lar search "{QUERY}" --k 2')  # a flag given wins
    assert len(res) == 2
    _, out, _ = run(opened, "%lar defaults --reset")
    assert out == "lar: search defaults: (none)\n"


def test_build_magic_reports_each_layer(opened):
    _, out, err = run(opened, "%lar build --timebox 60s --layers bm25,trigram --as built")
    assert err == ""
    assert re.search(r"^  bm25 +ran +ok +5 +skipped +0 +failed +0 +pending +0 +coverage 100%$", out, re.M)
    assert opened.user_ns["built"]["layers"]["trigram"]["coverage"] == 1.0


def test_trace_magic_records_calls_as_magic(opened, tmp_path):
    path = tmp_path / "trace.jsonl"
    _, out, _ = run(opened, f"%lar trace start {path}")
    assert out.startswith(f"lar: recording calls to {path}")
    run(opened, f'%lar search "{QUERY}" --layers grep --k 2')
    run(opened, "%lar trace stop")
    records = [json.loads(x) for x in path.read_text().splitlines()]
    searches = [r for r in records if r["call"] == "search"]
    assert len(searches) == 1 and searches[0]["source"] == "magic"
    assert len(searches[0]["returned_ids"]) == 2


def test_explain_needs_a_search(opened):
    _, _, err = run(opened, "%lar explain 0123456789ab:0-10")
    assert err == ("lar: error: explain needs the search the hit came from: run %lar search "
                   "first, or pass --result NAME\n")
    _, _, err = run(opened, "%lar explain 0123456789ab:0-10 --result nothing_here")
    assert err == "lar: error: no variable 'nothing_here' holds a search result\n"


def test_eval_magic_with_bad_arguments_prints_usage(shell):
    _, out, err = run(shell, "%lar eval beir")
    assert "usage: python -m lar_evals beir" in err and "lar: eval exited with status 2" in err


def test_open_with_bad_input_says_what_is_wrong(shell, tmp_path):
    _, _, err = run(shell, f"%lar open {tmp_path / 'missing'}")
    assert err == (f"lar: error: {str(tmp_path / 'missing')!r} is not a folder; give lar.open() a "
                   "directory to search\n")
    _, _, err = run(shell, f"%lar open {tmp_path} --config '{{nope'")
    assert err.startswith("lar: error: --config is not valid JSON: ")
    _, _, err = run(shell, f"%lar open {tmp_path} --config no-such-file.json")
    assert err.startswith("lar: error: --config 'no-such-file.json': give a JSON object")
    assert lar_magics.SESSION.engine is None


def test_close_and_use(opened, corpus, tmp_path):
    _, out, _ = run(opened, "%lar close")
    assert out == f"lar: closed {corpus.resolve()}\n"
    _, _, err = run(opened, '%lar search "x"')
    assert "%lar open PATH" in err
    with lar.open(corpus, state=tmp_path / "state2") as eng:
        lar_magics.use(eng)
        res, _, _ = run(opened, f'%lar search "{QUERY}" --layers grep --k 1')
        assert len(res) == 1
        run(opened, "%lar close")  # an attached engine is not closed by %lar close
        assert len(eng.search(QUERY, layers=["grep"], k=1)) == 1


def test_open_demo_in_a_workdir(shell, tmp_path):
    _, out, err = run(shell, f"%lar open --demo --workdir {tmp_path}")
    corpus = tmp_path / ".lar-demo" / "corpus"
    assert err == "" and out.startswith(f"lar: opened {corpus}")
    assert (corpus / "prose" / "exact-and-semantic-search.md").is_file()
    _, _, err = run(shell, "%lar open")
    assert "%lar: error: which folder? %lar open PATH (or %lar open --demo)" in err
