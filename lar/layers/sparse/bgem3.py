"""BGE-M3's sparse (lexical) head as a ``SparseEncoder``, through lar's BGE-M3 adapter.

Each token's weight is ``relu(sparse_linear(hidden))`` (``BGEM3Encoder.lexical_weights``); a
text's weight for a token id is the maximum over its occurrences, as FlagEmbedding's
``lexical_weights`` are: [CLS], [SEP]/</s>, padding and the unknown token carry none. The folder
must hold ``sparse_linear.pt`` (and ``colbert_linear.pt``: the adapter loads the whole model);
without it FlagEmbedding would initialise the head at random, so it is refused
(``ConfigError``) before anything is loaded. Queries: the model's weights (or the checkpoint's
``idf.json``, see ``lar.layers.sparse.encoder``).
"""
from __future__ import annotations

import numpy as np

from lar.encoders.models import ModelRef, set_offline_env
from lar.core.errors import ConfigError, require
from lar.layers.sparse.encoder import SparseEncoder, config_vocab_size, read_idf_table

__all__ = ["BGEM3SparseEncoder", "check_bge_m3_sparse"]


def check_bge_m3_sparse(ref: ModelRef) -> None:
    """``ConfigError`` unless the BGE-M3 folder holds its trained sparse head."""
    if not (ref.path / "sparse_linear.pt").is_file():
        raise ConfigError(f"{ref.path} has no sparse_linear.pt: FlagEmbedding would initialise "
                          "BGE-M3's sparse head at random; point to a complete BGE-M3 checkpoint")


class BGEM3SparseEncoder(SparseEncoder):
    def __init__(self, ref: ModelRef, *, device: str | None = None, query_mode: str = "auto",
                 max_tokens: int | None = None):
        super().__init__(query_mode)
        check_bge_m3_sparse(ref)
        from lar.encoders.adapters import BGEM3Encoder

        self._m3 = BGEM3Encoder(ref, device=device, max_tokens=max_tokens)
        set_offline_env()
        transformers = require("transformers", "models")
        tok = transformers.AutoTokenizer.from_pretrained(str(ref.path), local_files_only=True)
        if not getattr(tok, "is_fast", False):
            raise ConfigError(f"{ref.path}: a fast tokenizer (tokenizer.json) is needed for offsets")
        self._tok = tok
        self.max_tokens = int(self._m3.max_tokens)
        self._n_special = self.max_tokens - int(self._m3.window_tokens)
        self.vocab_size = config_vocab_size(ref.path)  # the model's embedding rows
        self._unused = {int(t) for t in (tok.cls_token_id, tok.eos_token_id, tok.sep_token_id,
                                         tok.pad_token_id, tok.unk_token_id) if t is not None}
        self._idf = read_idf_table(ref.path, tok.get_vocab())
        self.ref, self.model_id, self.kind = ref, ref.model_id, "bge-m3"
        self.query_mode  # a forced 'idf' without a table fails here, at load

    def _vocab_rows(self, windows: list[np.ndarray]) -> np.ndarray:
        rows = np.zeros((len(windows), self.vocab_size), dtype=np.float32)
        for i, (ids, w) in enumerate(zip(windows, self._m3.lexical_weights(windows))):
            keep = np.fromiter((int(t) not in self._unused for t in ids), dtype=bool, count=len(ids))
            np.maximum.at(rows[i], ids[keep], w[keep])
        return rows
