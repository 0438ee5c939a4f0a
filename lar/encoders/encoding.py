"""``UnitEncoding``: what one encoder pass over one unit yields, shared by ``dense`` and ``late``.

A unit's text (the Document's UTF-8 bytes) is cut into chunks (byte spans); each chunk is one
encoder window (chunks longer than the window are split by the encoder, never truncated). For
every chunk the encoding holds its token vectors (special tokens dropped, rows L2-normalised) with
the byte span of each token in the unit text, and the chunk's pooled vector (L2-normalised).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lar.core.errors import ConfigError

__all__ = ["UnitEncoding"]


@dataclass(frozen=True, eq=False)
class UnitEncoding:
    model_id: str
    chunker_version: str
    tokens: np.ndarray  # (T, d) float16/float32 (or int8 with token_scales), rows L2-normalised
    token_spans: np.ndarray  # (T, 2) int64: [start, end) byte span of each token in the unit text
    chunk_starts: np.ndarray  # (C,) int64: row of each chunk's first token; strictly increasing
    chunk_spans: np.ndarray  # (C, 2) int64: [start, end) byte span of each chunk
    pooled: np.ndarray | None = None  # (C, dp) float16/float32, rows L2-normalised
    token_scales: np.ndarray | None = None  # (T,) float32, only when tokens are int8

    def __post_init__(self) -> None:
        t, s, cs, cp = self.tokens, self.token_spans, self.chunk_starts, self.chunk_spans
        if not self.model_id or not isinstance(self.model_id, str):
            raise ConfigError("UnitEncoding needs a model_id")
        if t.ndim != 2:
            raise ConfigError(f"UnitEncoding.tokens must be 2-D (tokens, dim), got shape {t.shape}")
        n = t.shape[0]
        if s.shape != (n, 2):
            raise ConfigError(f"token_spans must have shape ({n}, 2), got {s.shape}")
        if cs.ndim != 1 or cp.shape != (cs.shape[0], 2):
            raise ConfigError(f"chunk_starts {cs.shape} and chunk_spans {cp.shape} disagree")
        if cs.shape[0]:
            if cs[0] != 0 or (np.diff(cs) <= 0).any() or cs[-1] >= n:
                raise ConfigError("chunk_starts must start at 0, increase strictly and leave "
                                  "every chunk at least one token")
        elif n:
            raise ConfigError(f"{n} tokens but no chunks")
        if n and ((s[:, 0] < 0).any() or (s[:, 1] < s[:, 0]).any()):
            raise ConfigError("token_spans must be non-negative, ordered [start, end) pairs")
        if cs.shape[0] and ((cp[:, 0] < 0).any() or (cp[:, 1] <= cp[:, 0]).any()):
            raise ConfigError("chunk_spans must be non-empty [start, end) pairs")
        if self.pooled is not None and (self.pooled.ndim != 2 or self.pooled.shape[0] != cs.shape[0]):
            raise ConfigError(f"pooled must have one row per chunk ({cs.shape[0]}), "
                              f"got shape {self.pooled.shape}")
        if (t.dtype == np.int8) != (self.token_scales is not None):
            raise ConfigError("token_scales are required with int8 tokens and only then")
        if self.token_scales is not None and self.token_scales.shape != (n,):
            raise ConfigError(f"token_scales must have shape ({n},), got {self.token_scales.shape}")

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_chunks(self) -> int:
        return int(self.chunk_starts.shape[0])

    @property
    def dim(self) -> int:
        return int(self.tokens.shape[1])

    def chunk_rows(self, c: int) -> tuple[int, int]:
        """Token rows [a, b) of chunk ``c``."""
        a = int(self.chunk_starts[c])
        b = int(self.chunk_starts[c + 1]) if c + 1 < self.n_chunks else self.n_tokens
        return a, b

    def tokens_f32(self, a: int = 0, b: int | None = None) -> np.ndarray:
        """Token rows [a, b) as float32 (int8 rows are scaled back)."""
        x = self.tokens[a:b]
        if self.token_scales is not None:
            return x.astype(np.float32) * self.token_scales[a:b, None]
        return np.asarray(x, dtype=np.float32)
