"""``SentenceTransformerEncoder``: token vectors and pooled vectors from one local
sentence-transformers (or plain transformers) checkpoint, offline.

One forward pass per batch of windows yields both outputs:

* token vectors = the last hidden states of the checkpoint's Transformer module (what
  ``SentenceTransformer.encode(..., output_value="token_embeddings")`` returns), special tokens and
  padding dropped, each row L2-normalised. No projection head: the "identity projection".
* pooled vector = the checkpoint's own sentence embedding of the window (its Pooling module,
  e.g. mean pooling over the attention mask, then L2-normalised). It equals
  ``SentenceTransformer.encode(window_text, normalize_embeddings=True)``.

The windows are built from the span's token ids directly (``[CLS] + ids + [SEP]`` for BERT), so
no text is tokenised twice and every token keeps its exact offsets. ``max_tokens`` is the window
including special tokens (the checkpoint's ``max_seq_length``, 256 for all-MiniLM-L6-v2).

``get_encoder`` keeps one loaded encoder per (model_id, device) for the whole process.
"""
from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from lar.core import deadline
from lar.core.errors import ConfigError, QueryError, require
from lar.encoders.base import QueryEncoding, TokenEncoder, Window, l2_normalise
from lar.encoders.models import ModelRef, resolve_model, set_offline_env

__all__ = ["QueryEncoding", "SentenceTransformerEncoder", "get_encoder", "special_affixes"]


def special_affixes(tok: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after a single text
    (``[CLS]``/``[SEP]`` for BERT, ``<s>``/``</s>`` for XLM-R), found by tokenising a probe."""
    for probe in ("a", "hello", "x y"):
        bare = list(tok(probe, add_special_tokens=False)["input_ids"])
        full = list(tok(probe, add_special_tokens=True)["input_ids"])
        if not bare:
            continue
        for i in range(len(full) - len(bare) + 1):
            if full[i:i + len(bare)] == bare:
                return full[:i], full[i + len(bare):]
    raise ConfigError("cannot tell which special tokens this tokenizer adds")


def model_ref(ref_or_spec: ModelRef | str | os.PathLike | None) -> ModelRef:
    return ref_or_spec if isinstance(ref_or_spec, ModelRef) else resolve_model(ref_or_spec)


class SentenceTransformerEncoder(TokenEncoder):
    """Token and pooled vectors from a local sentence-transformers / transformers checkpoint.

    Attributes: ``model_id``, ``kind``, ``dim`` (token vector size), ``pooled_dim``,
    ``max_tokens`` (window incl. special tokens), ``batch_size``, ``device``.
    """

    def __init__(self, ref_or_spec: ModelRef | str | os.PathLike | None = None, *,
                 device: str | None = None, batch_size: int = 32, max_tokens: int | None = None):
        super().__init__()
        ref = model_ref(ref_or_spec)
        if ref.kind not in ("sentence-transformers", "transformers"):
            raise ConfigError(
                f"{ref.path} is a {ref.kind!r} checkpoint; load it with "
                f"lar.encoders.adapters.load_token_encoder(path) (kind={ref.kind!r}) instead")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        set_offline_env()
        self._torch = require("torch", "models")
        st = require("sentence_transformers", "models")
        self.device = device or "cpu"
        self._model = st.SentenceTransformer(str(ref.path), device=self.device, local_files_only=True)
        self._model.eval()
        first = self._model[0]
        if not hasattr(first, "auto_model") or not hasattr(first, "tokenizer"):
            raise ConfigError(f"{ref.path}: the first module is not a Transformer; "
                              "a token encoder needs one")
        self._tok = first.tokenizer
        if not getattr(self._tok, "is_fast", False):
            raise ConfigError(f"{ref.path}: a fast tokenizer (tokenizer.json) is needed for offsets")
        self._lower = bool(getattr(first, "do_lower_case", False))
        self._prefix, self._suffix = special_affixes(self._tok)
        self._n_special = len(self._prefix) + len(self._suffix)
        self._pad_id = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        self._token_types = "token_type_ids" in getattr(self._tok, "model_input_names", ())
        limit = int(getattr(first.auto_model.config, "max_position_embeddings", 0) or 0)
        if max_tokens is None:
            max_tokens = int(self._model.max_seq_length or limit)
        if not isinstance(max_tokens, int) or max_tokens <= self._n_special:
            raise ConfigError(f"max_tokens must be an int above {self._n_special}, got {max_tokens!r}")
        if limit and max_tokens > limit:
            raise ConfigError(f"max_tokens={max_tokens} exceeds the {limit} positions of {ref.path}")
        self._model.max_seq_length = max_tokens
        self.ref = ref
        self.model_id = ref.model_id
        self.kind = ref.kind
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.dim = int(first.get_word_embedding_dimension())
        self.pooled_dim = int(self._model.get_sentence_embedding_dimension() or self.dim)

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder({self.model_id!r}, device={self.device!r})"

    def _forward(self, windows: list[Window], *, is_query: bool):
        torch = self._torch
        pre, suf = self._prefix, self._suffix
        ids, mask = self._padded(windows, pre, suf)
        dev = self._model.device
        features = {"input_ids": torch.from_numpy(ids).to(dev),
                    "attention_mask": torch.from_numpy(mask).to(dev)}
        if self._token_types:
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        with torch.inference_mode():
            out = self._model.forward(features)
            tok = out["token_embeddings"].float().cpu().numpy()
            sent = out["sentence_embedding"].float().cpu().numpy()
        res = []
        for i, w in enumerate(windows):
            k = len(w.ids)
            res.append((l2_normalise(tok[i, len(pre):len(pre) + k]), np.arange(k, dtype=np.int64),
                        l2_normalise(sent[i])))
        return res

    def encode_texts(self, texts: list[str], *, truncate: bool = False) -> np.ndarray:
        """L2-normalised pooled vectors ``(n, pooled_dim)`` float32 of whole texts (plain
        ``SentenceTransformer.encode``). A text longer than the window is a ``QueryError``
        unless ``truncate=True`` accepts the model's own truncation explicitly."""
        if isinstance(texts, str):
            raise QueryError("embed", "encode_texts takes a list of strings")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.pooled_dim), dtype=np.float32)
        with self._lock:
            if not truncate:
                for i, (ids, _) in enumerate(self._tokenize(texts)):
                    if ids.shape[0] > self.window_tokens:
                        raise QueryError(
                            "embed", f"text {i} has {ids.shape[0]} tokens, more than the "
                            f"{self.window_tokens} of one window; split it (encode_spans does) or "
                            f"pass truncate=True")
            deadline.check(f"encoding with {self.model_id}")  # abandoned work stops here
            with self._torch.inference_mode():
                vecs = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                          normalize_embeddings=True, show_progress_bar=False)
        return l2_normalise(vecs)


_CACHE: dict[tuple[str, str], SentenceTransformerEncoder] = {}
_CACHE_LOCK = threading.Lock()


def get_encoder(spec: ModelRef | str | os.PathLike | None = None,
                device: str | None = None) -> SentenceTransformerEncoder:
    """The process-wide ``SentenceTransformerEncoder`` for ``spec`` on ``device`` (default cpu),
    loaded on first use; thread-safe, so every layer shares one loaded model."""
    ref = model_ref(spec)
    key = (ref.model_id, device or "cpu")
    with _CACHE_LOCK:
        enc = _CACHE.get(key)
        if enc is None:
            enc = _CACHE[key] = SentenceTransformerEncoder(ref, device=device)
        return enc
