"""lar.core.sqlite_deadline: a long SQLite statement is abandoned at the deadline."""
from __future__ import annotations

import sqlite3
import time

import pytest

from lar.core.budget import Budget
from lar.core.sqlite_deadline import Interrupted, interrupt_at

LONG = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000000) "
        "SELECT count(*) FROM c")


def test_a_long_statement_stops_at_the_deadline():
    conn = sqlite3.connect(":memory:")
    deadline = time.monotonic() + 0.05
    with pytest.raises(Interrupted):
        with interrupt_at(conn, lambda: time.monotonic() >= deadline):
            conn.execute(LONG).fetchall()
    # the handler is gone afterwards: the connection works as before
    assert conn.execute("SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                        "SELECT x + 1 FROM c WHERE x < 50000) SELECT x FROM c)").fetchone() == (50000,)


def test_before_the_deadline_a_statement_finishes_and_other_errors_pass():
    conn = sqlite3.connect(":memory:")
    with interrupt_at(conn, lambda: False):
        assert conn.execute("SELECT 40 + 2").fetchone() == (42,)
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        with interrupt_at(conn, lambda: False):
            conn.execute("SELECT * FROM nowhere")


def test_trigram_returns_partial_when_its_match_is_cut(corpus, tmp_path):
    import asyncio

    import lar

    eng = lar.open(corpus, state=tmp_path / "state")
    try:
        eng.build(timebox=30, layers=["trigram"])
        layer, view = eng.layers["trigram"], eng.scope_view()
        live = Budget(time.monotonic() + 30)
        assert asyncio.run(layer.search("parse_deadline", view, live))
        assert not live.partial
        gone = Budget(time.monotonic() - 1)  # expired: the match is interrupted at once
        assert asyncio.run(layer.search("parse_deadline", view, gone)) == []
        assert gone.partial
        assert "the trigram match was interrupted at the deadline" in gone.report().notes
    finally:
        eng.close()
