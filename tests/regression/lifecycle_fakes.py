"""A slow token encoder and a building layer that encodes with it, for the lifecycle tests: the
real encoder batch loop (``TokenEncoder._run``) with a forward pass that sleeps instead of
running a model, so a unit takes seconds without loading one."""
from __future__ import annotations

import asyncio
import re
import time

import numpy as np

from lar.core.building import BuildingLayer
from lar.encoders.base import TokenEncoder

SECONDS_PER_BATCH = 0.1


class SlowEncoder(TokenEncoder):
    """One window per batch, each taking ``SECONDS_PER_BATCH``; tokens are words."""

    model_id = "slow-fake-encoder"
    kind = "fake"
    dim = 4
    pooled_dim = 4
    max_tokens = 8
    batch_size = 1

    def __init__(self) -> None:
        super().__init__()
        self.batches = 0
        self._pad_id = 0

    def _tok(self, texts, **_kw):
        ids, offs = [], []
        for t in texts:
            words = list(re.finditer(r"\S+", t))
            ids.append([1 + i for i in range(len(words))])
            offs.append([(m.start(), m.end()) for m in words])
        return {"input_ids": ids, "offset_mapping": offs}

    def _forward(self, windows, *, is_query):
        time.sleep(SECONDS_PER_BATCH)
        self.batches += 1
        v = np.full(self.dim, 0.5, dtype=np.float32)
        return [(np.tile(v, (len(w.ids), 1)), np.arange(len(w.ids), dtype=np.int64), v)
                for w in windows]


ENCODER = SlowEncoder()


class SlowEncodingLayer(BuildingLayer):
    """Builds a unit by encoding each of its lines (one batch a line); a search encodes a long
    text in its thread and returns nothing."""

    name = "slowenc"
    version = "1"
    roles = frozenset({"generate"})
    cost_rank = 95

    def index_unit(self, unit, doc):
        spans, pos = [], 0
        for line in doc.text.split(b"\n"):
            if line.strip():
                spans.append((pos, pos + len(line)))
            pos += len(line) + 1
        enc = ENCODER.encode_spans(doc.text, spans)
        return {"chunks": enc.n_chunks}

    async def search(self, query, scope, budget, candidates=None):
        text = " ".join(f"w{i}" for i in range(8 * 100)).encode()  # 100 windows, 10 s
        await asyncio.to_thread(ENCODER.encode_spans, text, [(0, len(text))])
        return []


def slow_corpus(root, files: int = 2, lines: int = 100):
    """``files`` files of ``lines`` lines: each unit takes ``lines * SECONDS_PER_BATCH``."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        (root / f"doc{f}.txt").write_text("".join(f"line {i} of doc {f}\n" for i in range(lines)))
    return root


class SlowLoadingLayer(SlowEncodingLayer):
    """Like ``SlowEncodingLayer``, with a model whose load takes ``LOAD_SECONDS``."""

    name = "slowload"
    LOAD_SECONDS = 6.0

    def __init__(self, ctx):
        super().__init__(ctx)
        self.loaded = False

    def warm(self) -> None:
        if not self.loaded:
            time.sleep(self.LOAD_SECONDS)
            self.loaded = True

    def index_unit(self, unit, doc):
        self.warm()  # a model layer loads its model on first use
        return super().index_unit(unit, doc)
