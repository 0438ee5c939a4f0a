"""The call log counts a search's one-stage ("raw") text part by part (issue 26): the parts
join to exactly the text it counted before, and their counts add up to the whole text's."""
import json

import pytest

import lar
from lar.record import calllog
from lar.record.calllog import _load_tokenizer, count_tokens
from lar.record.split_count import PartCounter, SplitText, additive

ODD = ["plain words and more words", "tab\there \"quoted\" back\\slash\nnew line",
       "\u0301combining first, café naïve, ﬁ ligature, ÅNGSTRÖM", "東京 and 中文字 mixed", "emoji 🙂🙂 x",
       "control \x07 bell \x00 nul", "x" * 130 + " long word", "under_score camelCase 3.14e-5", ""]


def test_counts_add_up_over_cuts_next_to_quotes():
    tok = _load_tokenizer()
    assert additive(tok)
    doc = {"hits": [{"id": f"h{i}", "text": t, "excerpt": t[:5]} for i, t in enumerate(ODD)]}
    whole = json.dumps(doc, ensure_ascii=False)
    parts, keys = [], []
    at = 0
    for i, t in enumerate(ODD):
        body = json.dumps(t, ensure_ascii=False)[1:-1]
        pos = whole.index('"text": "', at) + len('"text": "')
        parts += [whole[at:pos], body]
        keys += [None, ("k", i)]
        at = pos + len(body)
    parts.append(whole[at:])
    keys.append(None)
    split = SplitText(tuple(parts), tuple(keys))
    assert split.text() == whole
    counter = PartCounter()
    n = counter.count(split, count_tokens, True)
    assert n == count_tokens(whole) > 100
    assert counter.count(split, count_tokens, True) == n  # from the kept counts
    assert counter.count(split, lambda s: len(s), False) == len(whole)  # not additive: joined


@pytest.fixture()
def odd_corpus(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    for i, t in enumerate(ODD[:-1]):
        (root / f"f{i}.txt").write_text(f"needle {i}\n{t}\nmore \"needle\" text \\ end\n")
    return root


def test_a_searchs_raw_text_parts_join_to_the_one_stage_text(odd_corpus, tmp_path):
    with lar.open(odd_corpus, state=tmp_path / "state") as eng:
        eng.build(timebox=60, layers=["bm25"])
        res = eng.search("needle", layers=["bm25"], k=20, timebox=30)
        assert len(res.hits) >= 6  # a file with a NUL byte is binary: not indexed
        split = eng._one_stage_split(res)
        assert split.text() == eng._one_stage_text(res)
        assert sum(k is not None for k in split.keys) == len(res.hits)
        assert calllog._tokens(lambda: split) == count_tokens(eng._one_stage_text(res))


def test_the_call_log_rows_keep_their_raw_counts(odd_corpus, tmp_path):
    with lar.open(odd_corpus, state=tmp_path / "state") as eng:
        eng.build(timebox=60, layers=["bm25"])
        # the second one from the kept counts (its elapsed times differ: its own text)
        results = [eng.search("needle", layers=["bm25"], k=20, timebox=30) for _ in range(2)]
        eng.call_log.flush()
        rows = [r for r in eng.call_log._db.execute(
            "SELECT raw_tokens, view_tokens FROM calls WHERE call='search' ORDER BY id")]
        assert [r[0] for r in rows[-2:]] == [count_tokens(eng._one_stage_text(r)) for r in results]
