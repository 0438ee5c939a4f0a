"""Static (Model2Vec) embeddings: a token-embedding table distilled from the local MiniLM.

``ensure_distilled`` distils a Model2Vec model from a local sentence-transformers checkpoint the
first time it is needed (about 15 s for all-MiniLM-L6-v2 on two cores, ~15 MB on disk) into
``lar_cache_dir()/models/m2v-<base model_id>-pca<dims>``. The result is written to a temporary
folder and renamed into place under an exclusive file lock, so concurrent processes distil it
once and readers never see a half-written model. Nothing is downloaded: distillation only runs
the local checkpoint over its own vocabulary.

``StaticEncoder.encode`` averages token embeddings (no attention, ~thousands of texts/s) and
returns L2-normalised float32 rows; texts are never truncated (Model2Vec's default 512-token cap
is switched off) and a text without known tokens gets an all-zero row.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from lar.core.errors import ConfigError, MissingExtraError, require
from lar.encoders.base import l2_normalise
from lar.encoders.models import ModelRef, lar_cache_dir, resolve_model, set_offline_env

__all__ = ["StaticEncoder", "distilled_path", "ensure_distilled", "get_static_encoder"]


def distilled_path(base: ModelRef, pca_dims: int = 256) -> Path:
    """Where the Model2Vec distillation of ``base`` with ``pca_dims`` dimensions is kept."""
    return lar_cache_dir() / "models" / f"m2v-{base.model_id}-pca{pca_dims}"


def _is_model2vec_dir(path: Path) -> bool:
    cfg = path / "config.json"
    if not cfg.is_file() or not (path / "model.safetensors").is_file():
        return False
    try:
        return json.loads(cfg.read_text(encoding="utf-8")).get("model_type") == "model2vec"
    except (OSError, ValueError, AttributeError):
        return False


@contextmanager
def _file_lock(lock_path: Path):
    """Exclusive advisory lock (``fcntl.flock``) on ``lock_path``; a no-op where fcntl does not
    exist (Windows), where concurrent first uses may then distil twice (still atomically)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(lock_path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_distilled(base: ModelRef | str | os.PathLike | None = None, pca_dims: int = 256) -> Path:
    """Return the folder of the Model2Vec distillation of ``base`` (default: the packaged
    all-MiniLM-L6-v2), distilling it first if it is not there yet."""
    if not isinstance(pca_dims, int) or pca_dims < 1:
        raise ConfigError(f"pca_dims must be a positive int, got {pca_dims!r}")
    ref = base if isinstance(base, ModelRef) else resolve_model(base)
    if ref.kind not in ("sentence-transformers", "transformers"):
        raise ConfigError(f"distillation needs a sentence-transformers checkpoint; {ref.path} is "
                          f"a {ref.kind!r} checkpoint")
    target = distilled_path(ref, pca_dims)
    if _is_model2vec_dir(target):
        return target
    set_offline_env()
    require("model2vec", "models")
    try:
        from model2vec.distill import distill
    except ImportError as exc:
        raise MissingExtraError("model2vec[distill]", "models") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f"{target.name}.lock"):
        if _is_model2vec_dir(target):  # another process finished while we waited
            return target
        if target.exists():  # a broken leftover: replace it
            shutil.rmtree(target, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            with _quiet_distill():
                model = distill(model_name=str(ref.path), pca_dims=pca_dims)
            model.save_pretrained(str(tmp))
            os.rename(tmp, target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


@contextmanager
def _quiet_distill():
    """Model2Vec's distillation draws its own "Encoding tokens" bar (tqdm, no option to turn it
    off): unless ``LAR_VERBOSE`` is set, that bar is created disabled for the distillation."""
    from lar.encoders.models import verbose

    try:
        from model2vec.distill import inference
    except ImportError:
        inference = None
    bar = getattr(inference, "tqdm", None)
    if verbose() or bar is None:
        yield
        return
    inference.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        inference.tqdm = bar


class StaticEncoder:
    """Model2Vec encoder. ``spec=None`` -> the distilled all-MiniLM-L6-v2 (distilled on first
    use); a local directory -> a saved Model2Vec model (anything else is a ``ConfigError``).
    Attributes ``model_id`` and ``dim``."""

    def __init__(self, spec: str | os.PathLike | None = None):
        set_offline_env()
        m2v = require("model2vec", "models")
        if spec is None:
            base = resolve_model(None)
            path = ensure_distilled(base)
            self.model_id = path.name
        else:
            ref = resolve_model(spec)
            path = ref.path
            if not _is_model2vec_dir(path):
                raise ConfigError(
                    f"{path} is not a Model2Vec model (config.json model_type 'model2vec' and "
                    f"model.safetensors); distil one with lar.encoders.static.ensure_distilled(base)")
            self.model_id = ref.model_id
        self.path = path
        self._model = m2v.StaticModel.from_pretrained(str(path))
        self.dim = int(self._model.dim)

    def __repr__(self) -> str:
        return f"StaticEncoder({self.model_id!r})"

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(n, dim)`` float32, rows L2-normalised (rows of texts without tokens stay zero)."""
        if isinstance(texts, str):
            raise ConfigError("StaticEncoder.encode takes a list of strings")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(texts, max_length=None, use_multiprocessing=False,
                                  show_progress_bar=False)
        return l2_normalise(np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim))


_CACHE: dict[str, StaticEncoder] = {}
_CACHE_LOCK = threading.Lock()


def get_static_encoder(spec: str | os.PathLike | None = None) -> StaticEncoder:
    """The process-wide ``StaticEncoder`` for ``spec`` (thread-safe, loaded once)."""
    key = distilled_path(resolve_model(None)).name if spec is None else resolve_model(spec).model_id
    with _CACHE_LOCK:
        enc = _CACHE.get(key)
        if enc is None:
            enc = _CACHE[key] = StaticEncoder(spec)
        return enc
