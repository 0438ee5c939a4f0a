"""The late layer's hits: each scored chunk with its per-query-token evidence and its span
localised to the sentences carrying the match (``lar.layers.late.explain``).

Every hit of the pool gets its localised span here (fusion groups by span), from the products
of its chunk's tokens with the query's, one small product a chunk as before (on one BLAS thread:
the same values, without a multi-threaded BLAS's start-up cost on matrices this small). The
per-token explanation (``details``) and the matched tokens (``sub_spans``) are the deferred part
(:mod:`lar.core.deferred`): :class:`Explanations` builds them for the hits the search returns.
"""
from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np

from lar.core.fasthit import layer_hit
from lar.core.types import Hit, Span
from lar.layers.late.explain import localise_weights, sentence_spans, token_dicts

__all__ = ["Explanations", "late_hits"]


def one_blas_thread():
    """A context with BLAS on one thread (threadpoolctl, when installed; else nothing). The
    limit is the process's: a numpy product another thread runs meanwhile runs on one thread
    too (the same values, for the few milliseconds this lasts)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an optimisation only: the values are the same either way
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


class Explanations:
    """The deferred evidence of the late hits of one search: per hit, what its localisation
    computed (the matched row and similarity of each query token), turned into ``details`` and
    ``sub_spans`` on request."""

    def __init__(self, layer, qe, w):
        self.name = layer.name
        self.tokens = [str(t) for t in qe.token_texts]
        self.w = w
        self.w_sum = float(w.sum())
        self.state: dict[Span, tuple] = {}

    def keep(self, span: Span, *state) -> None:
        self.state.setdefault(span, state)  # the first hit of a span is the one fusion keeps

    def __call__(self, hit: Hit):
        got = self.state.get(hit.span)
        if got is None:
            return None
        score, rows, sim_max, contrib, token_spans, text, cs, ce = got
        ev = hit.evidence[self.name]
        s, e = hit.span.start, hit.span.end
        toks, subs = token_dicts(self.tokens, self.w, contrib, sim_max, rows, token_spans, text, s, e)
        details = {"chunk": [cs, ce], "score_mean": score / self.w_sum, "tokens": toks}
        return replace(ev, sub_spans=tuple(subs), details=details)


#: sentence spans per unit text and chunk: they depend on the text only, and the same units come
#: back query after query (cleared when full; the key holds the text's hash, which bytes cache,
#: for a unit whose extracted text differs by path)
SENTENCES: dict[tuple, list[tuple[int, int]]] = {}
SENTENCES_MAX = 50_000
BATCH_ROWS = 8192  # token rows converted to float32 at a time, into one reused buffer


def _sentences(h: str, text: bytes, cs: int, ce: int) -> list[tuple[int, int]]:
    key = (h, len(text), hash(text), cs, ce)
    got = SENTENCES.get(key)
    if got is None:
        if len(SENTENCES) >= SENTENCES_MAX:
            SENTENCES.clear()
        got = SENTENCES[key] = sentence_spans(text, cs, ce)
    return got


def _pool_rows(layer, res, paths):
    """``(score, hash, chunk, encoding, text, a, b)`` of each top chunk still readable, in
    batches of about ``BATCH_ROWS`` token rows."""
    texts: dict[str, bytes] = {}
    batch, rows = [], 0
    for score, h, c in res.top:
        try:
            enc = layer.load(h)
            if h not in texts:
                texts[h] = layer.ctx.reader.unit_text(h, paths.get(h))
        except Exception:  # vanished since the scan
            continue
        a, b = enc.chunk_rows(c)
        batch.append((score, h, c, enc, texts[h], a, b))
        rows += b - a
        if rows >= BATCH_ROWS:
            yield batch
            batch, rows = [], 0
    if batch:
        yield batch


def _as_f32(batch, buf: list):
    """Each item's token rows as float32: one conversion for the batch's float16 rows (exact,
    element by element: the same values as one chunk at a time), int8 rows scaled back."""
    from lar.maxsim.common import to_f32

    out: list = [None] * len(batch)
    plain = [i for i, it in enumerate(batch) if it[3].token_scales is None]
    for i, (_, _, _, enc, _, a, b) in enumerate(batch):
        if enc.token_scales is not None:
            out[i] = enc.tokens_f32(a, b)
    if plain:
        parts = [batch[i][3].tokens[batch[i][5]:batch[i][6]] for i in plain]
        if all(p.dtype == parts[0].dtype for p in parts):
            joined = np.concatenate(parts)
            if buf and (buf[0].shape[0] < len(joined) or buf[0].shape[1:] != joined.shape[1:]):
                buf.clear()
            if not buf:
                buf.append(np.empty((max(len(joined), BATCH_ROWS),) + joined.shape[1:], np.float32))
            big = to_f32(joined, buf[0])
            off = 0
            for i, p in zip(plain, parts):
                out[i] = big[off:off + len(p)]
                off += len(p)
        else:
            for i, p in zip(plain, parts):
                out[i] = to_f32(np.ascontiguousarray(p))
    return out


def late_hits(layer, lq, qe, q, w, res, paths, budget) -> list[Hit]:
    """The hits of the scan result ``res`` of ``layer`` (best first), offered to ``budget``."""
    hits: list[Hit] = []
    kind = f"MaxSim: sum over query tokens of weight x best cosine ({layer.shared.encoder.model_id})"
    finish = Explanations(layer, qe, w)
    cols = np.arange(q.shape[0])
    localise = layer.options["localise"]
    buf: list = []  # the float32 rows of the current batch (only its items' views read them)
    with one_blas_thread():
        for batch in _pool_rows(layer, res, paths):
            for (score, h, c, enc, text, a, b), x in zip(batch, _as_f32(batch, buf)):
                sims = x @ q.T  # (chunk tokens, query tokens): the products the scan maxed over
                best = sims.argmax(axis=0)
                sim_max = sims[best, cols]
                contrib = w * sim_max
                rows = a + best
                cs, ce = (int(v) for v in enc.chunk_spans[c])
                ce = min(ce, len(text))
                if localise:
                    s, e = localise_weights(text, (cs, ce), enc.token_spans[rows, 0], contrib,
                                            sents=_sentences(h, text, cs, ce))
                else:
                    s, e = cs, ce
                span = Span(h, s, e)
                finish.keep(span, score, rows, sim_max, contrib, enc.token_spans, text, cs, ce)
                hits.append(layer_hit(layer.name, span, rank=len(hits) + 1, score=score,
                                      score_kind=kind, query=lq.to_dict()))
    hits = budget.settle(layer.name, hits, finish)
    budget.offer(hits)
    return hits
