"""Deferred per-hit work (issue 26): a search whose layers return light hits and complete only
the hits it returns gives exactly the hits of the previous path, where every layer built full
hits for its whole pool. The previous hit builders are kept here, verbatim, as the reference."""
from __future__ import annotations

import numpy as np
import pytest

from lar.core.budget import Budget
from lar.core.fasthit import layer_hit
from lar.core.types import Hit, Span
from lar.engine import finishing
from lar.layers import bm25 as bm25_mod
from lar.layers.kits.lexical.chunks import Highlighter
from lar.layers.late import explain
from lar.layers.late import layer as late_layer_mod


# -- the previous hit builders (before issue 26), the reference ------------------------------
def old_bm25_hits(self, text, results, budget, paths):
    marker = Highlighter(*self.tokenizer.surface(text))
    texts = {}
    hits = []
    kind = self.score_kind
    for score, h, s, e in results:
        if budget.expired():
            budget.mark_partial()
            break
        if h not in texts:
            try:
                texts[h] = self.ctx.reader.unit_text(h, paths.get(h))
            except Exception:
                texts[h] = None
        data = texts[h]
        if data is None or e > len(data):
            continue
        subs = marker.find(data, s, e) if len(hits) < bm25_mod.SUBSPAN_HITS else []
        hits.append(layer_hit(self.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                              score_kind=kind, query=text, sub_spans=subs))
    budget.offer(hits)
    return hits


def old_localise(text, chunk, matches, mass=explain.LOCALISE_MASS):
    cs, ce = chunk
    sents = explain.sentence_spans(text, cs, ce)
    if len(sents) <= 1:
        return explain._strip(text, cs, ce) if ce > cs else (cs, ce)
    starts = np.array([s for s, _ in sents])
    weight = np.zeros(len(sents))
    for m in matches:
        if m.contribution > 0:
            j = int(np.searchsorted(starts, m.start, side="right")) - 1
            weight[max(j, 0)] += m.contribution
    total = weight.sum()
    if total <= 0:
        return explain._strip(text, cs, ce)
    need = mass * total - 1e-12
    prefix = np.concatenate([[0.0], np.cumsum(weight)])
    best = None
    j = 0
    for i in range(len(sents)):
        j = max(j, i)
        while j < len(sents) and prefix[j + 1] - prefix[i] < need:
            j += 1
        if j == len(sents):
            break
        key = (j - i, sents[j][1] - sents[i][0])
        if best is None or key < best[0]:
            best = (key, i, j)
    if best is None:
        return explain._strip(text, cs, ce)
    s, e = explain._strip(text, sents[best[1]][0], sents[best[2]][1])
    return (s, e) if e > s else (cs, ce)


def old_late_hits(layer, lq, qe, q, w, res, paths, budget):
    from lar.maxsim.common import to_f32

    hits = []
    texts = {}
    kind = f"MaxSim: sum over query tokens of weight x best cosine ({layer.shared.encoder.model_id})"
    for score, h, c in res.top:
        try:
            enc = layer.load(h)
            if h not in texts:
                texts[h] = layer.ctx.reader.unit_text(h, paths.get(h))
        except Exception:
            continue
        text = texts[h]
        a, b = enc.chunk_rows(c)
        if enc.token_scales is not None:
            x = enc.tokens_f32(a, b)
        else:
            x = to_f32(np.ascontiguousarray(enc.tokens[a:b]))
        sims = x @ q.T
        best = sims.argmax(axis=0)
        sim_max = sims[best, np.arange(sims.shape[1])]
        matches = explain.token_matches(qe.token_texts, w, w * sim_max, best, sim_max, a,
                                        enc.token_spans, text)
        cs, ce = (int(x) for x in enc.chunk_spans[c])
        ce = min(ce, len(text))
        s, e = old_localise(text, (cs, ce), matches) if layer.options["localise"] else (cs, ce)
        subs = sorted({(m.start, m.end) for m in matches if m.contribution > 0 and s <= m.start
                       and m.end <= e and m.end > m.start})
        details = {"chunk": [cs, ce], "score_mean": score / float(w.sum()),
                   "tokens": [m.to_dict() for m in matches]}
        hits.append(Hit.single(layer.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                               score_kind=kind, query=lq.to_dict(), sub_spans=subs,
                               details=details))
    budget.offer(hits)
    return hits


def reference(monkeypatch, eng, *a, **kw):
    """``eng.search(*a, **kw)`` through the previous path: full hits for every layer's pool."""
    with monkeypatch.context() as m:
        m.setattr(finishing, "DEFER", False)
        m.setattr(bm25_mod.BM25Layer, "_hits", old_bm25_hits)
        m.setattr(late_layer_mod, "late_hits", old_late_hits)
        return eng.search(*a, **kw)


def assert_same(lazy, ref):
    assert [h.id for h in lazy.hits] == [h.id for h in ref.hits]
    assert [h.score for h in lazy.hits] == [h.score for h in ref.hits]
    for a, b in zip(lazy.hits, ref.hits):
        for layer in b.evidence:  # field by field first, for a readable failure
            ea, eb = a.evidence[layer], b.evidence[layer]
            assert (ea.rank, ea.score, ea.sub_spans, ea.evalue, ea.p_value) == \
                (eb.rank, eb.score, eb.sub_spans, eb.evalue, eb.p_value), (layer, a.id)
            assert dict(ea.details) == dict(eb.details), (layer, a.id)
        assert a == b
    assert lazy.hits == ref.hits


QUERIES = ["timebox deadline", "reciprocal rank fusion", "fusion of ranked lists", "café",
           "parse the deadline"]


@pytest.fixture
def bm25_engine(engine):
    engine.build(timebox=60, layers=["bm25"])
    return engine


@pytest.mark.parametrize("k", [1, 3, 20])
def test_bm25_lazy_hits_equal_the_full_pool_path(bm25_engine, monkeypatch, k):
    monkeypatch.setattr(bm25_mod, "SUBSPAN_HITS", 2)  # the past-the-cut rule is exercised too
    for q in QUERIES:
        lazy = bm25_engine.search(q, layers=["bm25"], k=k, timebox=30)
        ref = reference(monkeypatch, bm25_engine, q, layers=["bm25"], k=k, timebox=30)
        assert_same(lazy, ref)
    assert any(ev.sub_spans for h in lazy.hits for ev in h.evidence.values())


def test_bm25_pool_stays_light_and_only_returned_hits_are_completed(bm25_engine):
    res = bm25_engine.search("deadline timebox fusion rank", layers=["bm25"], k=1, timebox=30)
    pool = res.layer_hits["bm25"]
    assert len(pool) > 1 and res.hits[0].evidence["bm25"].sub_spans
    assert not any(h.evidence["bm25"].sub_spans for h in pool)  # nothing marked for the pool


def test_a_layer_run_directly_returns_full_hits(bm25_engine):
    import asyncio

    layer = bm25_engine.layers["bm25"]
    hits = asyncio.run(layer.search("deadline", bm25_engine.scope_view(), Budget.seconds(30)))
    assert hits and hits[0].evidence["bm25"].sub_spans
    budget = Budget.seconds(30, deferred=True)
    light = asyncio.run(layer.search("deadline", bm25_engine.scope_view(), budget))
    assert [h.id for h in light] == [h.id for h in hits] and not light[0].evidence["bm25"].sub_spans
    assert budget.finisher(light[0]) == hits[0].evidence["bm25"]


@pytest.mark.slow
def test_late_and_fused_lazy_hits_equal_the_full_pool_path(engine, monkeypatch):
    engine.build(timebox=300, layers=["bm25", "late", "trigram"])
    for q in QUERIES:
        for kw in ({"layers": ["late"], "k": 3}, {"layers": ["late"], "k": 50},
                   {"layers": ["bm25", "late", "trigram"], "k": 5}, {"k": 5}):
            lazy = engine.search(q, timebox=60, **kw)
            ref = reference(monkeypatch, engine, q, timebox=60, **kw)
            assert all(r.state.value != "aborted" for r in lazy.runs)
            assert_same(lazy, ref)
            if "late" in {s for h in lazy.hits for s in h.signals}:
                assert any(h.evidence["late"].details.get("tokens") for h in lazy.hits
                           if "late" in h.evidence)
