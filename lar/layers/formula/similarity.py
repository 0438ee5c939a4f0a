"""Structural similarity of two normalised formulas (0..1).

* Identical normalised token sequences score **1.0** (variables renamed, formatting changed,
  macros or synonyms used: all the same after normalisation).
* Otherwise ``score = min(0.99, (dice + cover) / 2)`` where

  - ``dice`` is the Dice coefficient of the multisets of token bigrams of the two sequences,
    each padded with start/end markers (``2 |A ∩ B| / (|A| + |B|)``): whole-formula
    similarity, sensitive to which placeholder is which (``x + y`` vs ``x + x``);
  - ``cover`` is the share of the query's *shape* trigrams (placeholders collapsed to ``V``) that
    the formula contains (multiset containment ``|Q ∩ F| / |Q|``): a fragment found inside a
    longer formula, whose placeholders are numbered differently there, still counts. Trigrams
    of three placeholders (``V V V``: a product ``abc``, or a plain word such as ``timebox``,
    whose letters normalise to placeholders) say nothing and are left out; a query without
    other trigrams (fewer than 3 tokens, a lone ``x``) has ``cover = 0``.

So a fragment fully contained in a formula scores at least 0.5, a near-copy close to 1, and a
formula sharing only common pieces such as ``_ { V }`` little. Hand check: query ``\\frac{x}{y}``
(``\\frac { V1 } { V2 }``) against ``\\frac { V1 } { V2 } + V3`` gives dice
``2*7/(8+10) = 0.778``, cover ``5/5 = 1``, score ``0.889``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_PLACEHOLDER = re.compile(r"^V\d+$")
START, END, SEP = "\x02", "\x03", "\x1f"
_ALL_V = ("V", "V", "V")


@dataclass(frozen=True, slots=True)
class Features:
    """What scoring needs of one normalised formula (computed once, kept in memory)."""

    tokens: tuple[str, ...]
    bigrams: dict[str, int]
    n_bigrams: int
    shape3: dict[str, int]
    n_shape3: int


def shape(tokens: tuple[str, ...] | list[str]) -> list[str]:
    """``tokens`` with every placeholder ``V<n>`` replaced by ``V``."""
    return ["V" if _PLACEHOLDER.match(t) else t for t in tokens]


def _count(grams) -> dict[str, int]:
    """Multiset of n-grams, each keyed by its tokens joined with a separator (strings cache
    their hash, tuples do not: scoring is dictionary lookups)."""
    out: dict[str, int] = {}
    for g in grams:
        key = SEP.join(g)
        out[key] = out.get(key, 0) + 1
    return out


def features(tokens: tuple[str, ...] | list[str]) -> Features:
    toks = tuple(tokens)
    padded = (START, *toks, END)
    bigrams = _count(zip(padded, padded[1:]))
    sh = shape(toks)
    informative = [g for g in zip(sh, sh[1:], sh[2:]) if g != _ALL_V]
    shape3 = _count(informative)
    return Features(toks, bigrams, len(padded) - 1, shape3, len(informative))


def _overlap(q: dict[str, int], f: dict[str, int]) -> int:
    common = q.keys() & f.keys()
    if not common:
        return 0
    return sum(min(q[g], f[g]) for g in common)


def similarity(q: Features, f: Features) -> tuple[float, float, float]:
    """``(score, dice, cover)`` of formula ``f`` for query ``q``; see the module docstring."""
    if q.tokens == f.tokens:
        return 1.0, 1.0, 1.0
    dice = 2.0 * _overlap(q.bigrams, f.bigrams) / (q.n_bigrams + f.n_bigrams)
    cover = _overlap(q.shape3, f.shape3) / q.n_shape3 if q.n_shape3 else 0.0
    return min(0.99, (dice + cover) / 2.0), dice, cover


__all__ = ["Features", "features", "shape", "similarity"]
