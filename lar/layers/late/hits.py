"""The late layer's hits: each scored chunk with its per-query-token evidence and its span
localised to the sentences carrying the match (``lar.layers.late.explain``)."""
from __future__ import annotations

import numpy as np

from lar.core.types import Hit, Span
from lar.layers.late.explain import localise, token_matches

__all__ = ["late_hits"]


def late_hits(layer, lq, qe, q, w, res, paths, budget) -> list[Hit]:
    """The hits of the scan result ``res`` of ``layer`` (best first), offered to ``budget``."""
    from lar.maxsim.common import to_f32

    hits: list[Hit] = []
    texts: dict[str, bytes] = {}
    kind = f"MaxSim: sum over query tokens of weight x best cosine ({layer.shared.encoder.model_id})"
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
        best = sims.argmax(axis=0)
        sim_max = sims[best, np.arange(sims.shape[1])]
        matches = token_matches(qe.token_texts, w, w * sim_max, best, sim_max, a,
                                enc.token_spans, text)
        cs, ce = (int(x) for x in enc.chunk_spans[c])
        ce = min(ce, len(text))
        s, e = localise(text, (cs, ce), matches) if layer.options["localise"] else (cs, ce)
        subs = sorted({(m.start, m.end) for m in matches if m.contribution > 0 and s <= m.start
                       and m.end <= e and m.end > m.start})
        details = {"chunk": [cs, ce], "score_mean": score / float(w.sum()),
                   "tokens": [m.to_dict() for m in matches]}
        hits.append(Hit.single(layer.name, Span(h, s, e), rank=len(hits) + 1, score=score,
                               score_kind=kind, query=lq.to_dict(), sub_spans=subs,
                               details=details))
    budget.offer(hits)
    return hits
