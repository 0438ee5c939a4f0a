"""Stored vectors for the embedding layers: the per-unit encoding (token vectors, chunk spans,
pooled vectors), its sidecar file format, the chunk-vector store and the size levers."""
from lar.encoders.encoding import UnitEncoding

__all__ = ["UnitEncoding"]
