"""Size levers for token vectors. Each returns a NEW ``UnitEncoding``; pooled (chunk) vectors are
left untouched and chunks are never merged.

Bytes per token as a sidecar stores them, for d = 384 (spans add 8 B per token as two int32):

=========================  ==================  =================
lever                      token payload       with spans
=========================  ==================  =================
none (float16)             768 B               776 B
``quantize_int8``          388 B (384 + scale) 396 B
``apply_pca`` to 128, f16  256 B               264 B
PCA-128 + int8             132 B               140 B
``pool_tokens`` factor f   any of the above / f (per original token, rounded up per chunk)
=========================  ==================  =================

Every lever keeps the encoding's token representation: float16 stays float16, float32 stays
float32 and int8 is re-quantised after the change, so levers compose in any order.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lar.core.errors import ConfigError, CorruptStateError, require
from lar.store.cas import atomic_write
from lar.encoders.encoding import UnitEncoding
from lar.layers.kits.vectors.sidecar import index_dtype

__all__ = ["pool_tokens", "PcaModel", "fit_pca", "apply_pca", "load_pca", "quantize_int8",
           "bytes_per_token", "MAX_PCA_SAMPLE"]

MAX_PCA_SAMPLE = 200_000


def _normalise(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric int8: scale = max|x| / 127 (1 for all-zero rows)."""
    amax = np.abs(x).max(axis=1) if x.shape[0] and x.shape[1] else np.zeros(x.shape[0])
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return q, scale


def _rebuild(enc: UnitEncoding, tokens: np.ndarray, spans: np.ndarray,
             starts: np.ndarray) -> UnitEncoding:
    """A new encoding with these float32 tokens, in ``enc``'s token representation."""
    scales = None
    if enc.tokens.dtype == np.int8:
        tokens, scales = _quantize(tokens)
    else:
        tokens = tokens.astype(enc.tokens.dtype if enc.tokens.dtype == np.float16 else np.float32)
    return UnitEncoding(
        model_id=enc.model_id, chunker_version=enc.chunker_version, tokens=tokens,
        token_spans=np.asarray(spans, dtype=np.int64), chunk_starts=np.asarray(starts, np.int64),
        chunk_spans=np.array(enc.chunk_spans, dtype=np.int64),
        pooled=None if enc.pooled is None else np.array(enc.pooled), token_scales=scales)


# -- token pooling ---------------------------------------------------------------------------
def _ward_labels(x: np.ndarray, m: int) -> np.ndarray:
    """Cluster labels (at most ``m`` clusters) from Ward hierarchical clustering."""
    hier = require("scipy.cluster.hierarchy", "models")
    z = hier.linkage(_normalise(x.astype(np.float64)), method="ward")
    return hier.fcluster(z, t=m, criterion="maxclust")


def _pool(x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster renormalised means, and for each cluster the member row closest to its
    (unnormalised) mean."""
    _, inv = np.unique(labels, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv)
    bounds = np.concatenate([[0], np.cumsum(counts)[:-1]])
    means = np.add.reduceat(x[order], bounds, axis=0) / counts[:, None]
    dist = ((x - means[inv]) ** 2).sum(axis=1)
    by = np.lexsort((dist, inv))  # by cluster, closest member first
    reps = by[bounds]
    return _normalise(means), reps


def pool_tokens(enc: UnitEncoding, factor: int, method: str = "ward") -> UnitEncoding:
    """Reduce each chunk's ``n`` tokens to ``ceil(n / factor)`` (at least 1).

    ``"adjacent"`` averages consecutive groups of ``factor`` tokens; ``"ward"`` clusters the
    chunk's normalised token vectors hierarchically (Ward linkage, cut at that many clusters)
    and averages each cluster: the token pooling of Clavié et al. (2024). Pooled vectors are
    renormalised; each carries the byte span of its member closest to the cluster mean, and a
    chunk's pooled tokens are ordered by span start. ``factor`` 1 returns an unchanged copy."""
    if not isinstance(factor, (int, np.integer)) or isinstance(factor, bool) or factor < 1:
        raise ConfigError(f"pool factor must be an integer >= 1, got {factor!r}")
    if method not in ("adjacent", "ward"):
        raise ConfigError(f"pool method must be 'adjacent' or 'ward', got {method!r}")
    factor = int(factor)
    if factor == 1:
        return _rebuild(enc, enc.tokens_f32(), np.array(enc.token_spans), enc.chunk_starts)
    vecs, spans, starts, row = [], [], [], 0
    for c in range(enc.n_chunks):
        a, b = enc.chunk_rows(c)
        x, sp = enc.tokens_f32(a, b), np.asarray(enc.token_spans[a:b], dtype=np.int64)
        n = b - a
        m = -(-n // factor)
        if m < n:
            if method == "adjacent":
                labels = np.arange(n) // factor
            elif m == 1:
                labels = np.zeros(n, dtype=np.int64)
            else:
                labels = _ward_labels(x, m)
            x, reps = _pool(x, labels)
            sp = sp[reps]
            order = np.lexsort((sp[:, 1], sp[:, 0]))
            x, sp = x[order], sp[order]
        starts.append(row)
        row += x.shape[0]
        vecs.append(x)
        spans.append(sp)
    tokens = np.concatenate(vecs) if vecs else np.zeros((0, enc.dim), dtype=np.float32)
    spans_a = np.concatenate(spans) if spans else np.zeros((0, 2), dtype=np.int64)
    return _rebuild(enc, tokens, spans_a, np.array(starts, dtype=np.int64))


# -- PCA -------------------------------------------------------------------------------------
def _model_id(mean: np.ndarray, components: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(mean, dtype="<f4").tobytes())
    h.update(np.ascontiguousarray(components, dtype="<f4").tobytes())
    h.update(str(components.shape).encode())
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class PcaModel:
    """A fitted projection to ``dims`` dimensions; ``id`` is the blake2b of its arrays."""

    mean: np.ndarray  # (source_dim,) float32
    components: np.ndarray  # (dims, source_dim) float32, orthonormal rows
    id: str
    source_dim: int
    dims: int

    def project(self, x: np.ndarray) -> np.ndarray:
        """Centre, project and L2-normalise rows (all-zero input rows stay zero)."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.source_dim:
            raise ConfigError(f"PCA model {self.id[:8]} projects {self.source_dim}-dim rows, "
                              f"got shape {x.shape}")
        y = (x - self.mean) @ self.components.T
        y[~x.any(axis=1)] = 0.0
        return _normalise(y)

    def save(self, path: Path) -> None:
        """Write the model as an ``.npz`` (atomically)."""
        buf = io.BytesIO()
        np.savez(buf, mean=self.mean, components=self.components, id=np.array(self.id),
                 format=np.array(1))
        atomic_write(Path(path), buf.getvalue())


def fit_pca(sample: np.ndarray, dims: int, seed: int = 0) -> PcaModel:
    """Fit PCA on ``sample`` (n, d) rows; at most ``MAX_PCA_SAMPLE`` rows are used, picked
    deterministically from ``seed``. Eigen-decomposes the d x d scatter matrix; each
    component's sign is fixed so its largest-magnitude entry is positive."""
    x = np.asarray(sample)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ConfigError(f"PCA sample must be a non-empty (n, d) matrix, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ConfigError("PCA sample contains NaN or infinity")
    d = x.shape[1]
    if not isinstance(dims, (int, np.integer)) or isinstance(dims, bool) or not 1 <= dims < d:
        raise ConfigError(f"PCA dims must be an integer in [1, {d - 1}] for {d}-dim vectors, "
                          f"got {dims!r}")
    if x.shape[0] > MAX_PCA_SAMPLE:
        idx = np.sort(np.random.default_rng(seed).choice(x.shape[0], MAX_PCA_SAMPLE,
                                                          replace=False))
        x = x[idx]
    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(axis=0, dtype=np.float64).astype(np.float32)
    xc = x - mean
    vals, vecs = np.linalg.eigh((xc.T @ xc).astype(np.float64))  # float32 GEMM: 2x faster
    comps = vecs[:, np.argsort(-vals, kind="stable")[:dims]].T
    signs = np.sign(comps[np.arange(dims), np.abs(comps).argmax(axis=1)])
    comps = (comps * np.where(signs == 0, 1.0, signs)[:, None]).astype(np.float32)
    return PcaModel(mean=mean, components=comps, id=_model_id(mean, comps), source_dim=d,
                    dims=int(dims))


def load_pca(path: Path) -> PcaModel:
    """Read a model written by ``PcaModel.save``; a damaged file raises ``CorruptStateError``."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            mean = np.asarray(z["mean"], dtype=np.float32)
            comps = np.asarray(z["components"], dtype=np.float32)
            stored = str(z["id"])
    except FileNotFoundError:
        raise
    except Exception as exc:  # zip, key and format errors all mean a damaged file
        raise CorruptStateError(f"PCA model {path} is unreadable ({exc}); delete it and lar "
                                "fits it again") from None
    if mean.ndim != 1 or comps.ndim != 2 or comps.shape[1] != mean.shape[0]:
        raise CorruptStateError(f"PCA model {path} has inconsistent shapes {mean.shape} and "
                                f"{comps.shape}; delete it and lar fits it again")
    if _model_id(mean, comps) != stored:
        raise CorruptStateError(f"PCA model {path} fails its id check; delete it and lar fits "
                                "it again")
    return PcaModel(mean=mean, components=comps, id=stored, source_dim=int(mean.shape[0]),
                    dims=int(comps.shape[0]))


def apply_pca(enc: UnitEncoding, model: PcaModel) -> UnitEncoding:
    """Project every token vector with ``model`` (renormalised)."""
    if enc.dim != model.source_dim:
        raise ConfigError(f"PCA model {model.id[:8]} expects {model.source_dim}-dim tokens, the "
                          f"encoding has {enc.dim}")
    return _rebuild(enc, model.project(enc.tokens_f32()), np.array(enc.token_spans),
                    enc.chunk_starts)


# -- int8 ------------------------------------------------------------------------------------
def quantize_int8(enc: UnitEncoding) -> UnitEncoding:
    """Per-token symmetric int8 (scale = max|x| / 127, float32 scales); ``tokens_f32()``
    dequantises within half a step (max|x| / 254) per element."""
    tokens, scales = _quantize(enc.tokens_f32())
    return UnitEncoding(
        model_id=enc.model_id, chunker_version=enc.chunker_version, tokens=tokens,
        token_spans=np.array(enc.token_spans, dtype=np.int64),
        chunk_starts=np.array(enc.chunk_starts, dtype=np.int64),
        chunk_spans=np.array(enc.chunk_spans, dtype=np.int64),
        pooled=None if enc.pooled is None else np.array(enc.pooled), token_scales=scales)


def bytes_per_token(enc: UnitEncoding) -> float:
    """Bytes per token a sidecar spends on this encoding's tokens: the token payload as stored
    (float32 is stored as float16), the int8 scale, and the two span offsets (int32 when they
    fit). 0.0 for an encoding without tokens."""
    n = enc.n_tokens
    if not n:
        return 0.0
    item = 1 if enc.tokens.dtype == np.int8 else 2
    scale = 4 if enc.token_scales is not None else 0
    span = 2 * np.dtype(index_dtype(np.asarray(enc.token_spans))).itemsize
    return float(enc.dim * item + scale + span)
