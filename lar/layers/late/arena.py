"""The late layer's token arena, which lives in :mod:`lar.layers.kits.vectors.arena` since the
dense layer's shards hold their chunk vectors in one too (kept here under its old name)."""
from lar.layers.kits.vectors.arena import MAX_SEGMENT_ROWS, MIN_SEGMENT_ROWS, TokenArena, in_memory

__all__ = ["TokenArena", "MAX_SEGMENT_ROWS", "MIN_SEGMENT_ROWS", "in_memory"]
