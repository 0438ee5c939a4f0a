"""Token counts of long texts, piece by piece, each distinct piece counted once (issue 26: the
call log's texts of a search are JSON, ~40k characters for the compact view and ~200k for the
one-stage text of 100 SciFact hits, and counting them was most of a search's CPU).

Under a BERT pipeline (``BertNormalizer``, whose steps act per character, ``BertPreTokenizer``,
which splits at whitespace and isolates every punctuation character, ``"`` included, and
``WordPiece``, which reads one word at a time) no token spans a cut right after a ``"``. So a
text's count is the sum of the counts of its pieces cut after each quote, and a piece's count
depends on the piece alone: the pieces a JSON text repeats from call to call (its keys, the
content hashes of hit ids, a span's text returned again) are counted once and kept. Long
strings also tokenise more slowly per character than short ones. Any other tokenizer counts
the whole text.
"""
from __future__ import annotations

import re
import threading
from typing import Callable

# kept piece counts: at most this many characters of pieces; the cache starts over when full
CACHE_CHARS = 16_000_000
_AFTER_QUOTE = re.compile(r'(?<=")')


def additive(tokenizer) -> bool:
    """Whether counts of ``tokenizer`` add up over cuts after a quote (see the module)."""
    try:
        return (type(tokenizer.normalizer).__name__ == "BertNormalizer"
                and type(tokenizer.pre_tokenizer).__name__ == "BertPreTokenizer"
                and type(tokenizer.model).__name__ == "WordPiece")
    except Exception:  # not a tokenizers.Tokenizer
        return False


def pieces(text: str) -> list[str]:
    """``text`` cut right after every ``"`` (the pieces join to ``text``)."""
    return [p for p in _AFTER_QUOTE.split(text) if p]


class PieceCounter:
    """Counts a text as the sum of its pieces' counts, keeping each distinct piece's count."""

    def __init__(self, limit_chars: int = CACHE_CHARS):
        self.limit_chars = limit_chars
        self._kept: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def count(self, text: str, count_many: Callable[[list[str]], list[int]]) -> int:
        parts = pieces(text)
        total = 0
        new: dict[str, None] = {}
        with self._lock:
            for p in parts:
                n = self._kept.get(p)
                if n is None:
                    new[p] = None
                else:
                    total += n
        fresh = list(new)
        counts = count_many(fresh) if fresh else []
        known = dict(zip(fresh, counts))
        total += sum(known[p] for p in parts if p in new)
        with self._lock:
            size = sum(len(p) for p in fresh)
            if self._chars + size > self.limit_chars:
                self._kept.clear()
                self._chars = 0
            self._kept.update(known)
            self._chars += size
        return total


__all__ = ["CACHE_CHARS", "PieceCounter", "additive", "pieces"]
