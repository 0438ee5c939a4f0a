"""A query too long for the OS to hand to ripgrep (issue 18's note: a 1 MB query made grep fail
with E2BIG, 'Argument list too long') is refused up front with an error that says the limit;
a query at the limit still runs every lexical layer."""
from __future__ import annotations

import pytest

import lar
from lar.apps.cli import main
from lar.core.errors import ConfigError
from lar.core.request import MAX_QUERY_CHARS, SearchRequest, query_chars


def test_a_one_megabyte_query_is_refused_with_the_limit_named(engine):
    with pytest.raises(ConfigError, match=r"1,000,000 characters long; the limit is 32,768"):
        engine.search("x" * 1_000_000, layers=["grep"])


def test_a_mapping_query_counts_all_its_text(engine):
    half = "y" * (MAX_QUERY_CHARS // 2)
    with pytest.raises(ConfigError, match="the limit is"):
        engine.search({"grep": {"pattern": half}, "bm25": half + "z"})
    assert query_chars({"grep": {"pattern": "ab"}, "bm25": ["cd", "e"]}) == 4 + 7 + 2 + 4 + 3


def test_a_query_at_the_limit_runs_every_lexical_layer(engine):
    # multi-byte characters: 32,768 of them are 65,536 bytes, still one argument ripgrep accepts
    for q in ("é" * MAX_QUERY_CHARS, "ab " * (MAX_QUERY_CHARS // 3)):
        assert query_chars(q) <= MAX_QUERY_CHARS
        res = engine.search(q, layers=["grep", "names", "trigram", "bm25"], timebox=10)
        states = {r.name: r.state.value for r in res.runs if r.state.value != "skipped"}
        assert states == {"grep": "ran", "names": "ran", "trigram": "ran", "bm25": "ran"}


def test_the_command_line_says_the_limit_and_exits_2(corpus, tmp_path, capsys):
    rc = main(["search", "q" * (MAX_QUERY_CHARS + 1), "--root", str(corpus),
               "--state", str(tmp_path / "st"), "--layers", "grep"])
    assert rc == 2
    assert "the limit is 32,768" in capsys.readouterr().err


def test_the_request_itself_refuses_it_so_every_entry_point_does():
    with pytest.raises(ConfigError, match="32,769 characters long"):
        SearchRequest(query="a" * (MAX_QUERY_CHARS + 1))
    assert SearchRequest(query="a" * MAX_QUERY_CHARS).query
