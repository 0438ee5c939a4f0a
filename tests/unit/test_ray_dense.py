"""The chunk-vector layers' exact cosine scan over shards on Ray actors
(lar.layers.kits.vectors.chunkshard and .sharded, through lar.distributed.ray_scan), on the local
2-CPU cluster (loopback only): the merged top k equals ``ChunkVectorStore.search``, a late shard
and a killed actor are reported and not covered, a restarted actor reloads its shard from the
store, the engine's search through the layer equals the local one, and ``Engine.close`` stops
the actors."""
from __future__ import annotations

import os
import re
import sys
import time
import zlib

import numpy as np
import pytest

from lar.distributed.ray_scan import ShardActor, ShardLoader
from lar.distributed.shards import shard_of, split
from lar.layers.dense import StaticLayer
from lar.layers.kits.vectors.chunkrows import normalise
from lar.layers.kits.vectors.chunkshard import StoreSource, merge_chunk_results, scan_chunk_units
from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

N_UNITS = 80
DIM = 16
BLOCK = 24  # rows per block: several blocks per shard


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """80 units of 1-6 random chunk vectors (and one unit with none) in a vector store."""
    folder = tmp_path_factory.mktemp("dense-shards") / "vectors"
    rng = np.random.default_rng(23)
    hashes = [f"{rng.integers(0, 2**62):016x}{i:016x}" for i in range(N_UNITS)]
    with ChunkVectorStore(folder, DIM) as store:
        for i, h in enumerate(hashes):
            n = 0 if i == 7 else int(rng.integers(1, 7))
            spans = np.stack([np.arange(n) * 10, np.arange(n) * 10 + 9], axis=1)
            store.put(h, spans, rng.standard_normal((n, DIM)).astype(np.float32))
        order = store.pack_order(hashes)
    q = rng.standard_normal(DIM).astype(np.float32)
    return folder, hashes, order, q


def _single(folder, hashes, q, k):
    with ChunkVectorStore(folder, DIM) as store:
        return store.search(q, hashes, k)


def _ids(top):
    return [(h, s, e) for _, h, s, e in top]


def _local_ids(found):
    return [(h, s, e) for h, s, e, _ in found.hits]


def _shard_scan(folder, part, q, k, **kw):
    return scan_chunk_units(normalise(q), None, part, ShardLoader(StoreSource(folder, DIM)), k,
                            block_rows=BLOCK, **kw)


def test_pack_order_leaves_out_the_unit_without_chunks(planted):
    folder, hashes, order, _ = planted
    assert sorted(order) == sorted(h for i, h in enumerate(hashes) if i != 7)


@pytest.mark.parametrize("k", [1, 10, 40])
def test_merged_chunk_shards_equal_the_single_scan_in_process(planted, k):
    """No Ray: each shard's part scanned on its own (in blocks), merged, equals the store's
    single-process search, hits and scores."""
    folder, hashes, order, q = planted
    whole = _single(folder, hashes, q, k)
    parts = [_shard_scan(folder, p, q, k) for p in split(order, 3)]
    merged = merge_chunk_results(parts, k)
    assert len(merged.top) == k and _ids(merged.top) == _local_ids(whole)
    assert np.allclose([s for s, *_ in merged.top], [s for *_, s in whole.hits], atol=1e-6)
    assert sorted(merged.scanned) == sorted(order) and not merged.aborted
    assert merged.rows == whole.n_total and merged.moments.n == whole.n_total
    assert merged.moments.result().mean == pytest.approx(whole.background.mean, abs=1e-6)


def test_a_shard_stops_after_its_first_block_at_the_deadline(planted):
    folder, hashes, order, q = planted
    res = _shard_scan(folder, order, q, 5, should_stop=lambda: True)
    sizes = {h: ChunkVectorStore(folder, DIM).get(h)[0].shape[0] for h in order[:12]}
    first, rows = [], 0
    for h in order:  # the first block: units until BLOCK rows are reached
        first.append(h)
        rows += sizes[h]
        if rows >= BLOCK:
            break
    assert res.aborted and res.scanned == first and res.rows == rows
    assert _ids(res.top) == _local_ids(_single(folder, first, q, 5))


def test_the_shard_actor_in_process_reads_its_units_once(planted):
    folder, hashes, order, q = planted
    actor = ShardActor(0, StoreSource(folder, DIM), scan_chunk_units)
    part = split(order, 2)[0]
    for _ in range(2):
        res, st = actor.scan(normalise(q), None, part, 10, time.time() + 60, {"block_rows": BLOCK})
        assert st["loaded"] == len(part) and st["scanned"] == len(part) and not st["aborted"]
    assert _ids(res.top) == _local_ids(_single(folder, part, q, 10))
    st = actor.scan(normalise(q), None, [hashes[7], "f" * 32], 3, time.time() + 60, {})[1]
    assert st["scanned"] == 1  # the unit without chunks is covered; the unknown one is not
    assert actor.scan(normalise(q), None, ["f" * 32], 3, time.time() + 60, {})[0].unreadable[0][0] == "f" * 32


def slow_chunk_scan(q, w, hashes, load, k, *, marker, **kw):
    """The real shard scan, held up for 1.5 s on shard 0 while ``marker`` exists."""
    if os.path.exists(marker) and hashes and shard_of(hashes[0], 2) == 0:
        time.sleep(1.5)
    return scan_chunk_units(q, w, hashes, load, k, **kw)


@pytest.fixture(scope="module")
def shards(ray_cluster, planted, tmp_path_factory):
    """Two shard actors over the planted store; shard 0 is held up while the marker exists."""
    import functools

    import ray.cloudpickle

    from lar.layers.kits.vectors.sharded import ChunkShards

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # slow_chunk_scan by value
    folder, *_ = planted
    marker = tmp_path_factory.mktemp("marker") / "slow"
    sh = ChunkShards(2, folder, DIM, max_restarts=2,
                     scan=functools.partial(slow_chunk_scan, marker=str(marker)))
    assert sh.scanner.ready()
    yield sh, marker
    sh.close()


@pytest.mark.slow
def test_sharded_dense_top_k_equals_the_single_process_scan(shards, planted):
    sh, _ = shards
    folder, hashes, order, q = planted
    for k in (1, 10, 40):
        whole = _single(folder, hashes, q, k)
        res, run = sh.scan(q, order, k, 30.0, block_rows=BLOCK)
        assert run.answered == (0, 1) and not run.late and not run.failed and run.coverage == 1.0
        assert sorted(res.scanned) == sorted(order) and not res.aborted
        assert len(res.top) == k and _ids(res.top) == _local_ids(whole)
        assert np.allclose([s for s, *_ in res.top], [s for *_, s in whole.hits], atol=1e-6)
    sizes = [len(p) for p in split(order, 2)]  # each shard read its own units once, only those
    assert sorted(st["loaded"] for st in run.per_shard) == sorted(sizes)


@pytest.mark.slow
def test_a_late_dense_shard_is_reported_and_its_units_not_covered(shards, planted):
    sh, marker = shards
    folder, hashes, order, q = planted
    part1 = split(order, 2)[1]
    marker.touch()
    try:
        res, run = sh.scan(q, order, 10, 0.6, block_rows=BLOCK)
    finally:
        marker.unlink()
    assert run.late == (0,) and run.answered == (1,) and not run.failed and res.aborted
    assert run.coverage == pytest.approx(len(part1) / len(order))
    assert sorted(res.scanned) == sorted(part1)
    assert _ids(res.top) == _local_ids(_single(folder, part1, q, 10))  # what shard 1 sent
    time.sleep(1.6)  # shard 0 finishes its held-up scan (its queue is then empty)


@pytest.mark.slow
def test_a_killed_dense_actor_is_uncovered_then_restarted_and_reloaded(shards, planted, ray_cluster):
    sh, marker = shards
    slow = sh.scanner
    folder, hashes, order, q = planted
    part0, part1 = split(order, 2)
    sh.scan(q, order, 5, 30.0)  # both shards loaded
    pid0 = slow.pids()[0]
    marker.touch()  # shard 0 is mid-scan when it is killed
    try:
        results, run = slow.scan(normalise(q), None, order, 10, 30.0, {},
                                 on_sent=lambda: ray_cluster.kill(slow.actors[0], no_restart=False))
    finally:
        marker.unlink()
    assert [i for i, _ in run.failed] == [0] and run.answered == (1,) and "Actor" in run.failed[0][1]
    assert run.coverage == pytest.approx(len(part1) / len(order))
    t0 = time.monotonic()
    while True:  # Ray restarts it; until it answers its shard stays uncovered
        res, run = sh.scan(q, order, 10, 10.0)
        if run.answered == (0, 1) or time.monotonic() - t0 > 60:
            break
    assert run.answered == (0, 1) and run.coverage == 1.0
    st0 = next(s for s in run.per_shard if s["shard"] == 0)
    assert st0["restarted"] is True and st0["loaded"] == len(part0)  # reloaded from the store
    assert slow.pids()[0] != pid0
    assert _ids(res.top) == _local_ids(_single(folder, hashes, q, 10))


class WordHash:
    """A deterministic bag-of-words encoder: each word adds a fixed random vector."""

    dim = 32
    model_id = "word-hash"

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i] += np.random.default_rng(zlib.crc32(w.encode())).standard_normal(self.dim)
        return out


class WordHashLayer(StaticLayer):
    """The real chunk-vector layer (chunking, vector store, manifest, hubness) with WordHash."""

    name = "wordhash"
    extra_modules = ()

    def _resolve(self) -> None:
        self._encoder = None
        self._model_id = "word-hash"

    def encoder(self):
        return WordHash()


@pytest.fixture(scope="module")
def built_wordhash(tmp_path_factory):
    from lar.core.registry import register_layer, unregister_layer

    import lar

    register_layer(WordHashLayer, replace=True)
    base = tmp_path_factory.mktemp("wordhash")
    corpus = base / "corpus"
    corpus.mkdir()
    for i in range(30):
        words = " ".join(f"topic{(i * 5 + j) % 41}" for j in range(30 + 10 * (i % 4)))
        (corpus / f"doc{i:02d}.md").write_text(f"# Note {i}\n\n{words}\n")
    with lar.open(corpus, state=base / "state") as eng:
        assert eng.build(timebox=120, layers=["wordhash"])["layers"]["wordhash"]["ok"] == 30
    yield corpus, base / "state"
    unregister_layer("wordhash")


@pytest.mark.slow
def test_the_layer_on_shards_returns_the_local_hits_and_close_stops_its_actors(built_wordhash,
                                                                                ray_cluster):
    import lar

    corpus, state = built_wordhash
    queries = ["topic3 topic4", "topic17 note", "topic40 topic0 topic1"]

    def hits(config):
        with lar.open(corpus, state=state, config=config) as eng:
            out = []
            for q in queries:
                res = eng.search(q, layers=["wordhash"], timebox=60, k=5)
                run = res.run("wordhash")
                out.append(([(h.id, round(h.evidence["wordhash"].score, 5))
                             for h in res.layer_hits["wordhash"]], run.coverage, dict(run.details or {})))
            actors = eng.layers["wordhash"].sharded.scanner.actors if config else []
        return out, actors

    (local, _), (sharded, actors) = hits({}), hits({"wordhash_shards": 2})
    for (lh, lcov, _), (sh, scov, details) in zip(local, sharded):
        assert len(lh) >= 5 and sh == lh and scov == lcov == 1.0
        assert details["shards"]["answered"] == [0, 1] and details["shards"]["coverage"] == 1.0
    assert len(actors) == 2  # Engine.close stopped them: they are gone for good
    for a in actors:
        with pytest.raises(ray_cluster.exceptions.RayActorError):
            ray_cluster.get(a.ping.remote(), timeout=30)
