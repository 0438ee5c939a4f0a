"""Lexical helpers shared by word-level layers: lar's own tokenizers (code, LaTeX, prose),
per-unit chunk artefacts and immutable BM25 segments with tombstones and merges.

Nothing here knows a layer by name; ``lar.layers.bm25`` composes these parts.
"""
from __future__ import annotations

from lar.layers.kits.lexical.tokenize import SETTINGS, STOPWORDS_EN, Tokenizer, split_identifier

__all__ = ["SETTINGS", "STOPWORDS_EN", "Tokenizer", "split_identifier"]
