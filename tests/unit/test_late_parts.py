"""The late layer's model-free parts: query weights, scanning in blocks, localisation."""
import numpy as np
import pytest

from lar.core.errors import QueryError
from lar.layers.late.explain import localise, sentence_spans, token_matches
from lar.layers.late.query import LateQuery, parse_late_query, token_weights
from lar.layers.late.scan import scan_units
from lar.maxsim import explain, maxsim_numpy
from lar.encoders.encoding import UnitEncoding


def _unit(rng, sizes, dim=8, model="m"):
    n = sum(sizes)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
    spans = np.stack([np.arange(n) * 4, np.arange(n) * 4 + 3], axis=1).astype(np.int64)
    chunks = np.stack([starts * 4, (starts + np.array(sizes)) * 4], axis=1).astype(np.int64)
    return UnitEncoding(model, "1", x.astype(np.float16), spans, starts, chunks)


def test_query_forms_and_weight_errors():
    assert parse_late_query("fusion") == LateQuery("fusion")
    q = parse_late_query({"text": "rank fusion", "weights": {"fusion": 2}, "min_score": 0.2})
    assert q.weights == {"fusion": 2.0} and q.min_score == 0.2
    for bad in ("", {"text": ""}, {"text": "a", "weights": {"a": -1}}, {"text": "a", "bogus": 1},
                {"text": "a", "weights": "x"}, {"text": "a", "min_score": 3}, 42):
        with pytest.raises(QueryError):
            parse_late_query(bad)


def test_token_weights_by_word_piece_and_list():
    texts = ("rank", "fu", "##sion", "rules")
    spans = ((0, 4), (5, 7), (7, 11), (12, 17))
    q = LateQuery("rank fusion rules", {"Fusion": 3.0, "rules": 0.0})
    assert token_weights(q, texts, spans).tolist() == [1.0, 3.0, 3.0, 0.0]
    q = LateQuery("rank fusion rules", {"##sion": 2.0})
    assert token_weights(q, texts, spans).tolist() == [1.0, 1.0, 2.0, 1.0]
    assert token_weights(LateQuery("x", (1, 0, 2, 1)), texts, spans).tolist() == [1, 0, 2, 1]
    with pytest.raises(QueryError, match="4 tokens"):
        token_weights(LateQuery("x", (1, 2)), texts, spans)
    with pytest.raises(QueryError, match="neither a word"):
        token_weights(LateQuery("rank fusion rules", {"absent": 2}), texts, spans)
    with pytest.raises(QueryError, match="weight 0"):
        token_weights(LateQuery("x", (0, 0, 0, 0)), texts, spans)


def test_scan_matches_numpy_reference_and_keeps_best_k():
    rng = np.random.default_rng(3)
    units = {f"{i:032x}": _unit(rng, list(rng.integers(1, 30, size=rng.integers(1, 6))))
             for i in range(40)}
    q = rng.standard_normal((5, 8)).astype(np.float32)
    w = np.array([1, 0.5, 0, 2, 1], dtype=np.float32)
    ref = []
    for h, e in units.items():
        sc = maxsim_numpy(q, e.tokens, e.chunk_starts, w)
        ref += [(float(s), h, c) for c, s in enumerate(sc)]
    ref.sort(key=lambda t: (-t[0], t[1], t[2]))
    res = scan_units(q, w, list(units), units.get, 7, block_tokens=100)
    assert [(h, c) for _, h, c in res.top] == [(h, c) for _, h, c in ref[:7]]
    assert np.allclose([s for s, _, _ in res.top], [s for s, _, _ in ref[:7]], atol=1e-5)
    assert res.blocks > 1 and sorted(res.scanned) == sorted(units) and not res.aborted
    # min_score: only chunks at or above the floor
    floor = ref[3][0]
    res = scan_units(q, w, list(units), units.get, 50, min_score=floor)
    assert len(res.top) == 4


def test_scan_aborts_between_blocks_and_records_unreadable():
    rng = np.random.default_rng(4)
    units = {f"{i:032x}": _unit(rng, [20, 20]) for i in range(10)}
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 2

    def load(h):
        if h.endswith("5"):
            raise LookupError("corrupt sidecar")
        return units[h]

    q = rng.standard_normal((3, 8)).astype(np.float32)
    res = scan_units(q, np.ones(3, np.float32), list(units), load, 5, should_stop=stop,
                     block_tokens=40)
    assert res.aborted and 0 < len(res.scanned) < 10
    assert all(h in res.scanned for _, h, _ in res.top)
    res = scan_units(q, np.ones(3, np.float32), list(units), load, 5)
    assert [h for h, _ in res.unreadable] == [f"{5:032x}"] and len(res.scanned) == 9


def test_sentences_tile_and_localise_picks_the_matching_sentence():
    text = b"Intro words here. The parser reads tokens quickly. Unrelated closing remark.\n"
    sents = sentence_spans(text, 0, len(text))
    assert b"".join(text[s:e] for s, e in sents) == text
    assert [text[s:e].strip() for s, e in sents][1] == b"The parser reads tokens quickly."
    p = text.index(b"parser")
    t = text.index(b"tokens")
    rows = np.array([[p, p + 6], [t, t + 6], [0, 5]])
    contrib, argmax, sim = np.array([0.9, 0.8, 0.1]), np.array([0, 1, 2]), np.array([0.9, 0.8, 0.1])
    ms = token_matches(["parse", "token", "intro"], [1, 1, 1], contrib, argmax, sim, 0, rows, text)
    assert ms[0].doc_token == "parser" and ms[1].start == t
    s, e = localise(text, (0, len(text)), ms)
    assert text[s:e] == b"The parser reads tokens quickly."
    # nothing positive: the whole chunk, stripped
    neg = token_matches(["x"], [1], np.array([-0.2]), np.array([0]), np.array([-0.2]), 0, rows, text)
    assert localise(text, (0, len(text)), neg) == (0, len(text) - 1)


def test_explanation_contributions_sum_to_the_scan_score():
    rng = np.random.default_rng(5)
    e = _unit(rng, [12, 9])
    q = rng.standard_normal((4, 8)).astype(np.float32)
    w = np.array([1, 2, 0, 1], dtype=np.float32)
    res = scan_units(q, w, ["a" * 32], {"a" * 32: e}.get, 2)
    for score, _, c in res.top:
        a, b = e.chunk_rows(c)
        ex = explain(q, e.tokens_f32(a, b), w)
        assert abs(float(np.sum(ex.contrib)) - score) < 1e-4


def test_out_of_memory_block_is_a_clear_error(monkeypatch):
    import lar.layers.late.scan as scan
    from lar.core.errors import ConfigError

    rng = np.random.default_rng(6)
    units = {"b" * 32: _unit(rng, [10, 10])}

    def boom(*a, **k):
        raise MemoryError()

    monkeypatch.setattr(scan, "maxsim", boom)
    with pytest.raises(ConfigError, match="lower the layer's block_tokens"):
        scan.scan_units(np.ones((2, 8), np.float32), np.ones(2, np.float32), list(units),
                        units.get, 3)


def test_arena_blocks_are_views_not_copies():
    from dataclasses import replace

    from lar.layers.late.arena import TokenArena
    from lar.layers.late.scan import _adjacent_view, _block_matrix

    rng = np.random.default_rng(7)
    arena = TokenArena()
    encs = [_unit(rng, [5, 3]) for _ in range(4)]
    held = [replace(e, tokens=arena.add(e.tokens)) for e in encs]
    block, copied = _block_matrix(held)
    assert np.shares_memory(block, arena.segments[0]) and block.shape[0] == 32 and not copied
    assert np.array_equal(block, np.concatenate([e.tokens for e in encs]))
    assert _adjacent_view(held[::-1]) is None  # out of order: gathered by copy instead
    gathered, copied = _block_matrix(held[::-1])
    assert not np.shares_memory(gathered, arena.segments[0]) and copied
    assert _adjacent_view(encs) is None  # separate arrays


def test_scan_order_puts_candidates_first_then_the_arena_in_its_order():
    from lar.layers.late.order import scan_order

    hashes = {"a", "b", "c", "d", "e", "f"}
    resident = {"e": 0, "b": 1, "d": 2}  # the arena holds e, b, d back to back
    usage = {"a": (0, 1, 0.0), "c": (5, 0, 0.0), "d": (9, 9, 0.0)}
    paths = {"a": "z.txt", "c": "y.txt", "f": "a.txt"}
    order = scan_order(hashes, ["d", "x", "d"], resident, usage, paths)
    # candidates (unknown and repeated ones dropped), then e, b in arena order, then by usage
    # (c: 5 hits, a: one fetch = 3), then by path
    assert order == ["d", "e", "b", "c", "a", "f"]


def test_a_scan_in_arena_order_copies_nothing():
    from dataclasses import replace

    from lar.layers.late.arena import TokenArena

    rng = np.random.default_rng(3)
    arena = TokenArena()
    units = {f"{i:032x}": replace(e, tokens=arena.add(e.tokens))
             for i, e in enumerate(_unit(rng, [4, 6]) for _ in range(12))}
    q, w = np.ones((2, 8), np.float32), np.ones(2, np.float32)
    in_order = scan_units(q, w, list(units), units.get, 5, block_tokens=400)
    shuffled = scan_units(q, w, list(units)[::-1], units.get, 5, block_tokens=400)
    assert in_order.gathered == 0 and in_order.blocks == 1
    assert shuffled.gathered == 120  # every block of the reversed order was copied
    assert [t[1:] for t in in_order.top] == [t[1:] for t in shuffled.top]


def test_scan_collects_the_moments_of_every_chunk_score():
    rng = np.random.default_rng(5)
    units = {f"{i:032x}": _unit(rng, list(rng.integers(1, 30, size=rng.integers(1, 6))))
             for i in range(30)}
    q = rng.standard_normal((4, 8)).astype(np.float32)
    w = np.array([1, 0.5, 2, 1], dtype=np.float32)
    every = np.concatenate([maxsim_numpy(q, e.tokens, e.chunk_starts, w) for e in units.values()])
    res = scan_units(q, w, list(units), units.get, 3, block_tokens=100)
    bg = res.moments.result()
    assert bg.n == every.shape[0] and res.blocks > 1
    assert bg.mean == pytest.approx(float(every.mean()), abs=1e-4)
    assert bg.std == pytest.approx(float(every.std()), rel=1e-4)


def test_a_scan_across_arena_segments_still_copies_nothing():
    from dataclasses import replace

    from lar.layers.late.arena import MIN_SEGMENT_ROWS, TokenArena

    rng = np.random.default_rng(4)
    arena = TokenArena()
    units = {f"{i:032x}": replace(e, tokens=arena.add(e.tokens))
             for i, e in enumerate(_unit(rng, [300, 400]) for _ in range(30))}
    assert len(arena.segments) == 2 and MIN_SEGMENT_ROWS // 700 == 23  # unit 23 opens segment 2
    q, w = np.ones((2, 8), np.float32), np.ones(2, np.float32)
    in_order = scan_units(q, w, list(units), units.get, 5, block_tokens=65536)
    shuffled = scan_units(q, w, list(units)[::-1], units.get, 5, block_tokens=65536)
    assert in_order.gathered == 0 and in_order.tokens == 30 * 700
    assert shuffled.gathered > 0
    assert [t[1:] for t in in_order.top] == [t[1:] for t in shuffled.top]
