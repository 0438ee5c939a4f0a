"""Local cross-encoder checkpoints: checked on their files before any weight loads, then loaded
and kept (the ``rerank`` layer's model).

A checkpoint must declare a ``*ForSequenceClassification`` architecture with one label, and every
parameter of that architecture's head must be in its weight files (safetensors header, shard
index or ``.bin``): a bi-encoder such as the packaged all-MiniLM-L6-v2 would otherwise get a
randomly initialised head, which lar never serves. After loading, any weight transformers
reports as newly initialised is refused too.
"""
from __future__ import annotations

import json
import re
import struct
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

from lar.core.errors import ConfigError, LarError, require

_MAX_HEADER = 100 * 1024 * 1024
_KEEP_MODELS = 2  # loaded models kept per process (an engine re-opened reuses its model)
_models: OrderedDict[tuple[str, str], "CrossEncoderModel"] = OrderedDict()
_models_lock = threading.Lock()


# -- checkpoint checks (on the files, before any weight is loaded) ---------------------------
def _read_keys(f: Path) -> set[str]:
    if f.suffix == ".safetensors":  # 8-byte little-endian header length, then a JSON header
        with open(f, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n)) if 0 < n <= _MAX_HEADER else None
        return set(header) - {"__metadata__"}  # TypeError when not a header: caught below
    if f.suffix == ".json":
        return set(json.loads(f.read_text(encoding="utf-8"))["weight_map"])
    torch = require("torch", "models")
    try:
        return set(torch.load(f, map_location="cpu", weights_only=True, mmap=True))
    except RuntimeError:  # an old (non-zip) .bin cannot be memory-mapped
        return set(torch.load(f, map_location="cpu", weights_only=True))


def checkpoint_keys(path: Path) -> set[str]:
    """The tensor names in the weights transformers would load from ``path`` (its file order);
    legacy LayerNorm names (gamma/beta) read as weight/bias."""
    for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json"):
        if (path / name).is_file():
            try:
                keys = _read_keys(path / name)
            except LarError:
                raise
            except Exception as exc:
                raise ConfigError(f"{path / name} cannot be read ({type(exc).__name__}: {exc}); "
                                  "re-download the checkpoint") from None
            return {re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", k)) for k in keys}
    raise ConfigError(f"{path} holds no weights (model.safetensors, pytorch_model.bin or a "
                      "sharded index); point rerank_model to a complete checkpoint directory")


def head_keys(path: Path) -> tuple[str, ...]:
    """The parameters ``AutoModelForSequenceClassification`` adds on top of the base model of
    ``path``'s architecture (e.g. ``classifier.weight``), found on an empty (meta) model."""
    from lar.encoders.models import set_offline_env

    set_offline_env()
    torch = require("torch", "models")
    transformers = require("transformers", "models")
    try:
        cfg = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
        cfg.num_labels = 1
        with torch.device("meta"):
            model = transformers.AutoModelForSequenceClassification.from_config(cfg)
    except Exception as exc:  # unknown model type, remote code, broken config
        raise ConfigError(f"{path}: transformers has no sequence-classification model for this "
                          f"checkpoint ({exc}); rerank needs a cross-encoder checkpoint") from None
    prefix = f"{model.base_model_prefix}."
    return tuple(sorted(k for k in model.state_dict() if not k.startswith(prefix)))


def check_cross_encoder(path: Path) -> tuple[str, ...]:
    """``ConfigError`` unless ``path`` holds a trained one-label sequence classifier: its
    config.json declares a ``*ForSequenceClassification`` architecture with one label and its
    weight files hold every head parameter. Returns the head parameter names."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} has no readable config.json ({exc}); rerank_model must be a "
                          "transformers cross-encoder checkpoint directory") from None
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}/config.json must hold a JSON object")
    archs = cfg.get("architectures") or []
    head = head_keys(path)
    missing = sorted(set(head) - checkpoint_keys(path))
    if missing or not any(str(a).endswith("ForSequenceClassification") for a in archs):
        raise ConfigError(
            f"{path} is not a cross-encoder: its weights lack the sequence-classification head "
            f"({', '.join(missing or head) or 'none known'}; config.json architectures {archs}). "
            "It looks like a bare encoder (e.g. a bi-encoder / embedding model); loading it as a "
            "cross-encoder would initialise that head at random. Set rerank_model to a checkpoint "
            "trained as a cross-encoder with one output (e.g. a local copy of "
            "cross-encoder/ms-marco-MiniLM-L6-v2)")
    labels = cfg.get("id2label")
    n = len(labels) if isinstance(labels, dict) else cfg.get("num_labels", 2)
    if n != 1:
        raise ConfigError(f"{path} is a classifier with {n} labels; rerank needs one relevance "
                          "logit per pair (num_labels == 1), as cross-encoder rerankers have")
    return head


class CrossEncoderModel:
    """A loaded one-label sequence classifier and its tokenizer: ``score(query, passages)``
    returns one raw logit per passage."""

    def __init__(self, path: Path, model_id: str, device: str | None, max_length: int):
        from lar.encoders.models import set_offline_env

        set_offline_env()
        self._torch = torch = require("torch", "models")
        transformers = require("transformers", "models")
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dev.startswith("cuda") and not torch.cuda.is_available():
            raise ConfigError(f"rerank_device={dev!r} but CUDA is not available here; use 'cpu'")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(path), local_files_only=True, output_loading_info=True)
        missing = sorted(info.get("missing_keys") or ())
        if missing:  # the file check passed, yet transformers initialised something: refuse
            raise ConfigError(f"{path}: transformers initialised {', '.join(missing[:8])} at random "
                              "(not in the checkpoint); refusing to rerank with random weights")
        if int(model.config.num_labels) != 1:
            raise ConfigError(f"{path} loads with {model.config.num_labels} labels; rerank needs one")
        if dev == "cpu":
            model = model.float()
        self.model = model.to(dev).eval()
        limits = [max_length, getattr(model.config, "max_position_embeddings", None),
                  getattr(self.tokenizer, "model_max_length", None)]
        self.max_length = min(int(x) for x in limits if isinstance(x, int) and 0 < x < 10**6)
        self.device, self.model_id = dev, model_id

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        feats = self.tokenizer([query] * len(passages), list(passages), padding=True,
                               truncation=True, max_length=self.max_length, return_tensors="pt")
        feats = {k: v.to(self.device) for k, v in feats.items()}
        with self._torch.inference_mode():
            logits = self.model(**feats).logits
        return [float(x) for x in logits[:, 0].float().cpu().tolist()]


def load_cross_encoder(path: Path, model_id: str, device: str | None, max_length: int) -> CrossEncoderModel:
    """The loaded model, shared by the layers of this process (the last ``_KEEP_MODELS``)."""
    key = (model_id, f"{device}:{max_length}")
    with _models_lock:
        if key not in _models:
            _models[key] = CrossEncoderModel(path, model_id, device, max_length)
            while len(_models) > _KEEP_MODELS:
                _models.popitem(last=False)
        _models.move_to_end(key)
        return _models[key]
