"""Token encoders for other local checkpoints: ColBERT (PyLate) and BGE-M3 (FlagEmbedding).

Both libraries happily serve a model whose projection head was just initialised at random
(PyLate appends a random ``Dense`` and two random ``[Q]``/``[D]`` token rows to a plain
checkpoint; FlagEmbedding creates random colbert/sparse heads when their files are missing) and
only log it at INFO. Such vectors are noise, so these adapters check the checkpoint BEFORE
loading it and the loaded model AFTER, and refuse with a ``ConfigError`` instead.

Every encoder returned by ``load_token_encoder`` has the interface of
``SentenceTransformerEncoder``: ``model_id``, ``kind``, ``dim``, ``pooled_dim`` (``None`` when
the model has no pooled output; ``UnitEncoding.pooled`` and ``QueryEncoding.pooled`` are then
``None``), ``max_tokens``, ``encode_spans`` and ``encode_query``.

Offsets: the adapters do not let the libraries re-tokenise text. They tokenise each span once
with the model's own tokenizer (keeping offsets), build exactly the input ids the library would
build (special tokens, the ``[Q]``/``[D]`` marker after ``[CLS]``, query padding) and run the
library's model on them, so every vector is tied to one token and its byte span. Marker and
special tokens are dropped; for ColBERT documents the punctuation tokens PyLate skips are dropped
too, exactly as ``ColBERT.encode(is_query=False)`` drops them. Tests check the vectors equal the
libraries' own ``encode`` output.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from lar.core.errors import ConfigError, require
from lar.encoders.base import TokenEncoder, Window, l2_normalise
from lar.encoders.e5 import E5Encoder
from lar.encoders.encoder import SentenceTransformerEncoder, model_ref, special_affixes
from lar.encoders.models import ModelRef, dense_modules, modules_of_type, set_offline_env

__all__ = ["BGEM3Encoder", "E5Encoder", "PyLateEncoder", "check_colbert_checkpoint",
           "load_token_encoder"]

_RANDOM_HEAD = ("{path} is a plain transformer/sentence-transformers checkpoint: PyLate would add a "
                "randomly initialised projection head and [Q]/[D] token rows; use "
                "kind='sentence-transformers' (identity projection) or point to a trained "
                "ColBERT checkpoint")


def check_colbert_checkpoint(path: Path) -> list[dict]:
    """The Dense modules of a ColBERT checkpoint, or ``ConfigError`` when ``path`` has no trained
    projection (no Dense module in modules.json, or a Dense folder without weights)."""
    denses = dense_modules(path)
    if not denses:
        raise ConfigError(_RANDOM_HEAD.format(path=path))
    if modules_of_type(path, "Pooling"):
        raise ConfigError(f"{path} pools its tokens before its Dense module: it is a "
                          "sentence-transformers model, not ColBERT; use kind='sentence-transformers'")
    for d in denses:
        folder = path / str(d.get("path", ""))
        if not ((folder / "model.safetensors").is_file() or (folder / "pytorch_model.bin").is_file()):
            raise ConfigError(f"{path}: the projection module {d.get('path')!r} has no weights "
                              f"(model.safetensors / pytorch_model.bin); " + _RANDOM_HEAD.format(path=path))
    return denses


def check_bge_m3_checkpoint(path: Path) -> None:
    """``ConfigError`` unless ``path`` holds both trained BGE-M3 heads."""
    missing = [f for f in ("colbert_linear.pt", "sparse_linear.pt") if not (path / f).is_file()]
    if missing:
        raise ConfigError(f"{path} lacks {', '.join(missing)}: FlagEmbedding would initialise "
                          "the BGE-M3 heads at random; point to a complete BGE-M3 checkpoint")


def check_kind(ref: ModelRef, kind: str = "auto") -> str:
    """The encoder kind ``load_token_encoder`` would use for ``ref``, checked on the files alone
    (no model loaded): a plain checkpoint forced to colbert/bge-m3, or a ColBERT/BGE-M3 forced
    to plain, is a ``ConfigError`` -- never a random or ignored head."""
    use = ref.kind if kind == "auto" else kind
    if use in ("sentence-transformers", "transformers"):
        if ref.kind in ("colbert", "bge-m3"):
            raise ConfigError(f"{ref.path} is a {ref.kind!r} checkpoint; its trained head would be "
                              f"ignored as kind={kind!r}; use kind='auto'")
    elif use == "colbert":
        check_colbert_checkpoint(ref.path)
    elif use == "bge-m3":
        check_bge_m3_checkpoint(ref.path)
    else:
        raise ConfigError(f"unknown encoder kind {kind!r}; use 'auto', 'sentence-transformers', "
                          "'transformers', 'colbert' or 'bge-m3'")
    return use


def _config_vocab(path: Path) -> int | None:
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    v = cfg.get("vocab_size") if isinstance(cfg, dict) else None
    return int(v) if isinstance(v, int) else None


def _window_limit(max_tokens: int | None, default: int, positions: int, n_special: int, path) -> int:
    max_tokens = default if max_tokens is None else max_tokens
    if not isinstance(max_tokens, int) or max_tokens <= n_special:
        raise ConfigError(f"max_tokens must be an int above {n_special}, got {max_tokens!r}")
    if positions and max_tokens > positions:
        raise ConfigError(f"max_tokens={max_tokens} exceeds the {positions} positions of {path}")
    return max_tokens


class PyLateEncoder(TokenEncoder):
    """A trained ColBERT checkpoint through ``pylate.models.ColBERT``. ``max_tokens`` defaults
    to the checkpoint's ``document_length`` (window incl. ``[CLS]``, ``[D]``, ``[SEP]``). Queries
    get PyLate's ``[Q]`` marker and, up to ``query_length``, its [MASK] expansion padding (used
    inside the model only; expansion vectors are not returned since they have no span); queries
    longer than ``query_length`` but within the window are encoded unpadded, never truncated.
    ``pooled_dim`` is ``None``."""

    def __init__(self, ref_or_spec: ModelRef | str | os.PathLike, *, device: str | None = None,
                 batch_size: int = 32, max_tokens: int | None = None):
        super().__init__()
        ref = model_ref(ref_or_spec)
        denses = check_colbert_checkpoint(ref.path)
        vocab = _config_vocab(ref.path)
        set_offline_env()
        self._torch = require("torch", "models")
        pylate_models = require("pylate.models", "models")
        self.device = device or "cpu"
        model = pylate_models.ColBERT(model_name_or_path=str(ref.path), device=self.device,
                                      local_files_only=True)
        model.eval()
        loaded = [m for m in list(model)[1:] if type(m).__name__ == "Dense"]
        if len(loaded) != len(denses) or len(list(model)) != 1 + len(denses):
            raise ConfigError(f"{ref.path}: PyLate added modules the checkpoint does not hold "
                              f"({[type(m).__name__ for m in model]}); refusing a random head")
        rows = int(model[0].auto_model.get_input_embeddings().weight.shape[0])
        if len(model.tokenizer) != rows or (vocab is not None and rows > vocab):
            raise ConfigError(f"{ref.path}: loading grew the vocabulary (config.json {vocab} rows, "
                              f"now {rows}, tokenizer {len(model.tokenizer)}): the [Q]/[D] rows "
                              "would be random; point to a trained ColBERT checkpoint")
        self._model = model
        self._tok = model.tokenizer
        self._lower = bool(getattr(model[0], "do_lower_case", False))
        pre, self._suffix = special_affixes(self._tok)
        self._pad_id = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        self._token_types = "token_type_ids" in getattr(self._tok, "model_input_names", ())
        self._skip = np.asarray(sorted(set(model.skiplist)), dtype=np.int64)
        self._prefix = {q: self._with_marker(pre, model.query_prefix_id if q else model.document_prefix_id)
                        for q in (True, False)}
        self._n_special = len(self._prefix[False]) + len(self._suffix)
        positions = int(getattr(model[0].auto_model.config, "max_position_embeddings", 0) or 0)
        self.max_tokens = _window_limit(max_tokens, int(model.document_length), positions,
                                        self._n_special, ref.path)
        self.query_length = int(model.query_length)
        self.ref, self.model_id, self.kind = ref, ref.model_id, "colbert"
        self.batch_size = batch_size
        self.dim = int(loaded[-1].out_features)
        self.pooled_dim = None

    @staticmethod
    def _with_marker(pre: list[int], marker: int | None) -> list[int]:
        # PyLate inserts its marker right after the first token ([CLS]).
        return list(pre) if marker is None else list(pre[:1]) + [int(marker)] + list(pre[1:])

    @property
    def query_tokens(self) -> int:
        return max(self.query_length, self.max_tokens) - len(self._prefix[True]) - len(self._suffix)

    def __repr__(self) -> str:
        return f"PyLateEncoder({self.model_id!r}, device={self.device!r})"

    def _forward(self, windows: list[Window], *, is_query: bool):
        torch, model = self._torch, self._model
        pre, suf = self._prefix[is_query], self._suffix
        width = max(len(w.ids) for w in windows) + len(pre) + len(suf)
        expand = is_query and model.do_query_expansion and width < self.query_length
        ids, mask = self._padded(windows, pre, suf, self.query_length if expand else None,
                                 1 if expand and model.attend_to_expansion_tokens else 0)
        dev = model.device
        features = {"input_ids": torch.from_numpy(ids).to(dev),
                    "attention_mask": torch.from_numpy(mask).to(dev)}
        if self._token_types:
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        with torch.inference_mode():
            tok = model.forward(features)["token_embeddings"].float().cpu().numpy()
        res = []
        for i, w in enumerate(windows):
            k = len(w.ids)
            vecs, rows = tok[i, len(pre):len(pre) + k], np.arange(k, dtype=np.int64)
            if not is_query and self._skip.size:
                keep = ~np.isin(w.ids, self._skip)
                vecs, rows = vecs[keep], rows[keep]
            res.append((l2_normalise(vecs), rows, None))
        return res


class BGEM3Encoder(TokenEncoder):
    """A BGE-M3 checkpoint through FlagEmbedding's ``BGEM3FlagModel`` (fp32). Requires
    ``colbert_linear.pt`` and ``sparse_linear.pt`` in the folder (otherwise FlagEmbedding would
    initialise those heads at random). Token vectors are its colbert vectors, pooled vectors its
    dense (CLS) vectors. ``max_tokens`` defaults to 512 (FlagEmbedding's passage length)."""

    def __init__(self, ref_or_spec: ModelRef | str | os.PathLike, *, device: str | None = None,
                 batch_size: int = 32, max_tokens: int | None = None):
        super().__init__()
        ref = model_ref(ref_or_spec)
        check_bge_m3_checkpoint(ref.path)
        set_offline_env()
        self._torch = torch = require("torch", "models")
        fe = require("FlagEmbedding", "models")
        head = torch.load(ref.path / "colbert_linear.pt", map_location="cpu", weights_only=True)
        self.device = device or "cpu"
        self._flag = fe.BGEM3FlagModel(str(ref.path), use_fp16=False, devices=self.device,
                                       batch_size=batch_size, colbert_dim=int(head["weight"].shape[0]))
        self._net = self._flag.model
        self._net.float().to(self.device).eval()
        self._tok = self._flag.tokenizer
        self._prefix, self._suffix = special_affixes(self._tok)
        if not self._prefix:
            raise ConfigError(f"{ref.path}: BGE-M3 drops the first position, which must be a "
                              "special token; this tokenizer adds none")
        self._n_special = len(self._prefix) + len(self._suffix)
        self._pad_id = self._tok.pad_token_id if self._tok.pad_token_id is not None else 0
        cap = int(getattr(self._tok, "model_max_length", 0) or 0)
        self.max_tokens = _window_limit(max_tokens, min(512, cap) if 0 < cap < 10**6 else 512,
                                        cap if 0 < cap < 10**6 else 0, self._n_special, ref.path)
        self.ref, self.model_id, self.kind = ref, ref.model_id, "bge-m3"
        self.batch_size = batch_size
        self.dim = int(self._net.colbert_linear.out_features)
        self.pooled_dim = int(self._net.model.config.hidden_size)

    def __repr__(self) -> str:
        return f"BGEM3Encoder({self.model_id!r}, device={self.device!r})"

    def lexical_weights(self, windows: list[np.ndarray]) -> list[np.ndarray]:
        """BGE-M3's lexical (sparse) head: for each window of content token ids (no special
        tokens), each token's weight ``relu(sparse_linear(hidden))`` (FlagEmbedding's
        ``_sparse_embedding`` before its maximum per token id), float32."""
        torch = self._torch
        wins = [Window(np.asarray(w, dtype=np.int64), "") for w in windows]
        ids, mask = self._padded(wins, self._prefix, self._suffix)
        feats = {"input_ids": torch.from_numpy(ids).to(self.device),
                 "attention_mask": torch.from_numpy(mask).to(self.device)}
        with torch.inference_mode():
            weights = self._net(feats, return_dense=False, return_sparse=True,
                                return_sparse_embedding=False)["sparse_vecs"]
            weights = weights.float().squeeze(-1).cpu().numpy()
        a = len(self._prefix)
        return [weights[i, a:a + len(w.ids)].astype(np.float32) for i, w in enumerate(wins)]

    def _forward(self, windows: list[Window], *, is_query: bool):
        torch = self._torch
        pre, suf = self._prefix, self._suffix
        ids, mask = self._padded(windows, pre, suf)
        feats = {"input_ids": torch.from_numpy(ids).to(self.device),
                 "attention_mask": torch.from_numpy(mask).to(self.device)}
        with torch.inference_mode():
            out = self._net(feats, return_dense=True, return_colbert_vecs=True)
            colbert = out["colbert_vecs"].float().cpu().numpy()  # position p -> row p - 1
            dense = out["dense_vecs"].float().cpu().numpy()
        res = []
        for i, w in enumerate(windows):
            k, a = len(w.ids), len(pre) - 1
            res.append((l2_normalise(colbert[i, a:a + k]), np.arange(k, dtype=np.int64),
                        l2_normalise(dense[i])))
        return res


def load_token_encoder(spec: ModelRef | str | os.PathLike | None, *, kind: str = "auto",
                       device: str | None = None, batch_size: int = 32, max_tokens: int | None = None):
    """A token encoder for a local checkpoint. ``kind="auto"`` follows ``resolve_model``:
    sentence-transformers / transformers -> ``SentenceTransformerEncoder`` (identity projection:
    the transformer's hidden states, no head), colbert -> ``PyLateEncoder``, bge-m3 ->
    ``BGEM3Encoder``. Forcing a kind the checkpoint cannot serve (e.g. ``"colbert"`` on a plain
    checkpoint) is a ``ConfigError``, never a random head."""
    ref = model_ref(spec)
    kind = check_kind(ref, kind)
    kw = dict(device=device, batch_size=batch_size, max_tokens=max_tokens)
    if kind in ("sentence-transformers", "transformers"):
        return SentenceTransformerEncoder(ref, **kw)
    if kind == "colbert":
        return PyLateEncoder(ref, **kw)
    return BGEM3Encoder(ref, **kw)
