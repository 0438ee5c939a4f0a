"""The contract suite's engine: every registered layer gets what it needs to run, here the
``rerank`` layer its (tiny, real) cross-encoder checkpoint, the ``sparse`` layer a tiny masked LM."""
from __future__ import annotations

import pytest


@pytest.fixture
def engine(corpus, tmp_path, tiny_cross_encoder, tiny_masked_lm):
    import lar

    eng = lar.open(corpus, state=tmp_path / "state", config={"rerank_model": str(tiny_cross_encoder),
                                                           "sparse_model": str(tiny_masked_lm)})
    yield eng
    eng.close()
