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
from lar.layers.late.explain import localise_weights, token_dicts

__all__ = ["Explanations", "late_hits"]


def one_blas_thread():
    """A context with BLAS on one thread (threadpoolctl, when installed; else nothing)."""
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


def late_hits(layer, lq, qe, q, w, res, paths, budget) -> list[Hit]:
    """The hits of the scan result ``res`` of ``layer`` (best first), offered to ``budget``."""
    from lar.maxsim.common import to_f32

    hits: list[Hit] = []
    texts: dict[str, bytes] = {}
    kind = f"MaxSim: sum over query tokens of weight x best cosine ({layer.shared.encoder.model_id})"
    finish = Explanations(layer, qe, w)
    cols = None
    localise = layer.options["localise"]
    with one_blas_thread():
        for score, h, c in res.top:
            try:
                enc = layer.load(h)
                if h not in texts:
                    texts[h] = layer.ctx.reader.unit_text(h, paths.get(h))
            except Exception:  # vanished since the scan
                continue
            text = texts[h]
            a, b = enc.chunk_rows(c)
            if enc.token_scales is not None:
                x = enc.tokens_f32(a, b)
            else:
                x = to_f32(np.ascontiguousarray(enc.tokens[a:b]))
            sims = x @ q.T  # (chunk tokens, query tokens): the same products the scan maxed over
            if cols is None:
                cols = np.arange(sims.shape[1])
            best = sims.argmax(axis=0)
            sim_max = sims[best, cols]
            contrib = w * sim_max
            rows = a + best
            cs, ce = (int(x) for x in enc.chunk_spans[c])
            ce = min(ce, len(text))
            if localise:
                s, e = localise_weights(text, (cs, ce), enc.token_spans[rows, 0], contrib)
            else:
                s, e = cs, ce
            span = Span(h, s, e)
            finish.keep(span, score, rows, sim_max, contrib, enc.token_spans, text, cs, ce)
            hits.append(layer_hit(layer.name, span, rank=len(hits) + 1, score=score,
                                  score_kind=kind, query=lq.to_dict()))
    hits = budget.settle(layer.name, hits, finish)
    budget.offer(hits)
    return hits
