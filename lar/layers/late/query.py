"""The ``late`` layer's query: text plus optional per-query-token weights.

Forms:
- ``"free text"``
- ``{"text": "...", "weights": {"word or token": w, ...}, "min_score": 0.0}``: a key is a word
  of the query (case-insensitive, every occurrence; all its word pieces get ``w``) or a word-piece
  token as the tokenizer writes it (``"##ing"``). ``w = 0`` removes a token, ``w > 1`` boosts it.
- ``{"text": "...", "weights": [w0, w1, ...]}``: one weight per query token, in order.
``min_score`` is a floor on the *mean* per-token similarity (score / sum of weights).
Weights are applied at search time: nothing is re-indexed.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from lar.core.errors import QueryError

__all__ = ["LateQuery", "parse_late_query", "token_weights"]


@dataclass(frozen=True)
class LateQuery:
    text: str
    weights: Any = None  # None | dict[str, float] | tuple[float, ...]
    min_score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.weights is not None:
            out["weights"] = dict(self.weights) if isinstance(self.weights, Mapping) else list(self.weights)
        if self.min_score:
            out["min_score"] = self.min_score
        return out


def _weight(layer: str, key: Any, w: Any) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
        raise QueryError(layer, f"weight for {key!r} must be a finite number >= 0, got {w!r}")
    return float(w)


def parse_late_query(query: Any, layer: str = "late") -> LateQuery:
    if isinstance(query, str):
        if not query.strip():
            raise QueryError(layer, "the query is empty; give free text")
        return LateQuery(query)
    if isinstance(query, Mapping) and "text" in query:
        extra = set(query) - {"text", "weights", "min_score"}
        if extra:
            raise QueryError(layer, f"unknown query keys {sorted(extra)}; use text, weights, min_score")
        text = query["text"]
        if not isinstance(text, str) or not text.strip():
            raise QueryError(layer, f"'text' must be non-empty free text, got {text!r}")
        weights = query.get("weights")
        if weights is not None:
            if isinstance(weights, Mapping):
                weights = {str(k): _weight(layer, k, v) for k, v in weights.items()}
            elif isinstance(weights, (list, tuple)):
                weights = tuple(_weight(layer, i, v) for i, v in enumerate(weights))
            else:
                raise QueryError(layer, "'weights' must map words/tokens to numbers or list one "
                                        f"number per query token, got {type(weights).__name__}")
        ms = query.get("min_score", 0.0)
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not -1.0 <= ms <= 1.0:
            raise QueryError(layer, f"min_score must be a number in [-1, 1], got {ms!r}")
        return LateQuery(text, weights, float(ms))
    raise QueryError(layer, "give free text or {'text': ..., 'weights': {word: weight}, "
                            f"'min_score': 0.0}}; got {query!r}")


def token_weights(q: LateQuery, token_texts, token_spans, layer: str = "late") -> np.ndarray:
    """One weight per query token (float32) from the query's ``weights``."""
    n = len(token_texts)
    w = np.ones(n, dtype=np.float32)
    if q.weights is None:
        return w
    if isinstance(q.weights, tuple):
        if len(q.weights) != n:
            raise QueryError(layer, f"weights lists {len(q.weights)} numbers but the query has "
                                    f"{n} tokens: {list(token_texts)}")
        w[:] = q.weights
    else:
        lowered = q.text.lower()
        for key, val in q.weights.items():
            hit = False
            for i, t in enumerate(token_texts):
                if t == key:
                    w[i] = val
                    hit = True
            for m in re.finditer(r"(?<!\w)" + re.escape(key.lower()) + r"(?!\w)", lowered):
                for i, (s, e) in enumerate(token_spans):
                    if s < m.end() and m.start() < e:
                        w[i] = val
                        hit = True
            if not hit:
                raise QueryError(layer, f"weight key {key!r} is neither a word of the query nor "
                                        f"one of its tokens {list(token_texts)}")
    if not (w > 0).any():
        raise QueryError(layer, "every query token has weight 0: nothing left to match")
    return w
