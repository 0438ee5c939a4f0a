"""Token counts of a long text given in parts that tokenise apart, with the repeated parts'
counts kept (issue 26: the call log's "raw" text of a search is the full evidence JSON with the
whole text of every hit's span, ~200k characters for 100 SciFact abstracts, and counting it was
most of a search's CPU).

A :class:`SplitText` is a text given as ``parts`` (``"".join(parts)`` is the text) cut only
right before or after a JSON string's quote. Under a BERT pipeline (``BertNormalizer``, whose
steps act per character, ``BertPreTokenizer``, which splits at whitespace and isolates every
punctuation character, ``"`` included, and ``WordPiece``, which reads one word at a time) no
token spans such a cut, so the text's count is the sum of its parts' counts: a part with a
cache key (a hit's span text, the same bytes on every search that returns it) is counted once.
Any other tokenizer counts the joined text.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Hashable

# parts whose counts are kept (a span's text), at most; the cache starts over when full
CACHE_PARTS = 50_000


@dataclass(frozen=True)
class SplitText:
    """``parts`` joined are the text; ``keys[i]`` names part i for the count cache (None: not
    kept). Every cut lies next to a ``"``."""

    parts: tuple[str, ...]
    keys: tuple[Hashable | None, ...]

    def text(self) -> str:
        return "".join(self.parts)


def additive(tokenizer) -> bool:
    """Whether counts of ``tokenizer`` add up over cuts next to a quote (see the module)."""
    try:
        return (type(tokenizer.normalizer).__name__ == "BertNormalizer"
                and type(tokenizer.pre_tokenizer).__name__ == "BertPreTokenizer"
                and type(tokenizer.model).__name__ == "WordPiece")
    except Exception:  # not a tokenizers.Tokenizer
        return False


class PartCounter:
    """Counts :class:`SplitText` with ``count`` (of one string), keeping keyed parts' counts."""

    def __init__(self, limit: int = CACHE_PARTS):
        self.limit = limit
        self._kept: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def count(self, split: SplitText, count: Callable[[str], int], adds: bool) -> int:
        if not adds:
            return count(split.text())
        total = 0
        todo: list[str] = []
        for part, key in zip(split.parts, split.keys):
            if key is None:
                todo.append(part)
                continue
            with self._lock:
                n = self._kept.get(key)
            if n is None:
                n = count(part) if part else 0
                with self._lock:
                    if len(self._kept) >= self.limit:
                        self._kept.clear()
                    self._kept[key] = n
            total += n
        # the unkept parts in one string: a cut between two of them lies next to a quote too
        rest = "".join(todo)
        return total + (count(rest) if rest else 0)


__all__ = ["CACHE_PARTS", "PartCounter", "SplitText", "additive"]
