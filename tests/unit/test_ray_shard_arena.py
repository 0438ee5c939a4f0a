"""Shard actors with their own device arena (issue 24 item 2, "each with its own token arena,
on CPU or on its GPU"): the arena is a ``lar.maxsim.resident.DeviceArena`` on a torch device
(the torch CPU device here; CUDA in the ``gpu`` test), filled by a shard's first scan and kept
across searches; the merged top k equals the single-process host scan."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from lar.core.errors import ConfigError
from lar.distributed.ray_scan import ShardActor
from lar.distributed.shards import split
from lar.layers.late.scan import scan_units
from lar.layers.late.shard_source import SidecarSource
from lar.layers.late.sharded import LateShards, ShardArena, merge_results, shard_gpus

from test_ray_scan import OPTS, _ids, _local, planted  # noqa: F401  (the planted sidecars)

pytest.importorskip("torch")

TORCH = {"backend": "torch", "device": "cpu", "block_tokens": 200}


def _actor(root, i, arena):
    return ShardActor(i, SidecarSource(root, "planted"), scan_units, arena)


def test_a_shard_keeps_its_units_in_its_arena_across_searches(planted):
    root, hashes, q, w = planted
    parts = split(hashes, 2)
    actors = [_actor(root, i, ShardArena("torch", "cpu", 64)) for i in range(2)]
    for rnd in range(3):
        answers = [a.scan(q, w, p, 10, float("inf"), TORCH) for a, p in zip(actors, parts)]
        merged = merge_results([r for r, _ in answers], 10)
        whole = _local(root, hashes, q, w, 10)
        assert _ids(merged.top) == _ids(whole.top)
        assert np.allclose([s for s, *_ in merged.top], [s for s, *_ in whole.top], atol=1e-5)
        for (res, st), p in zip(answers, parts):
            rs = st["resident"]
            assert rs["units_resident"] == len(p) and rs["resident_bytes"] > 0
            # the first scan copies every unit of the shard once; later ones copy none
            assert res.copied_tokens == (res.tokens if rnd == 0 else 0)
            assert res.resident_tokens == (0 if rnd == 0 else res.tokens)


def test_without_an_arena_the_shard_scans_from_the_host(planted):
    root, hashes, q, w = planted
    res, st = _actor(root, 0, None).scan(q, w, hashes, 10, float("inf"), OPTS)
    assert "resident" not in st and res.copied_tokens == 0 and res.resident_tokens == 0
    assert _ids(res.top) == _ids(_local(root, hashes, q, w, 10).top)


def test_the_arena_maker_pickles_its_plan_only():
    a = ShardArena("torch", "cpu", 8)
    a.arena()
    b = pickle.loads(pickle.dumps(a))
    assert b.plan == ("torch", "cpu", 8) and b.holder is None and b.status() is None


def test_shard_gpus_follow_the_device():
    assert shard_gpus({"device": "cuda", "shard_gpus": None}) == 1.0
    assert shard_gpus({"device": "cuda:1", "shard_gpus": 0.5}) == 0.5
    assert shard_gpus({"device": None, "shard_gpus": None}) == 0.0
    assert shard_gpus({"device": "cpu", "shard_gpus": None}) == 0.0


def test_the_shard_gpus_option_is_checked():
    from lar.layers.late.layer import LateLayer

    o = dict(LateLayer.defaults)
    for bad in (-1, "1", True, 9):
        with pytest.raises(ConfigError, match="shard_gpus"):
            LateLayer.check_options({**o, "shard_gpus": bad})
    LateLayer.check_options({**o, "shard_gpus": 0.25})


@pytest.mark.slow
def test_shard_actors_on_the_cluster_keep_their_arenas(ray_cluster, planted):
    root, hashes, q, w = planted
    sh = LateShards(2, root, "planted", max_restarts=1, arena=ShardArena("torch", "cpu", 64))
    try:
        assert sh.scanner.ready(timeout=120)
        for k in (1, 10, 40):
            whole = _local(root, hashes, q, w, k)
            res, run = sh.scan(q, w, hashes, k, 120.0, **TORCH)
            assert run.answered == (0, 1) and _ids(res.top) == _ids(whole.top)
            assert np.allclose([s for s, *_ in res.top], [s for s, *_ in whole.top], atol=1e-5)
        assert sorted(st["resident"]["units_resident"] for st in run.per_shard) == sorted(len(p) for p in split(hashes, 2))
        assert res.copied_tokens == 0  # the third search found every unit resident
    finally:
        sh.close()


@pytest.mark.gpu
def test_shard_actors_with_a_gpu_keep_their_arenas_on_cuda(ray_cluster, planted):
    root, hashes, q, w = planted
    sh = LateShards(1, root, "planted", arena=ShardArena("torch", "cuda", 256), gpus=1.0)
    try:
        assert sh.scanner.ready()
        res, run = sh.scan(q, w, hashes, 10, 60.0, backend="torch", device="cuda", block_tokens=200)
        assert run.answered == (0,) and _ids(res.top) == _ids(_local(root, hashes, q, w, 10).top)
        assert run.per_shard[0]["resident"]["device"].startswith("cuda")
    finally:
        sh.close()
