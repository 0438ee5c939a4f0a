"""Sidecar files: round trips, atomic writes, corruption detection and the verified cache."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from lar.core.errors import ConfigError, CorruptStateError
from lar.layers.kits.vectors import sidecar as sc
from lar.encoders.encoding import UnitEncoding
from lar.layers.kits.vectors.levers import quantize_int8
from lar.layers.kits.vectors.sidecar import (CorruptSidecarError, open_sidecar, read_sidecar, sidecar_path,
                                 verify_sidecar, write_sidecar)


def make_enc(seed=0, chunks=(3, 5, 1), d=16, pooled=True, dtype=np.float32, big_spans=False):
    rng = np.random.default_rng(seed)
    n = sum(chunks)
    tok = rng.normal(size=(n, d)).astype(np.float32)
    tok /= np.linalg.norm(tok, axis=1, keepdims=True)
    base = 2 ** 33 if big_spans else 0
    starts = np.arange(n, dtype=np.int64) * 5 + base
    spans = np.stack([starts, starts + 4], axis=1)
    cs = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(np.int64)
    cp = np.stack([spans[cs, 0], spans[np.cumsum(chunks) - 1, 1]], axis=1)
    pool = None
    if pooled:
        pool = rng.normal(size=(len(chunks), 8)).astype(np.float32)
        pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    return UnitEncoding("test-model", "c1", tok.astype(dtype), spans, cs, cp, pool)


def assert_same(a: UnitEncoding, b: UnitEncoding, atol=1e-3):
    assert (a.model_id, a.chunker_version) == (b.model_id, b.chunker_version)
    np.testing.assert_allclose(a.tokens_f32(), b.tokens_f32(), atol=atol)
    for name in ("token_spans", "chunk_starts", "chunk_spans"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    if a.pooled is None:
        assert b.pooled is None
    else:
        np.testing.assert_allclose(a.pooled, b.pooled, atol=atol)


@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip_float(tmp_path, mmap):
    enc = make_enc()
    p = sidecar_path(tmp_path, "ab" * 16)
    assert p == tmp_path / "ab" / f"{'ab' * 16}.lvec"
    n = write_sidecar(p, enc, meta={"pool": 2, "pca": None})
    assert n == p.stat().st_size
    s = read_sidecar(p, mmap=mmap)
    assert s.nbytes == n and s.meta == {"pool": 2, "pca": None}
    assert s.header["token_dtype"] == "float16" and s.encoding.tokens.dtype == np.float16
    assert s.header["sections"]["token_spans"][2] == "int32"
    assert_same(enc, s.encoding)
    assert not s.encoding.tokens.flags.writeable
    if mmap:
        assert isinstance(s.encoding.tokens, np.memmap)
    data = p.read_bytes()
    for off, *_ in s.header["sections"].values():  # 64-byte aligned sections
        start = -(-(12 + struct.unpack("<I", data[8:12])[0]) // 64) * 64
        assert (start + off) % 64 == 0


def test_round_trip_int8_exact_and_big_spans(tmp_path):
    enc = quantize_int8(make_enc(big_spans=True, pooled=False))
    p = tmp_path / "u.lvec"
    write_sidecar(p, enc)
    s = read_sidecar(p)
    assert s.header["token_dtype"] == "int8" and s.header["pooled_dim"] is None
    assert s.header["sections"]["token_spans"][2] == "int64"
    np.testing.assert_array_equal(s.encoding.tokens, enc.tokens)
    np.testing.assert_array_equal(s.encoding.token_scales, enc.token_scales)
    assert_same(enc, s.encoding, atol=0)


def test_empty_encoding_round_trips(tmp_path):
    enc = UnitEncoding("m", "c", np.zeros((0, 4), np.float32), np.zeros((0, 2), np.int64),
                       np.zeros(0, np.int64), np.zeros((0, 2), np.int64))
    write_sidecar(tmp_path / "e.lvec", enc)
    s = read_sidecar(tmp_path / "e.lvec")
    assert s.encoding.n_tokens == 0 and s.encoding.dim == 4


def test_bad_meta_is_config_error(tmp_path):
    with pytest.raises(ConfigError):
        write_sidecar(tmp_path / "x.lvec", make_enc(), meta={"x": object()})
    with pytest.raises(ConfigError):
        write_sidecar(tmp_path / "x.lvec", make_enc(), meta=[1])
    assert not list(tmp_path.iterdir())


def test_failed_write_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "u.lvec"
    write_sidecar(p, make_enc(seed=1))
    before = p.read_bytes()

    def boom(fd):
        raise OSError("disk on fire")

    monkeypatch.setattr(sc.os, "fsync", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_sidecar(p, make_enc(seed=2))
    assert p.read_bytes() == before
    assert [q.name for q in tmp_path.iterdir()] == ["u.lvec"]  # no temp file left behind


def _corrupt(tmp_path, mutate):
    p = tmp_path / "u.lvec"
    write_sidecar(p, make_enc())
    data = bytearray(p.read_bytes())
    p.write_bytes(bytes(mutate(data)))
    return p


def _flip_last(d):
    d[-1] ^= 0xFF
    return d


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d[:-10], "truncated"),
    (lambda d: d[:7], "truncated"),
    (lambda d: d[:100], "truncated"),
    (lambda d: d + b"xx", "unexpected bytes"),
    (_flip_last, "checksum mismatch"),
    (lambda d: b"NOTLAR01" + d[8:], "bad magic"),
    (lambda d: d[:12] + b"#" + d[13:], "unreadable header"),
    (lambda d: d[:8] + struct.pack("<I", 2 ** 31) + d[12:], "header length"),
])
def test_corruption_is_detected(tmp_path, mutate, needle):
    p = _corrupt(tmp_path, mutate)
    with pytest.raises(CorruptSidecarError) as ei:
        read_sidecar(p)
    msg = str(ei.value)
    assert needle in msg and str(p) in msg and "rebuilds" in msg
    assert isinstance(ei.value, CorruptStateError) and ei.value.path == p


def _rewrite_header(p, fn):
    d = p.read_bytes()
    hlen = struct.unpack("<I", d[8:12])[0]
    hdr = json.loads(d[12:12 + hlen])
    fn(hdr)
    new = json.dumps(hdr, separators=(",", ":")).encode()
    assert len(new) <= hlen
    p.write_bytes(d[:12] + new.ljust(hlen) + d[12 + hlen:])


@pytest.mark.parametrize("fn, needle", [
    (lambda h: h.update(format=2), "unsupported format"),
    (lambda h: h.pop("sections"), "lacks sections"),
    (lambda h: h["sections"]["chunk_spans"].__setitem__(0, 960), "outside"),
    (lambda h: h["sections"]["pooled"].__setitem__(3, [3, 7]), "needs"),
    (lambda h: h.update(n_tokens=3), "disagree"),
    (lambda h: h["sections"]["tokens"].__setitem__(0, 3), "aligned"),
])
def test_bad_header_fields(tmp_path, fn, needle):
    p = tmp_path / "u.lvec"
    write_sidecar(p, make_enc())
    _rewrite_header(p, fn)
    with pytest.raises(CorruptSidecarError, match=needle):
        read_sidecar(p, verify=False)


def test_inconsistent_arrays_become_corrupt_errors(tmp_path):
    enc = make_enc(chunks=(2, 2))
    p = tmp_path / "u.lvec"
    write_sidecar(p, enc)
    s = read_sidecar(p)
    off = s.header["sections"]["chunk_starts"][0]
    d = bytearray(p.read_bytes())
    start = len(d) - s.header["payload_nbytes"]
    d[start + off:start + off + 4] = struct.pack("<i", 3)  # first chunk no longer starts at 0
    p.write_bytes(bytes(d))
    with pytest.raises(CorruptSidecarError, match="inconsistent arrays"):
        read_sidecar(p, verify=False)
    with pytest.raises(CorruptSidecarError, match="checksum"):
        verify_sidecar(p)


def test_open_sidecar_verifies_once(tmp_path, monkeypatch):
    sc.clear_verified_cache()
    p = tmp_path / "u.lvec"
    write_sidecar(p, make_enc())
    calls = []
    real = sc._read_open
    monkeypatch.setattr(sc, "_read_open",
                        lambda *a, **k: calls.append(k["verify"]) or real(*a, **k))
    open_sidecar(p)
    open_sidecar(p)
    assert calls == [True, False]
    write_sidecar(p, make_enc(seed=5))  # a new version of the file is verified again
    open_sidecar(p)
    assert calls[-1] is True
    d = bytearray(p.read_bytes())
    d[-1] ^= 1
    p.write_bytes(bytes(d))
    os.utime(p, ns=(1, 1))
    with pytest.raises(CorruptSidecarError):
        open_sidecar(p)
