"""Local hubness of vector hits (lar.layers.kits.vectors.hubness): known values on small matrices."""
import numpy as np
import pytest

from lar.core.errors import ConfigError
from lar.layers.kits.vectors.hubness import Reference, ReferenceCache, hubness


def unit(*rows):
    x = np.array(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_hubness_is_the_mean_cosine_to_the_k_nearest_reference_rows():
    ref = Reference(unit([1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]), 4)
    v = unit([1, 0, 0], [0, 0, 1])
    got = hubness(v, ref, k=2)
    # row 0 is itself in the reference (excluded): neighbours [1,1,0] (0.7071) and [0,1,0] or [0,0,1] (0)
    assert got[0] == pytest.approx((np.sqrt(0.5) + 0.0) / 2)
    assert got[1] == pytest.approx(0.0)  # orthogonal to every other row
    assert hubness(v, ref, k=1)[0] == pytest.approx(np.sqrt(0.5))


def test_a_hub_scores_higher_than_a_loner():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(200, 16)).astype(np.float32)
    hub = base.mean(axis=0, keepdims=True)  # near the centre of the cloud: near everything
    loner = -hub + rng.normal(scale=0.01, size=hub.shape)
    ref = Reference(unit(*base), 200)
    h = hubness(np.vstack([hub, loner]), ref, k=5)
    assert h[0] > h[1]


def test_empty_and_bad_input():
    ref = Reference(np.zeros((0, 3), np.float32), 0)
    assert hubness(unit([1, 0, 0]), ref).tolist() == [0.0]
    with pytest.raises(ConfigError, match="k must be"):
        hubness(unit([1, 0, 0]), Reference(unit([0, 1, 0]), 1), k=0)
    with pytest.raises(ConfigError, match="dims"):
        hubness(unit([1, 0]), Reference(unit([0, 1, 0]), 1))
    with pytest.raises(ConfigError, match="size"):
        ReferenceCache(0)


class FakeStore:
    dim = 2

    def __init__(self, rows):
        self.rows = rows
        self.calls = 0

    def matrix(self, hashes):
        from types import SimpleNamespace

        self.calls += 1
        hs = [h for h in hashes if h in self.rows]
        vecs = np.array([v for h in hs for v in self.rows[h]], np.float32).reshape(-1, 2)
        return SimpleNamespace(vectors=vecs, owners=hs)


def test_reference_cache_samples_up_to_size_and_rebuilds_when_units_change():
    store = FakeStore({f"u{i}": [[1.0, i], [i, 1.0]] for i in range(10)})
    cache = ReferenceCache(size=5)
    ref = cache.get(store, [f"u{i}" for i in range(10)])
    assert ref.vectors.shape == (5, 2) and ref.n_units == 10
    assert np.allclose(np.linalg.norm(ref.vectors, axis=1), 1.0)
    again = cache.get(store, {f"u{i}" for i in range(10)})
    assert again is ref and store.calls == 1
    fewer = cache.get(store, ["u1", "u2"])
    assert fewer.vectors.shape == (4, 2) and fewer.n_units == 2
