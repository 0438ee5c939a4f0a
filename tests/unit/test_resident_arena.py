"""The late layer's token arena resident on the scan device (issue 23, part 1).

The device is torch's CPU device here (``DeviceArena("cpu", ...)``: real torch tensors, the very
code path a GPU takes, every unit copied through ``lar.maxsim.resident.host_to_device``, which
the tests wrap to count what crosses to the "device"); the ``gpu`` tests at the end run the same
checks on CUDA where there is one.

Expected values: the first scan copies every unit once; a second and a third copy nothing; one
more unit costs one copy of exactly its rows; a dropped unit's slot is reused by the next unit
of its size without new device memory; past the budget, units are scanned from the host and
counted as such; and the scores and top-k equal the plain host scan's (numpy) to 1e-5.
"""
from __future__ import annotations

import numpy as np
import pytest

from lar.encoders.encoding import UnitEncoding
from lar.layers.late.scan import scan_units
from lar.maxsim import resident as resident_mod
from lar.maxsim.resident import DeviceArena

pytest.importorskip("torch")

DIM = 16
K = 8


def _unit(rng, sizes, dim=DIM) -> UnitEncoding:
    n = sum(sizes)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
    spans = np.stack([np.arange(n) * 4, np.arange(n) * 4 + 3], axis=1).astype(np.int64)
    chunks = np.stack([starts * 4, (starts + np.array(sizes)) * 4], axis=1).astype(np.int64)
    return UnitEncoding("m", "1", x.astype(np.float16), spans, starts, chunks)


def _units(seed: int, n: int, sizes=(5, 7, 3)) -> dict[str, UnitEncoding]:
    rng = np.random.default_rng(seed)
    return {f"{seed:04x}{i:028x}": _unit(rng, list(sizes)) for i in range(n)}


def _query(seed: int = 1):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((6, DIM)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q, np.array([1, 0.5, 2, 1, 0, 1.5], dtype=np.float32)


class Counter:
    """Wraps ``host_to_device``: how many copies, of how many rows."""

    def __init__(self, monkeypatch):
        self.rows: list[int] = []
        real = resident_mod.host_to_device

        def counted(dst, src):
            self.rows.append(int(src.shape[0]))
            real(dst, src)

        monkeypatch.setattr(resident_mod, "host_to_device", counted)

    def take(self) -> list[int]:
        out, self.rows = self.rows, []
        return out


def _scan(units, arena=None, order=None, device=None):
    q, w = _query()
    kw = {"resident": arena, "backend": "torch", "device": device} if arena is not None else {
        "backend": "numpy"}
    return scan_units(q, w, list(order or units), units.get, K, block_tokens=200, **kw)


def _same_results(got, want) -> None:
    assert [t[1:] for t in got.top] == [t[1:] for t in want.top]
    np.testing.assert_allclose([t[0] for t in got.top], [t[0] for t in want.top], atol=1e-5)
    assert sorted(got.scanned) == sorted(want.scanned) and got.tokens == want.tokens


def test_the_arena_stays_on_the_device_across_searches(monkeypatch, device="cpu"):
    units = _units(3, 12)
    rows = [e.n_tokens for e in units.values()]
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 1 << 20)
    plain = _scan(units)
    first = _scan(units, arena, device=device)
    assert counter.take() == rows  # the first scan fills it: every unit once, in scan order
    assert first.copied_tokens == sum(rows) and first.resident_tokens == 0 and first.hit_rate == 0
    _same_results(first, plain)
    for _ in range(2):  # a second and a third search copy zero built units' tokens
        again = _scan(units, arena, device=device)
        assert counter.take() == []
        assert again.hit_rate == 1.0 and again.copied_tokens == 0 and again.host_tokens == 0
        _same_results(again, plain)
    st = arena.stats()
    assert st.units_resident == 12 and st.rows_resident == sum(rows) and st.copies == 12
    assert st.resident_bytes == sum(rows) * DIM * 2  # float16 rows on the device
    assert st.rows_hit == 2 * sum(rows) and st.rows_scanned == 3 * sum(rows)
    assert st.hit_rate == pytest.approx(2 / 3)
    blocks = arena.block([arena.get(h) for h in units])  # back to back: one view of a segment
    assert blocks.dtype == arena.torch.float16 and blocks.device.type == arena.device.type
    assert np.array_equal(blocks.cpu().numpy(), np.concatenate([e.tokens for e in units.values()]))


def test_one_more_unit_copies_only_that_unit(monkeypatch, device="cpu"):
    units = _units(4, 10)
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 1 << 20)
    _scan(units, arena, device=device)
    counter.take()
    new = _units(5, 1, sizes=(9, 2))
    units.update(new)  # built since the last search
    res = _scan(units, arena, device=device)
    (h, enc), = new.items()
    assert counter.take() == [enc.n_tokens] and res.copied_tokens == enc.n_tokens
    assert res.resident_tokens == res.tokens - enc.n_tokens
    _same_results(res, _scan(units))


def test_dropping_a_unit_frees_its_slot(monkeypatch, device="cpu"):
    units = _units(6, 8)
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 1 << 20)
    _scan(units, arena, device=device)
    counter.take()
    gone = list(units)[3]
    slot = arena.get(gone)
    allocated = arena.stats().allocated_bytes
    assert arena.drop([gone]) == 1 and gone not in arena and len(arena) == 7
    assert arena.stats().rows_resident == 7 * 15
    del units[gone]
    res = _scan(units, arena, device=device)
    assert counter.take() == [] and res.hit_rate == 1.0  # the others are still there
    newcomer = _units(7, 1)  # same size (15 rows): it takes the freed slot, no new memory
    units.update(newcomer)
    _scan(units, arena, device=device)
    (h, _), = newcomer.items()
    assert arena.get(h) == slot and arena.stats().allocated_bytes == allocated
    assert counter.take() == [15]
    _same_results(_scan(units, arena, device=device), _scan(units))


def test_units_past_the_budget_are_scanned_from_the_host(monkeypatch, device="cpu"):
    units = _units(8, 10)  # 15 rows x 16 dims x 2 bytes = 480 bytes each
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 4 * 480 + 100)  # room for 4 units
    plain = _scan(units)
    first = _scan(units, arena, device=device)
    assert counter.take() == [15] * 4
    st = arena.stats()
    assert st.units_resident == 4 and st.units_over_budget == 6
    assert st.allocated_bytes <= arena.budget_bytes
    assert first.copied_tokens == 60 and first.host_tokens == 90
    _same_results(first, plain)
    again = _scan(units, arena, device=device)
    assert counter.take() == []  # the budget is full: nothing more crosses
    assert again.resident_tokens == 60 and again.host_tokens == 90
    assert again.hit_rate == pytest.approx(0.4)
    _same_results(again, plain)
    d = arena.stats().to_dict()
    assert d["units_resident"] == 4 and d["units_over_budget"] == 6 and d["hit_rate"] == 0.2


def test_int8_units_stay_int8_on_the_device(monkeypatch, device="cpu"):
    from lar.layers.kits.vectors.levers import quantize_int8

    units = {h: quantize_int8(e) for h, e in _units(9, 6).items()}
    assert next(iter(units.values())).token_scales is not None
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 1 << 20)
    plain = _scan(units)
    first = _scan(units, arena, device=device)
    assert len(counter.take()) == 2 * 6  # the int8 rows and their scales, once per unit
    again = _scan(units, arena, device=device)
    assert counter.take() == [] and again.hit_rate == 1.0
    assert arena.stats().resident_bytes == 6 * 15 * (DIM + 4)  # 1 byte a value + a float scale
    _same_results(first, plain)
    _same_results(again, plain)


def test_a_scan_order_from_the_arena_reads_views():
    from lar.layers.late.order import scan_order

    units = _units(10, 6)
    arena = DeviceArena("cpu", 1 << 20)
    order = list(units)[::-1]
    _scan(units, arena, order=order)
    pos = arena.positions()
    assert [h for h, _ in sorted(pos.items(), key=lambda kv: kv[1])] == order
    assert scan_order(set(units), [], pos, {}, {}) == order  # the layer scans in arena order


def test_blocks_from_a_cuda_arena_are_larger():
    from lar.layers.late.layer import LateLayer
    from lar.layers.late.scan import DEFAULT_BLOCK_TOKENS, block_tokens_for

    class Cuda:
        device = type("D", (), {"type": "cuda"})()

    assert LateLayer.defaults["block_tokens"] is None  # auto
    assert block_tokens_for(None) == block_tokens_for(DeviceArena("cpu", 1)) == DEFAULT_BLOCK_TOKENS
    assert block_tokens_for(Cuda()) == 1 << 20


def test_device_mb_option_and_budget():
    from lar.core.errors import ConfigError
    from lar.layers.kits.resident import check_device_mb, resident_budget

    assert resident_budget("numpy", "cpu", 64) is None  # the numpy kernel: no device
    assert resident_budget("torch", "cpu", 0) is None  # 0: off
    assert resident_budget("torch", "cpu", None) is None  # auto: none on the CPU
    assert resident_budget("torch", "cpu", 3) == ("cpu", 3 << 20)
    for bad in (-1, True, 1.5, "64"):
        with pytest.raises(ConfigError, match="device_mb"):
            check_device_mb("late", bad)


ON_CPU = {"late_device": "cpu", "late_device_mb": 64, "dense_device": "cpu", "dense_device_mb": 64}


@pytest.mark.slow
def test_late_and_dense_keep_their_vectors_on_the_device(corpus, tmp_path, monkeypatch):
    """Through the engine: ``late_device="cpu", late_device_mb=64`` (and the same for dense)
    scan from resident arenas; searches after the first copy nothing; status reports it (the
    object, --json's figures, the text line); hits equal the host scan's."""
    import json

    import lar

    state = tmp_path / "st"
    query = "how do we combine ranked lists by adding one over constant plus rank"
    eng = lar.open(corpus, state=state, config=ON_CPU)
    try:
        eng.build(timebox=300, layers=["late", "dense"])
        counter = Counter(monkeypatch)
        runs = {name: [eng.search(query, timebox=60, layers=[name], k=5) for _ in range(3)]
                for name in ("late", "dense")}
        copies = counter.take()
        st = eng.status()
        # one more file: its unit is built, and the next searches copy that unit alone
        (corpus / "extra_note.txt").write_text("Reciprocal rank fusion adds one over a constant "
                                               "plus the rank of each list.\n")
        eng.build(timebox=300, layers=["late", "dense"])
        last = {name: eng.search(query, timebox=60, layers=[name], k=5) for name in ("late", "dense")}
        one_more = counter.take()
        after = eng.status()
    finally:
        eng.close()
    assert len(one_more) == 2  # one copy of the new unit's tokens (late), one of its vectors
    for name in ("late", "dense"):
        r = after.layer(name).resident
        assert r["units_resident"] == st.layer(name).resident["units_resident"] + 1
        assert r["copies"] == st.layer(name).resident["copies"] + 1
    late, dense = st.layer("late"), st.layer("dense")
    assert late.built_units > 0 and late.resident is not None and dense.resident is not None
    # each unit once, at the first search: tokens for late, chunk vectors for dense
    assert len(copies) == late.resident["copies"] + dense.resident["copies"]
    for layer in (late, dense):
        r = layer.resident
        assert 0 < r["units_resident"] <= layer.built_units and r["copies"] == r["units_resident"]
        assert r["hit_rate"] == 0.6667 and r["resident_bytes"] > 0 and r["device"] == "cpu"
        assert r["units_over_budget"] == 0
        assert "resident on cpu:" in layer.resident_text() and "hit rate 67%" in layer.resident_text()
        details = [{x.name: x for x in res.runs}[layer.name].details["resident"]
                   for res in runs[layer.name]]
        assert [d["hit_rate"] for d in details] == [0.0, 1.0, 1.0]
    assert late.device == "cpu" and dense.device == "cpu"
    doc = json.loads(json.dumps(st.to_dict()))  # status --json: the same figures
    js = next(x for x in doc["layers"] if x["name"] == "late")["resident"]
    assert js["units_resident"] == late.resident["units_resident"] and js["hit_rate"] == 0.6667
    assert next(x for x in doc["layers"] if x["name"] == "bm25")["resident"] is None
    text = str(st).splitlines()
    i = next(i for i, line in enumerate(text) if line.strip().startswith("late "))
    assert text[i + 1].strip() == late.resident_text()
    from lar_magics.render import coverage_html

    assert late.resident_text() in coverage_html(st) and late.resident_text() in st._repr_html_()
    plain = lar.open(corpus, state=state, config={"late_device_mb": 0, "dense_device_mb": 0})
    try:
        want = {name: plain.search(query, timebox=60, layers=[name], k=5)
                for name in ("late", "dense")}
        assert plain.status().layer("late").resident is None
        assert plain.status().layer("dense").resident is None
    finally:
        plain.close()
    for name in ("late", "dense"):
        got = [(h.path, h.evidence[name].score) for h in last[name].hits]
        exp = [(h.path, h.evidence[name].score) for h in want[name].hits]
        assert [p for p, _ in got] == [p for p, _ in exp] and got
        np.testing.assert_allclose([s for _, s in got], [s for _, s in exp], atol=1e-5)


def test_a_full_arena_frees_the_slots_of_units_no_longer_built():
    from lar.layers.kits.resident import ResidentHolder

    holder = ResidentHolder()
    arena = holder.arena("torch", "cpu", 1)  # 1 MiB: room for two units of 16,000 rows x 32 B
    assert holder.arena("torch", "cpu", 1) is arena  # made once
    units = _units(11, 4, sizes=(8000, 8000))
    for h, e in list(units.items())[:2]:
        arena.put(h, e.tokens)
    assert holder.prune(set()) == 0  # nothing past the budget: the arena is left alone
    for h, e in list(units.items())[2:]:
        assert arena.put(h, e.tokens) is None
    assert arena.stats().units_over_budget == 2
    assert holder.prune(set(list(units)[1:])) == 1  # the first is no longer built: its slot goes
    assert len(arena) == 1 and arena.stats().units_over_budget == 0
    h, e = list(units.items())[2]
    assert arena.put(h, e.tokens) is not None  # its room is reused


# -- dense/static: the chunk vectors on the device ----------------------------------------------
def _store(tmp_path, n_units=9, rows=20, dim=DIM, seed=0):
    from lar.layers.kits.vectors.chunkstore import ChunkVectorStore

    rng = np.random.default_rng(seed)
    st = ChunkVectorStore(tmp_path / "vec", dim)
    for i in range(n_units):
        spans = np.stack([np.arange(rows) * 10, np.arange(rows) * 10 + 9], axis=1)
        st.put(f"{i:032x}", spans, rng.standard_normal((rows, dim)).astype(np.float32))
    return st, rng


def _same_chunks(got, want) -> None:
    assert [h[:3] for h in got.hits] == [h[:3] for h in want.hits]
    np.testing.assert_allclose([h[3] for h in got.hits], [h[3] for h in want.hits], atol=1e-5)
    assert got.fraction == want.fraction == 1.0


def test_chunk_vectors_stay_on_the_device_across_searches(tmp_path, monkeypatch, device="cpu"):
    st, rng = _store(tmp_path)
    q = rng.standard_normal(DIM).astype(np.float32)
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 1 << 20)
    plain = st.search(q, None, 7)
    first = st.search(q, None, 7, arena=arena, block_rows=50)
    assert counter.take() == [20] * 9 and first.resident["hit_rate"] == 0.0
    _same_chunks(first, plain)
    for _ in range(2):
        again = st.search(q, None, 7, arena=arena, block_rows=50)
        assert counter.take() == [] and again.resident == {"hit_rate": 1.0, "copied_rows": 0,
                                                          "host_rows": 0}
        _same_chunks(again, plain)
    assert arena.stats().resident_bytes == 9 * 20 * DIM * 2  # float16 rows
    # a replaced unit (new rows at the pack's end) is copied afresh, alone
    h = f"{4:032x}"
    spans = np.stack([np.arange(5) * 10, np.arange(5) * 10 + 9], axis=1)
    st.put(h, spans, rng.standard_normal((5, DIM)).astype(np.float32))
    res = st.search(q, None, 7, arena=arena)
    assert counter.take() == [5] and res.resident["copied_rows"] == 5
    _same_chunks(res, st.search(q, None, 7))
    st.drop([f"{0:032x}"])
    arena.drop([f"{0:032x}"])  # what the layer's drop does
    assert arena.stats().units_resident == 8
    _same_chunks(st.search(q, None, 7, arena=arena), st.search(q, None, 7))
    assert counter.take() == []
    st.close()


def test_chunk_vectors_past_the_budget_are_scored_on_the_host(tmp_path, monkeypatch, device="cpu"):
    st, rng = _store(tmp_path)
    q = rng.standard_normal(DIM).astype(np.float32)
    counter = Counter(monkeypatch)
    arena = DeviceArena(device, 3 * 20 * DIM * 2)  # three units
    first = st.search(q, None, 7, arena=arena)
    assert counter.take() == [20] * 3 and first.resident["host_rows"] == 6 * 20
    again = st.search(q, None, 7, arena=arena)
    assert counter.take() == [] and again.resident["hit_rate"] == pytest.approx(1 / 3)
    _same_chunks(again, st.search(q, None, 7))
    st.close()


def test_dense_layer_options_and_device_word():
    from lar.core.errors import ConfigError
    from lar.layers.dense import DenseLayer, StaticLayer
    from lar.layers.kits.resident import resident_device

    assert DenseLayer.defaults["device_mb"] is None and StaticLayer.defaults["device_mb"] is None
    with pytest.raises(ConfigError, match="device_mb"):
        DenseLayer.check_options({**DenseLayer.defaults, "device_mb": -5})
    assert resident_device("torch", "cpu", 8) == "cpu" and resident_device("torch", "cpu", 0) is None


# -- the same on CUDA, where there is one -----------------------------------------------------
@pytest.mark.gpu
def test_cuda_arena_stays_on_the_device_across_searches(monkeypatch):
    test_the_arena_stays_on_the_device_across_searches(monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_one_more_unit_copies_only_that_unit(monkeypatch):
    test_one_more_unit_copies_only_that_unit(monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_dropping_a_unit_frees_its_slot(monkeypatch):
    test_dropping_a_unit_frees_its_slot(monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_units_past_the_budget_are_scanned_from_the_host(monkeypatch):
    test_units_past_the_budget_are_scanned_from_the_host(monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_int8_units_stay_int8_on_the_device(monkeypatch):
    test_int8_units_stay_int8_on_the_device(monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_chunk_vectors_stay_on_the_device_across_searches(tmp_path, monkeypatch):
    test_chunk_vectors_stay_on_the_device_across_searches(tmp_path, monkeypatch, device="cuda")


@pytest.mark.gpu
def test_cuda_chunk_vectors_past_the_budget_are_scored_on_the_host(tmp_path, monkeypatch):
    test_chunk_vectors_past_the_budget_are_scored_on_the_host(tmp_path, monkeypatch, device="cuda")
