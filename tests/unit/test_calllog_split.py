"""The call log counts texts piece by piece, each distinct piece once (issue 26): the pieces
join to the text, and their counts add up to the count of the whole text."""
import json

import pytest

import lar
from lar.record import calllog
from lar.record.calllog import _load_tokenizer, count_tokens
from lar.record.split_count import PieceCounter, additive, pieces

ODD = ["plain words and more words", "tab\there \"quoted\" back\\slash\nnew line",
       "\u0301combining first, café naïve, ﬁ ligature, ÅNGSTRÖM", "東京 and 中文字 mixed", "emoji 🙂🙂 x",
       "control \x07 bell \x00 nul", "x" * 130 + " long word", "under_score camelCase 3.14e-5", "",
       '"', '""', 'ends with a quote"', "a408d90810d3acd38cb631c3ed3c2293:0-51"]


def _many(texts):
    return [count_tokens(t) for t in texts]


def test_counts_add_up_over_cuts_after_quotes():
    assert additive(_load_tokenizer())
    doc = {"hits": [{"id": f"h{i}", "text": t, "excerpt": t[:5]} for i, t in enumerate(ODD)]}
    texts = [json.dumps(doc, ensure_ascii=False), json.dumps(doc), " ".join(ODD), "".join(ODD),
             '"' * 7, 'no quote at all', '"leading', 'trailing"']
    counter = PieceCounter()
    for whole in texts:
        assert "".join(pieces(whole)) == whole
        n = counter.count(whole, _many)
        assert n == count_tokens(whole), whole[:60]
        assert counter.count(whole, _many) == n  # from the kept counts


def test_the_cache_starts_over_when_full():
    counter = PieceCounter(limit_chars=50)
    whole = json.dumps({"a": "x" * 40, "b": "y" * 40, "c": ODD})
    assert counter.count(whole, _many) == counter.count(whole, _many) == count_tokens(whole)
    assert counter._chars <= 50 + len(whole)


@pytest.fixture()
def odd_corpus(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for i, t in enumerate(ODD):
        (root / f"f{i}.txt").write_text(f"needle {i}\n{t}\nmore \"needle\" text \\ end\n")
    return root


def test_the_call_log_rows_count_what_the_whole_texts_count(odd_corpus, tmp_path):
    with lar.open(odd_corpus, state=tmp_path / "state") as eng:
        eng.build(timebox=60, layers=["bm25"])
        # the second and third from kept counts (elapsed times differ: their own texts)
        results = [eng.search("needle", layers=["bm25"], k=20, timebox=30) for _ in range(3)]
        assert len(results[0].hits) >= 10
        eng.call_log.flush()
        rows = list(eng.call_log._db.execute(
            "SELECT raw_tokens, view_tokens, tokenizer FROM calls WHERE call='search' ORDER BY id"))
        assert [r[0] for r in rows[-3:]] == [count_tokens(eng._one_stage_text(r)) for r in results]
        assert [r[1] for r in rows[-3:]] == [count_tokens(r.to_json()) for r in results]
        assert rows[-1][2] == "all-MiniLM-L6-v2"


def test_without_the_tokenizer_the_whole_text_is_counted(monkeypatch):
    monkeypatch.setattr(calllog, "_tok", {})
    monkeypatch.setattr(calllog, "_load_tokenizer", lambda: None)
    assert calllog._tokens('{"a": "bcd"}') == 3  # ceil(12 / 4)
