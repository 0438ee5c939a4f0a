"""Tests for lar.maxsim: exact late-interaction (MaxSim) scoring kernels."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from lar.core.errors import ConfigError
from lar.maxsim import Explanation, explain, iter_maxsim, maxsim, resolve_backend
from lar.maxsim.common import f16_to_f32, plan_blocks
from lar.maxsim.numpy_backend import iter_maxsim_numpy, maxsim_explain_numpy, maxsim_numpy

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------
# Hand-computed example: 2 query tokens, 3 documents of 1-3 tokens, in 2-d.
#
#   q0 = (1, 0)        q1 = (0, 1)
#   doc0: x0 = (1, 0)                                   q0.x: 1            q1.x: 0
#   doc1: x1 = (0, 2),  x2 = (1, 1)                     q0.x: 0, 1         q1.x: 2, 1
#   doc2: x3 = (-1, 0), x4 = (0.5, -1), x5 = (0.25, 0.75)
#                                                       q0.x: -1, .5, .25  q1.x: 0, -1, .75
#   per-token maxima:  doc0: (1, 0)     doc1: (1, 2)     doc2: (0.5, 0.75)
#   scores, w = (1, 1): doc0 = 1,   doc1 = 3,   doc2 = 1.25
#   scores, w = (2, 0): doc0 = 2,   doc1 = 2,   doc2 = 1.0    (q1 removed, q0 doubled)
#   scores, w = (0, 1): doc0 = 0,   doc1 = 2,   doc2 = 0.75
#   argmax within each doc: doc0 (0, 0), doc1 (1, 0), doc2 (1, 2)
# All values are exact in float16, so every backend must reproduce them exactly.
# ---------------------------------------------------------------------------------------
Q = np.array([[1, 0], [0, 1]], dtype=np.float32)
X = np.array([[1, 0], [0, 2], [1, 1], [-1, 0], [0.5, -1], [0.25, 0.75]], dtype=np.float16)
STARTS = np.array([0, 1, 3])
EXPECTED = np.array([1.0, 3.0, 1.25], dtype=np.float32)


def _brute(q, x, starts, weights=None):
    """Reference: plain python loops in float64."""
    q = np.asarray(q, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    w = np.ones(len(q)) if weights is None else np.asarray(weights, dtype=np.float64)
    ends = list(starts[1:]) + [len(x)]
    out = []
    for s, e in zip(starts, ends):
        total = 0.0
        for i in range(len(q)):
            best = -np.inf
            for t in range(s, e):
                best = max(best, float(np.dot(q[i], x[t])))
            total += w[i] * best
        out.append(total)
    return np.array(out)


def _random_block(rng, n_docs=40, d=16, nq=5, max_len=10, dtype=np.float16):
    lens = rng.integers(1, max_len + 1, size=n_docs)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    x = rng.standard_normal((int(lens.sum()), d)).astype(dtype)
    q = rng.standard_normal((nq, d)).astype(np.float32)
    return q, x, starts


# ----------------------------------------------------------------------- hand example
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_hand_example_numpy(dtype):
    got = maxsim_numpy(Q, X.astype(dtype), STARTS)
    assert got.dtype == np.float32 and got.shape == (3,)
    np.testing.assert_array_equal(got, EXPECTED)
    np.testing.assert_array_equal(maxsim(Q, X.astype(dtype), STARTS, backend="numpy"), EXPECTED)


def test_hand_example_lists_are_accepted():
    got = maxsim(Q.tolist(), X.astype(np.float32).tolist(), [0, 1, 3], backend="numpy")
    np.testing.assert_array_equal(got, EXPECTED)


@pytest.mark.parametrize(
    "weights, expected",
    [((2, 0), [2.0, 2.0, 1.0]), ((0, 1), [0.0, 2.0, 0.75]), ((0, 0), [0.0, 0.0, 0.0]), ((1, 1), EXPECTED)],
)
def test_hand_example_weights(weights, expected):
    w = np.array(weights, dtype=np.float32)
    np.testing.assert_array_equal(maxsim_numpy(Q, X, STARTS, w), np.array(expected, np.float32))


def test_zero_weight_removes_token():
    rng = np.random.default_rng(1)
    q, x, starts = _random_block(rng, nq=4)
    w = np.array([1.0, 0.0, 2.5, 1.0], dtype=np.float32)
    keep = w != 0
    np.testing.assert_allclose(
        maxsim_numpy(q, x, starts, w), maxsim_numpy(q[keep], x, starts, w[keep]), rtol=1e-6, atol=1e-6
    )
    np.testing.assert_allclose(maxsim_numpy(q, x, starts, w), _brute(q, x, starts, w), rtol=1e-5, atol=1e-4)


def test_hand_example_explain():
    expected_arg = [(0, 0), (1, 0), (1, 2)]
    expected_max = [(1.0, 0.0), (1.0, 2.0), (0.5, 0.75)]
    for j in range(3):
        e = explain(Q, X, starts=STARTS, doc=j)
        assert isinstance(e, Explanation)
        contrib, argmax, sim_max = e  # a plain tuple as well
        np.testing.assert_array_equal(argmax, expected_arg[j])
        np.testing.assert_array_equal(sim_max, expected_max[j])
        np.testing.assert_array_equal(contrib, expected_max[j])
        assert e.score == EXPECTED[j]
    e = explain(Q, X[3:6], weights=[0, 1])
    np.testing.assert_array_equal(e.contrib, [0.0, 0.75])
    np.testing.assert_array_equal(e.sim_max, [0.5, 0.75])
    for a, b in zip(explain(Q, X, starts=STARTS, doc=-1), explain(Q, X[3:6])):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------- random vs brute force
@pytest.mark.parametrize("block_tokens", [1, 3, 7, 16, 64, 100_000])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_numpy_matches_brute_force(block_tokens, dtype):
    rng = np.random.default_rng(block_tokens)
    q, x, starts = _random_block(rng, dtype=dtype)  # docs of 1..10 tokens: block 3 < a doc
    w = rng.uniform(0, 2, size=len(q)).astype(np.float32)
    for weights in (None, w):
        got = maxsim_numpy(q, x, starts, weights, block_tokens=block_tokens)
        np.testing.assert_allclose(got, _brute(q, x, starts, weights), rtol=1e-5, atol=1e-4)


def test_numpy_inner_steps_and_large_docs(monkeypatch):
    """Documents larger than a block and than an inner cache step are scored whole."""
    from lar.maxsim import numpy_backend

    monkeypatch.setattr(numpy_backend, "INNER_TOKENS", 5)
    rng = np.random.default_rng(7)
    q, x, starts = _random_block(rng, n_docs=30, max_len=23)
    for bt in (1, 4, 9, 50, 1000):
        np.testing.assert_allclose(
            maxsim_numpy(q, x, starts, block_tokens=bt), _brute(q, x, starts), rtol=1e-5, atol=1e-4
        )


def test_memmap_input(tmp_path):
    rng = np.random.default_rng(3)
    q, x, starts = _random_block(rng, n_docs=25)
    path = tmp_path / "tokens.f16"
    mm = np.memmap(path, dtype=np.float16, mode="w+", shape=x.shape)
    mm[:] = x
    mm.flush()
    ro = np.memmap(path, dtype=np.float16, mode="r", shape=x.shape)
    np.testing.assert_allclose(maxsim(q, ro, starts, backend="numpy"), _brute(q, x, starts), rtol=1e-5, atol=1e-4)


def test_iter_form_covers_all_docs_and_can_abort():
    rng = np.random.default_rng(4)
    q, x, starts = _random_block(rng, n_docs=50)
    full = maxsim_numpy(q, x, starts, block_tokens=20)
    parts = list(iter_maxsim_numpy(q, x, starts, block_tokens=20))
    assert len(parts) > 3
    assert parts[0][0].start == 0 and parts[-1][0].stop == len(starts)
    for (r1, _), (r2, _) in zip(parts, parts[1:]):
        assert r1.stop == r2.start
    for r, sc in parts:
        assert len(sc) == len(r)
        np.testing.assert_array_equal(sc, full[r.start : r.stop])
    it = iter_maxsim(q, x, starts, backend="numpy", block_tokens=20)
    r, sc = next(it)
    it.close()  # aborting between blocks is just stopping iteration
    assert len(sc) == len(r)


def test_plan_blocks_never_splits_documents():
    starts = np.array([0, 2, 10, 11, 30])
    # doc lengths 2, 8, 1, 19, 1
    assert plan_blocks(starts, 31, 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert plan_blocks(starts, 31, 10) == [(0, 2), (2, 3), (3, 4), (4, 5)]
    assert plan_blocks(starts, 31, 12) == [(0, 3), (3, 4), (4, 5)]
    assert plan_blocks(starts, 31, 20) == [(0, 3), (3, 5)]
    assert plan_blocks(starts, 31, 1000) == [(0, 5)]
    assert plan_blocks(starts, 31, 1) == [(i, i + 1) for i in range(5)]


def test_f16_to_f32_exact_for_every_half_value():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    with np.errstate(invalid="ignore"):
        ref = h.astype(np.float32)
    got = f16_to_f32(h, np.empty(h.shape, np.float32))
    nan = np.isnan(ref)
    assert np.isnan(got[nan]).all()
    np.testing.assert_array_equal(got[~nan], ref[~nan])  # incl. +-0, subnormals, +-inf
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(ref[~nan]))
    strided = h.reshape(256, 256)[:, ::2]  # non-contiguous input falls back to numpy's cast
    out = np.empty(strided.shape, np.float32)
    np.testing.assert_array_equal(np.isnan(f16_to_f32(strided, out)), np.isnan(strided.astype(np.float32)))


# ----------------------------------------------------------------------------- explain
def test_explain_consistent_with_scores():
    rng = np.random.default_rng(5)
    q, x, starts = _random_block(rng, n_docs=20, nq=6)
    w = rng.uniform(0, 3, size=6).astype(np.float32)
    w[2] = 0
    scores = maxsim_numpy(q, x, starts, w, block_tokens=8)
    ends = list(starts[1:]) + [len(x)]
    for j, (s, e) in enumerate(zip(starts, ends)):
        ex = explain(q, x, w, starts=starts, doc=j)
        assert ex.score == pytest.approx(float(scores[j]), abs=1e-5)
        np.testing.assert_allclose(ex.contrib, w * ex.sim_max, rtol=1e-6)
        assert ex.contrib[2] == 0
        assert ((0 <= ex.argmax) & (ex.argmax < e - s)).all()
        sim = q @ x[s:e].astype(np.float32).T
        np.testing.assert_allclose(sim[np.arange(6), ex.argmax], ex.sim_max, rtol=1e-6)
        np.testing.assert_allclose(sim.max(axis=1), ex.sim_max, rtol=1e-6)
        direct = maxsim_explain_numpy(q, x[s:e], w)
        np.testing.assert_array_equal(direct.argmax, ex.argmax)


# ------------------------------------------------------------------------------- torch
@pytest.fixture
def torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", message=".*index_reduce.*")
    return torch


def test_torch_hand_example(torch):
    from lar.maxsim.torch_backend import maxsim_torch

    np.testing.assert_array_equal(maxsim_torch(Q, X, STARTS, device="cpu"), EXPECTED)
    got = maxsim(Q, X, STARTS, weights=[2, 0], backend="torch", device="cpu")
    np.testing.assert_array_equal(got, [2.0, 2.0, 1.0])
    got = maxsim(Q, X, STARTS, weights=[0, 0], backend="torch", device="cpu")
    np.testing.assert_array_equal(got, [0.0, 0.0, 0.0])


@pytest.mark.parametrize("segment", ["auto", "segment_reduce", "index_reduce", "scatter", "pad", "numpy"])
@pytest.mark.parametrize("block_tokens", [3, 64, None])
def test_torch_cpu_matches_numpy(torch, segment, block_tokens):
    from lar.maxsim.torch_backend import maxsim_torch

    rng = np.random.default_rng(11)
    q, x, starts = _random_block(rng, n_docs=60, d=32, nq=8, max_len=12)
    w = rng.uniform(0, 2, size=8).astype(np.float32)
    w[0] = 0
    for weights in (None, w):
        ref = maxsim_numpy(q, x, starts, weights)
        got = maxsim_torch(q, x, starts, weights, device="cpu", block_tokens=block_tokens, segment=segment)
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


def test_torch_cpu_inner_steps(torch, monkeypatch):
    from lar.maxsim import torch_backend

    monkeypatch.setattr(torch_backend, "INNER_TOKENS_CPU", 5)
    rng = np.random.default_rng(12)
    q, x, starts = _random_block(rng, n_docs=30, max_len=23)
    for bt in (4, 50, 10_000):
        got = torch_backend.maxsim_torch(q, x, starts, device="cpu", block_tokens=bt)
        np.testing.assert_allclose(got, _brute(q, x, starts), rtol=1e-5, atol=1e-4)


def test_torch_tensor_inputs_and_low_precision(torch):
    from lar.maxsim.torch_backend import iter_maxsim_torch, maxsim_explain_torch, maxsim_torch

    rng = np.random.default_rng(13)
    q, x, starts = _random_block(rng, n_docs=30, d=24, nq=4)
    ref = maxsim_numpy(q, x, starts)
    xt = torch.from_numpy(x)
    np.testing.assert_allclose(maxsim(torch.from_numpy(q), xt, torch.from_numpy(starts)), ref, atol=1e-4)
    assert resolve_backend("auto", None, xt) == "torch"
    np.testing.assert_allclose(maxsim(q, xt, starts, backend="numpy"), ref, atol=1e-4)
    for cd, tol in (("tf32", 1e-4), ("bfloat16", 0.5), ("float16", 0.05)):
        got = maxsim_torch(q, x, starts, device="cpu", compute_dtype=cd)
        np.testing.assert_allclose(got, ref, atol=tol)
    parts = list(iter_maxsim_torch(q, x, starts, device="cpu", block_tokens=16))
    assert len(parts) > 1
    np.testing.assert_allclose(np.concatenate([p[1] for p in parts]), ref, atol=1e-4)
    ex_t = maxsim_explain_torch(q, x[starts[3] : starts[4]], device="cpu")
    ex_n = maxsim_explain_numpy(q, x[starts[3] : starts[4]])
    np.testing.assert_allclose(ex_t.contrib, ex_n.contrib, atol=1e-5)
    np.testing.assert_array_equal(ex_t.argmax, ex_n.argmax)
    ex_auto = explain(q, xt, starts=starts, doc=3)  # a tensor picks the torch backend
    np.testing.assert_allclose(ex_auto.contrib, ex_n.contrib, atol=1e-5)


def test_torch_bad_options(torch):
    from lar.maxsim.torch_backend import maxsim_torch

    with pytest.raises(ConfigError, match="compute_dtype"):
        maxsim_torch(Q, X, STARTS, device="cpu", compute_dtype="int8")
    with pytest.raises(ConfigError, match="segment"):
        maxsim_torch(Q, X, STARTS, device="cpu", segment="magic")
    with pytest.raises(ConfigError, match="device"):
        maxsim_torch(Q, X, STARTS, device="not-a-device")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA"):
            maxsim_torch(Q, X, STARTS, device="cuda")
    with pytest.raises(ConfigError, match="starts"):  # validated at call time, not on next()
        maxsim(Q, X, [1, 2], backend="torch", device="cpu")


def test_auto_backend_without_cuda(torch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert resolve_backend("auto") == "numpy"
    assert resolve_backend("auto", device="cpu") == "numpy"
    np.testing.assert_array_equal(maxsim(Q, X, STARTS), EXPECTED)


# ------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(q=np.ones((2, 3))), "dimension mismatch: query tokens have dim 3 but doc_tokens have dim 2"),
        (dict(q=np.ones(2)), "must be 2-D"),
        (dict(q=np.ones((0, 2))), "query q is empty"),
        (dict(q=[[np.nan, 1.0]]), "NaN"),
        (dict(q=np.array([["a", "b"]])), "real numbers"),
        (dict(doc_tokens=np.ones((0, 2), np.float16), starts=[0]), "doc_tokens is empty"),
        (dict(doc_tokens=np.ones((6, 2), np.int32)), "floating"),
        (dict(doc_tokens=np.ones(6, np.float16)), "2-D"),
        (dict(starts=[]), "starts is empty"),
        (dict(starts=[1, 3]), r"starts\[0\] must be 0"),
        (dict(starts=[0, 3, 3]), r"strictly increasing.*starts\[1\]=3 but starts\[2\]=3"),
        (dict(starts=[0, 3, 1]), "strictly increasing"),
        (dict(starts=[0, 6]), "only 6 rows"),
        (dict(starts=[[0, 1]]), "1-D"),
        (dict(starts=[0.0, 1.0]), "integers"),
        (dict(weights=[1.0]), r"weights must have shape \(2,\)"),
        (dict(weights=[[1.0, 1.0]]), r"weights must have shape \(2,\)"),
        (dict(weights=[1.0, -1.0]), ">= 0"),
        (dict(weights=[1.0, np.inf]), "NaN or infinite"),
        (dict(backend="gpu"), "unknown maxsim backend"),
        (dict(backend="numpy", device="cuda"), "CPU only"),
        (dict(backend="numpy", block_tokens=0), "block_tokens must be >= 1"),
        (dict(backend="numpy", block_tokens=1.5), "positive integer"),
        (dict(backend="numpy", block_tokens=True), "positive integer"),
        (dict(backend="numpy", compute_dtype="bfloat16"), "needs backend='torch'"),
    ],
)
def test_bad_input_raises_config_error(kwargs, match):
    args = dict(q=Q, doc_tokens=X, starts=STARTS, weights=None)
    args.update(kwargs)
    with pytest.raises(ConfigError, match=match) as info:
        maxsim(**args)
    assert isinstance(info.value, ValueError)
    if "backend" not in kwargs or kwargs.get("backend") == "numpy":
        with pytest.raises(ConfigError, match=match):
            list(iter_maxsim(**{**args, "backend": "numpy"}))


def test_iter_validates_eagerly():
    with pytest.raises(ConfigError):
        iter_maxsim_numpy(Q, X, [0, 0, 1])  # raises at call time, before any next()


def test_explain_bad_input():
    with pytest.raises(ConfigError, match="both starts= and doc="):
        explain(Q, X, starts=STARTS)
    with pytest.raises(ConfigError, match="out of range"):
        explain(Q, X, starts=STARTS, doc=3)
    with pytest.raises(ConfigError, match="integer document index"):
        explain(Q, X, starts=STARTS, doc=1.0)
    with pytest.raises(ConfigError, match="dimension mismatch"):
        explain(np.ones((2, 5)), X)
    with pytest.raises(ConfigError, match="weights must have shape"):
        explain(Q, X, weights=[1, 2, 3])


def test_package_imports_only_numpy():
    code = (
        "import sys, lar\n"
        "before = 'torch' in sys.modules\n"
        "import lar.maxsim, lar.maxsim.numpy_backend, lar.maxsim.torch_backend\n"
        "print(before, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    before, after = out.stdout.split()
    assert before == "False", "import lar imports torch: it must stay a lazy, optional import"
    assert after == "False", "lar.maxsim (its torch backend module too) imports torch at import"
