"""The static layer's pass over one unit (chunks and their Model2Vec vectors), in this process
or a Ray worker's (``lar.distributed.ray_build``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from lar.core.layer import Unit
from lar.layers.kits.embedding import EmbeddingLayer

__all__ = ["STATIC_CHUNK_BYTES", "StaticPass", "static_vectors"]

STATIC_CHUNK_BYTES = 1200


def static_vectors(encoder, doc) -> tuple[np.ndarray, np.ndarray]:
    """The static layer's chunks of ``doc`` and their vectors."""
    from lar.layers.kits.chunking import chunk

    spans = chunk(doc, target=STATIC_CHUNK_BYTES)
    texts = [doc.text[s:e].decode("utf-8", errors="replace") for s, e in spans]
    vecs = encoder.encode(texts) if texts else np.zeros((0, int(encoder.dim)), np.float32)
    return np.asarray(spans, dtype=np.int64).reshape(-1, 2), vecs


@dataclass(frozen=True)
class StaticPass:
    """The static layer's pass of one unit in another process; ``encoder`` is a picklable
    factory of the encoder (called per unit: ``get_static_encoder`` keeps one per process)."""

    encoder: Callable[[], Any]

    def run(self, unit: Unit, doc):
        EmbeddingLayer.text_of(doc)
        return static_vectors(self.encoder(), doc)
