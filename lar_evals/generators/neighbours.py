"""Word neighbours from a Model2Vec static model (no WordNet: it is not available offline).

The vocabulary is the whole-word part of the static model's WordPiece vocabulary (lower-case
ASCII words of at least three letters, stopwords left out), read from the model folder's
``tokenizer.json``; each word is encoded with ``StaticEncoder.encode`` and a word's neighbours
are the vocabulary words nearest by cosine. Words sharing the word's stem (Snowball), or
starting with it, are never neighbours (``return`` -> not ``returns``/``returned``), nor are
words below ``MIN_SIMILARITY``. ``restrict`` limits the proposals to a set of words, e.g. the
corpus's own vocabulary, so queries use words of the domain rather than the model's slang.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Callable, Collection

import numpy as np

from lar.layers.kits.lexical.tokenize import STOPWORDS_EN

from lar_evals.generators.common import GenerateError
from lar_evals.generators.verify import term_of

MIN_SIMILARITY = 0.45
_SCAN = 200  # nearest words looked at per query word


def same_stem(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are forms of one word: equal stems, or one word starts with the
    other's stem (``parse`` / ``parser``)."""
    a, b = a.lower(), b.lower()
    sa, sb = term_of(a) or a, term_of(b) or b
    return sa == sb or b.startswith(sa) or a.startswith(sb)


def vocabulary(model_dir: Path) -> list[str]:
    """Whole lower-case ASCII words (>= 3 letters, no stopwords) of a WordPiece/word-level
    ``tokenizer.json`` in ``model_dir``, sorted."""
    path = Path(model_dir) / "tokenizer.json"
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GenerateError(f"cannot read the static model's vocabulary from {path}: {exc}; "
                            f"word neighbours need a Model2Vec model with a tokenizer.json"
                            ) from exc
    if isinstance(vocab, list):  # unigram models list [token, score] pairs
        vocab = {row[0]: i for i, row in enumerate(vocab) if row}
    return sorted(w for w in vocab if isinstance(w, str) and w.isascii() and w.isalpha()
                  and w.islower() and len(w) >= 3 and w not in STOPWORDS_EN)


class Neighbours:
    """Nearest vocabulary words of a word by cosine in a static embedding space.

    ``encoder`` is anything with ``encode(list[str]) -> (n, d)`` L2-normalised rows and a
    ``path`` to its model folder (``lar.encoders.static.StaticEncoder``); ``words`` overrides the
    vocabulary (tests)."""

    def __init__(self, encoder, words: list[str] | None = None):
        self.words = list(words) if words is not None else vocabulary(Path(encoder.path))
        if not self.words:
            raise GenerateError("the static model's vocabulary has no whole words")
        self._index = {w: i for i, w in enumerate(self.words)}
        self._matrix = np.asarray(encoder.encode(self.words), dtype=np.float32)
        self._memo: dict[str, list[tuple[str, float]]] = {}
        self._allowed: frozenset[str] | None = None

    def __contains__(self, word: str) -> bool:
        return word.lower() in self._index

    def _nearest(self, word: str) -> list[tuple[str, float]]:
        w = word.lower()
        hit = self._memo.get(w)
        if hit is None:
            i = self._index.get(w)
            if i is None:
                hit = []
            else:
                sims = self._matrix @ self._matrix[i]
                order = np.argsort(-sims, kind="stable")[: _SCAN + 1]
                hit = [(self.words[j], float(sims[j])) for j in order
                       if j != i and sims[j] >= MIN_SIMILARITY]
            self._memo[w] = hit
        return hit

    @property
    def size(self) -> int:
        """How many vocabulary words may be proposed."""
        return len(self.words) if self._allowed is None else len(self._allowed)

    def restrict(self, allowed: Collection[str] | None) -> "Neighbours":
        """A view of this finder that only proposes words in ``allowed`` (lower-case; None:
        the whole vocabulary). The vectors are shared, not copied."""
        view = copy.copy(self)
        view._allowed = None if allowed is None else frozenset(allowed) & self._index.keys()
        return view

    def near(self, word: str, k: int = 3, reject: Callable[[str], bool] | None = None
             ) -> list[str]:
        """Up to ``k`` nearest vocabulary words of ``word`` (best first), leaving out forms of
        the same word, words outside ``restrict``'s set and any word ``reject`` refuses;
        ``[]`` for a word outside the vocabulary."""
        out: list[str] = []
        allowed = self._allowed
        for cand, _ in self._nearest(word):
            if allowed is not None and cand not in allowed:
                continue
            if same_stem(word, cand) or (reject is not None and reject(cand)):
                continue
            out.append(cand)
            if len(out) == k:
                break
        return out
