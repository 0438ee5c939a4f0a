"""Sparse encoders: text -> a ``SparseVec`` over the model's vocabulary, from local checkpoints.

* ``SpladeEncoder``: any masked-language-model checkpoint (``BertForMaskedLM`` and the like,
  loaded with transformers' ``AutoModelForMaskedLM`` from a local folder only). A text's weight
  for vocabulary term ``j`` is SPLADE's rule, ``max over the text's tokens t of log(1 +
  relu(logit[t, j]))`` over the attended positions ([CLS] and [SEP] included, padding excluded).
* ``BGEM3SparseEncoder`` (``lar.layers.sparse.bgem3``): BGE-M3's lexical head, ``relu(sparse_linear(h))``
  per token, the maximum per token id.

A text longer than the model's window is cut into windows (``lar.encoders.plan_windows``) and the
maximum is taken over all of them: nothing is truncated. Documents keep their ``doc_terms``
largest weights; queries ``query_terms`` (``None``: every positive weight).

**Never a random head.** ``check_mlm_checkpoint`` refuses, on the files, a folder whose
``config.json`` names no masked-LM architecture; ``SpladeEncoder`` refuses, after loading, any
checkpoint for which transformers reports a missing or mismatched weight (it would have
initialised it at random: a plain ``BertModel`` has no ``cls.predictions`` head). Both raise
``ConfigError`` saying so.

**Inference-free queries.** A checkpoint that ships an ``idf.json`` (``{token: weight}``, as
the inference-free sparse models do) is read, with ``query_mode="auto"``, that way: a query's
weight for each of its own tokens is the token's IDF weight, no model pass. ``"model"`` forces
the SPLADE query encoding, ``"idf"`` requires the table.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from lar.encoders import plan_windows
from lar.encoders.models import ModelRef, set_offline_env
from lar.core import deadline
from lar.core.errors import ConfigError, require
from lar.layers.sparse.vectors import SparseVec, top_terms

__all__ = ["QUERY_MODES", "SparseEncoder", "SpladeEncoder", "check_mlm_checkpoint", "config_vocab_size",
           "read_idf_table"]

QUERY_MODES = ("auto", "model", "idf")
IDF_FILE = "idf.json"
DEFAULT_BATCH_TOKENS = 2048  # tokens per forward pass: the logits are (tokens x vocab) floats


def check_mlm_checkpoint(path: Path) -> None:
    """``ConfigError`` unless ``path``'s config.json names a masked-LM architecture (a plain
    encoder would get a randomly initialised MLM head)."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: no readable config.json ({exc}); give a masked-LM checkpoint") from None
    archs = cfg.get("architectures") if isinstance(cfg, dict) else None
    if archs and not any("MaskedLM" in str(a) for a in archs):
        raise ConfigError(
            f"{path} is a {', '.join(map(str, archs))} checkpoint without a masked-LM head: "
            "transformers would initialise cls.predictions at random; give a SPLADE-style "
            "*ForMaskedLM checkpoint (or a BGE-M3 folder with sparse_linear.pt)")


def config_vocab_size(path: Path) -> int:
    """``vocab_size`` of the checkpoint's config.json: the width of every sparse vector."""
    try:
        v = json.loads((Path(path) / "config.json").read_text("utf-8"))["vocab_size"]
    except (OSError, ValueError, KeyError, TypeError):
        v = None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{path}: config.json has no valid vocab_size")
    return v


def read_idf_table(path: Path, vocab: dict[str, int]) -> np.ndarray | None:
    """The checkpoint's ``idf.json`` as a weight per vocabulary id (0 for absent tokens), or
    None when the folder has none. A malformed table is a ``ConfigError``."""
    f = path / IDF_FILE
    if not f.is_file():
        return None
    try:
        table = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(table, dict):
            raise ValueError("not a JSON object")
        out = np.zeros(max(vocab.values(), default=-1) + 1, dtype=np.float32)
        for tok, w in table.items():
            i = vocab.get(tok)
            if i is not None:
                out[i] = max(0.0, float(w))
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"{f} must map tokens to numbers: {exc}") from None
    return out


class SparseEncoder:
    """What the sparse encoders share: tokenising with offsets, windows, pruning, query modes.
    Subclasses set ``model_id``, ``kind``, ``max_tokens``, ``_tok`` (a fast tokenizer),
    ``_n_special``, ``vocab_size``, ``_idf`` (or None) and implement ``_vocab_rows``."""

    model_id: str
    kind: str
    max_tokens: int
    vocab_size: int
    _n_special: int = 2
    _idf: np.ndarray | None = None
    last_tokens: int = 0  # content tokens of the texts of the last ``encode_texts`` call

    def __init__(self, query_mode: str = "auto") -> None:
        if query_mode not in QUERY_MODES:
            raise ConfigError(f"query mode must be one of {', '.join(QUERY_MODES)}, got {query_mode!r}")
        self._query_mode = query_mode
        self._lock = threading.RLock()

    # -- to implement ---------------------------------------------------------------------
    def _vocab_rows(self, windows: list[np.ndarray]) -> np.ndarray:
        """One dense vocabulary row per window of content token ids: (n, vocab) float32."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    @property
    def query_mode(self) -> str:
        """"idf" (inference-free: the checkpoint's IDF table) or "model"."""
        if self._query_mode == "auto":
            return "idf" if self._idf is not None else "model"
        if self._query_mode == "idf" and self._idf is None:
            raise ConfigError(f"{self.model_id}: query mode 'idf' needs an {IDF_FILE} in the checkpoint")
        return self._query_mode

    @property
    def window_tokens(self) -> int:
        return self.max_tokens - self._n_special

    def tokenize(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: content token ids (int64, no special tokens, never truncated) and their
        character spans ``(n, 2)`` in the text."""
        if not texts:
            return []
        with self._lock:
            enc = self._tok(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                            truncation=False, padding=False, return_attention_mask=False,
                            return_token_type_ids=False, verbose=False)
        return [(np.asarray(ids, dtype=np.int64), np.asarray(offs, dtype=np.int64).reshape(-1, 2))
                for ids, offs in zip(enc["input_ids"], enc["offset_mapping"])]

    def term(self, term_id: int) -> str:
        return str(self._tok.convert_ids_to_tokens(int(term_id)))

    def terms(self, ids: Sequence[int]) -> list[str]:
        return [str(t) for t in self._tok.convert_ids_to_tokens([int(i) for i in ids])]

    def _windows(self, text: str, ids: np.ndarray, offs: np.ndarray) -> list[np.ndarray]:
        if not ids.size:
            return []
        return [ids[a:b] for a, b in plan_windows(offs[:, 0], offs[:, 1], text, self.window_tokens)]

    def encode_texts(self, texts: Sequence[str], top: int | None = None) -> list[SparseVec]:
        """One vector per text (the maximum over its windows), pruned to ``top`` terms. A text
        without tokens gets an empty vector."""
        toks = self.tokenize(texts)
        self.last_tokens = int(sum(len(ids) for ids, _ in toks))
        owner, windows = [], []
        for i, (text, (ids, offs)) in enumerate(zip(texts, toks)):
            for w in self._windows(text, ids, offs):
                owner.append(i)
                windows.append(w)
        rows = self._rows_batched(windows)
        out: list[np.ndarray | None] = [None] * len(texts)
        for i, row in zip(owner, rows):
            out[i] = row if out[i] is None else np.maximum(out[i], row)
        empty = SparseVec(np.zeros(0, np.int32), np.zeros(0, np.float32))
        return [empty if r is None else top_terms(r, top) for r in out]

    def _rows_batched(self, windows: list[np.ndarray]) -> list[np.ndarray]:
        """Vocabulary rows of many windows, longest first, in batches of about
        ``DEFAULT_BATCH_TOKENS`` padded tokens, in the input order."""
        order = sorted(range(len(windows)), key=lambda i: -len(windows[i]))
        rows: list = [None] * len(windows)
        i = 0
        while i < len(order):
            width = len(windows[order[i]]) + self._n_special
            n = max(1, DEFAULT_BATCH_TOKENS // max(width, 1))
            batch = order[i:i + n]
            deadline.check(f"encoding with {self.model_id}")  # abandoned work stops here
            with self._lock:
                got = self._vocab_rows([windows[j] for j in batch])
            for j, row in zip(batch, got):
                rows[j] = row
            i += n
        return rows

    def encode_query(self, text: str, top: int | None = None) -> SparseVec:
        """The query's vector: the model's (like a document's), or in ``idf`` mode its own
        tokens weighted by the checkpoint's IDF table."""
        if self.query_mode == "idf":
            ids = np.unique(self.tokenize([text])[0][0])
            ids = ids[ids < self._idf.shape[0]]
            row = np.zeros(self.vocab_size, dtype=np.float32)
            row[ids] = self._idf[ids]
            return top_terms(row, top)
        return self.encode_texts([text], top)[0]


class SpladeEncoder(SparseEncoder):
    """A local masked-LM checkpoint read the SPLADE way (see the module docstring)."""

    def __init__(self, ref: ModelRef, *, device: str | None = None, query_mode: str = "auto",
                 max_tokens: int | None = None):
        super().__init__(query_mode)
        check_mlm_checkpoint(ref.path)
        set_offline_env()
        self._torch = torch = require("torch", "models")
        transformers = require("transformers", "models")
        try:
            model, info = transformers.AutoModelForMaskedLM.from_pretrained(
                str(ref.path), local_files_only=True, output_loading_info=True)
            tok = transformers.AutoTokenizer.from_pretrained(str(ref.path), local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"{ref.path} does not load as a masked-LM checkpoint: {exc}") from None
        bad = sorted(info.get("missing_keys") or []) + sorted(str(k) for k in info.get("mismatched_keys") or [])
        if bad:
            raise ConfigError(
                f"{ref.path}: the checkpoint lacks {len(bad)} weight(s) of its masked-LM model "
                f"({', '.join(bad[:4])}{', ...' if len(bad) > 4 else ''}); transformers would "
                "initialise them at random, so it is refused. Give a trained SPLADE-style "
                "masked-LM checkpoint")
        if not getattr(tok, "is_fast", False):
            raise ConfigError(f"{ref.path}: a fast tokenizer (tokenizer.json) is needed for offsets")
        self.device = device or "cpu"
        model.to(self.device).eval()
        self._model, self._tok = model, tok
        self._cls = [tok.cls_token_id] if tok.cls_token_id is not None else []
        self._sep = [tok.sep_token_id] if tok.sep_token_id is not None else []
        self._n_special = len(self._cls) + len(self._sep)
        self._pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        positions = int(getattr(model.config, "max_position_embeddings", 512) or 512)
        cap = int(getattr(tok, "model_max_length", 0) or 0)
        limit = min(positions, cap) if 0 < cap < 10**6 else positions
        self.max_tokens = int(max_tokens or limit)
        if not self._n_special < self.max_tokens <= positions:
            raise ConfigError(f"max_tokens must be in ({self._n_special}, {positions}], got {self.max_tokens}")
        self.vocab_size = int(model.config.vocab_size)
        self._idf = read_idf_table(ref.path, tok.get_vocab())
        self.ref, self.model_id, self.kind = ref, ref.model_id, "splade"
        self.query_mode  # a forced 'idf' without a table fails here, at load

    def _vocab_rows(self, windows: list[np.ndarray]) -> np.ndarray:
        torch = self._torch
        width = max(len(w) for w in windows) + self._n_special
        ids = np.full((len(windows), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for i, w in enumerate(windows):
            row = np.concatenate([self._cls, w, self._sep]).astype(np.int64)
            ids[i, :row.size] = row
            mask[i, :row.size] = 1
        t_ids = torch.from_numpy(ids).to(self.device)
        t_mask = torch.from_numpy(mask).to(self.device)
        with torch.inference_mode():
            logits = self._model(input_ids=t_ids, attention_mask=t_mask).logits.float()
            # log(1 + relu(x)) is monotone: the max over tokens of it is it of the max logit
            logits.masked_fill_(t_mask.unsqueeze(-1) == 0, float("-inf"))
            best = logits.amax(dim=1)
            rows = torch.log1p(torch.relu(best))
        return rows.cpu().numpy()
