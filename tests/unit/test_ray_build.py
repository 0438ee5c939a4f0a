"""Building on Ray (lar.distributed.ray_build): the model passes run in Ray tasks on a local
2-CPU cluster (loopback only), the driver writes; the state equals a local build's byte for byte,
a worker killed mid-build loses only its units in flight (Ray retries, or the driver re-queues),
and a build cut short by its timebox leaves the rest pending."""
from __future__ import annotations

import hashlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import lar
from lar.core.building import RemoteUnitError, SkipUnit
from lar.core.errors import ConfigError
from lar.core.registry import register_layer, unregister_layer
from lar.distributed.ray_build import RayExecutor, executor_for, run_pass
from lar.encoders.encoding import UnitEncoding
from lar.layers.dense import StaticLayer, StaticPass
from lar.layers.kits.vectors.shared import SharedEncodings, SharedPass

N_FILES = 24


class FakeStatic:
    """A deterministic stand-in for the Model2Vec encoder: each text's vector from its digest."""

    dim = 8
    model_id = "fake-static"

    def encode(self, texts):
        rows = [np.frombuffer(hashlib.blake2b(t.encode(), digest_size=32).digest(), np.uint8)[:8]
                for t in texts]
        v = np.asarray(rows, dtype=np.float32) - 127.5
        return v / np.linalg.norm(v, axis=1, keepdims=True)


@dataclass(frozen=True)
class KillOnce:
    """An encoder factory that kills its worker process the first time it is called anywhere
    (the marker file says it did), then behaves as ``FakeStatic``."""

    marker: str

    def __call__(self):
        if not os.path.exists(self.marker):
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return FakeStatic()


class FakeStaticLayer(StaticLayer):
    """The real ``static`` layer (chunking, vector store, manifest) with the fake encoder."""

    name = "fakestatic"
    extra_modules = ()
    factory = FakeStatic

    def _resolve(self) -> None:
        self._encoder = None
        self._model_id = "fake-static"

    def encoder(self):
        return FakeStatic()

    def remote_pass(self):
        return StaticPass(type(self).factory)


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    for i in range(N_FILES):
        words = " ".join(f"word{(i * 7 + j) % 97}" for j in range(40 + 30 * (i % 5)))
        (root / f"doc{i:02d}.md").write_text(f"# Document {i}\n\n{words}\n\n{words[::-1]}\n")
    (root / "empty.txt").write_text("   \n")  # no text: skipped by the pass
    return root


@pytest.fixture
def fake_layer():
    FakeStaticLayer.factory = FakeStatic
    register_layer(FakeStaticLayer)
    yield FakeStaticLayer
    unregister_layer("fakestatic")
    FakeStaticLayer.factory = FakeStatic


def _state(eng) -> dict:
    layer = eng.layers["fakestatic"]
    store = layer.store
    packs = {p.name: p.read_bytes() for p in store.dir.glob("vectors.*")}
    units = {h: tuple(np.asarray(a).tobytes() for a in store.get(h)) for h in store.hashes()}
    manifest = {h: (e["state"], e["reason"], e["info"]) for h in layer.manifest.all_hashes()
                for e in [layer.manifest.entry(h)]}
    return {"packs": packs, "units": units, "manifest": manifest}


def _build(corpus: Path, state: Path, executor=None, timebox=120):
    with lar.open(corpus, state=state) as eng:
        rep = eng.build(timebox=timebox, layers=["fakestatic"], executor=executor)
        return rep["layers"]["fakestatic"], _state(eng)


def test_executor_choice_and_settings(tmp_path):
    assert executor_for(None) is None and executor_for("local") is None
    assert executor_for("ray", "auto") == RayExecutor(address="auto")
    ex = RayExecutor(batch=2)
    assert executor_for(ex) is ex
    with pytest.raises(ConfigError):
        executor_for("spark")
    with pytest.raises(ConfigError, match="batch"):
        RayExecutor(batch=0)
    with pytest.raises(ConfigError, match="ray_address"):
        lar.open(_corpus(tmp_path / "c"), state=tmp_path / "s", config={"ray_address": 3})


def test_run_pass_keeps_a_units_skip_or_failure():
    class Boom:
        def run(self, unit, doc):
            if doc == "skip":
                raise SkipUnit("no text")
            if doc == "boom":
                raise ValueError("bad bytes")
            return doc.upper()

    out = run_pass(Boom(), [("u1", "ok"), ("u2", "skip"), ("u3", "boom")])
    assert out[0] == "OK" and isinstance(out[1], SkipUnit) and str(out[1]) == "no text"
    assert isinstance(out[2], RemoteUnitError) and str(out[2]) == "ValueError: bad bytes"


class FakeTokens:
    """A deterministic token encoder (the shape of the MiniLM pass's output)."""

    model_id = "fake-tokens"
    max_tokens = 64

    def encode_spans(self, text, spans, chunker_version="1"):
        toks, tspans, starts = [], [], []
        for a, b in spans:
            starts.append(len(toks))
            for s in range(a, b, 5):
                d = hashlib.blake2b(text[s:s + 5], digest_size=16).digest()
                toks.append(np.frombuffer(d, np.uint8)[:4].astype(np.float32) + 1)
                tspans.append((s, min(s + 5, b)))
        x = np.asarray(toks, np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return UnitEncoding(self.model_id, chunker_version, x.astype(np.float16),
                            np.asarray(tspans, np.int64), np.asarray(starts, np.int64),
                            np.asarray(spans, np.int64).reshape(-1, 2))


def test_shared_pass_writes_the_same_sidecar_as_a_local_encode(tmp_path):
    """dense and late: the worker's SharedPass result, stored by the driver, is the local file."""
    from lar.store.extract.document import Document

    doc = Document(kind="text", text=b"Reciprocal rank fusion adds one over c plus rank. " * 20)
    local = SharedEncodings(tmp_path / "a", FakeTokens())
    local.encode("ab" * 16, doc)
    remote = SharedEncodings(tmp_path / "b", FakeTokens())
    payload = SharedPass(FakeTokens, remote.target, remote.chunker_version).run(None, doc)
    remote.put("ab" * 16, payload)
    assert local.path("ab" * 16).read_bytes() == remote.path("ab" * 16).read_bytes()
    with pytest.raises(SkipUnit):
        SharedPass(FakeTokens, 200, "1").run(None, Document(kind="text", text=b"  "))


@pytest.fixture(scope="module")
def on_ray(ray_cluster):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the fakes travel by value
    return ray_cluster


@pytest.mark.slow
def test_ray_build_equals_the_local_build(on_ray, fake_layer, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    rep_local, local = _build(corpus, tmp_path / "local")
    progress = []
    with lar.open(corpus, state=tmp_path / "ray") as eng:
        rep = eng.build(timebox=120, layers=["fakestatic"], executor=RayExecutor(batch=3),
                        progress=lambda *a: progress.append(a))["layers"]["fakestatic"]
        remote = _state(eng)
    assert rep_local["ok"] == N_FILES and rep_local["skipped"] == 1
    assert (rep["ok"], rep["skipped"], rep["failed"], rep["pending"]) == (N_FILES, 1, 0, 0)
    assert rep["executor"] == "ray" and rep["tasks"] == 9 and rep["coverage"] == 1.0
    assert remote == local  # the vector pack byte for byte, every unit's rows, the manifest
    assert progress[0] == ("fakestatic", 0, N_FILES + 1) and progress[-1] == ("fakestatic", N_FILES + 1, N_FILES + 1)
    assert len(progress) == N_FILES + 2


@pytest.mark.slow
@pytest.mark.parametrize("ray_retries", [1, 0], ids=["ray-retries", "driver-requeues"])
def test_a_killed_worker_loses_only_its_units_in_flight(on_ray, fake_layer, tmp_path, ray_retries):
    corpus = _corpus(tmp_path / "corpus")
    _, local = _build(corpus, tmp_path / "local")
    marker = tmp_path / "killed"
    FakeStaticLayer.factory = KillOnce(str(marker))
    rep, remote = _build(corpus, tmp_path / "ray", RayExecutor(batch=4, max_retries=ray_retries))
    assert marker.exists()  # a worker did die
    assert (rep["ok"], rep["pending"], rep["lost"]) == (N_FILES, 0, 0)
    assert rep["retried_by_driver"] == (0 if ray_retries else 1)
    assert remote == local


@pytest.mark.slow
def test_a_build_cut_short_leaves_the_rest_pending(on_ray, fake_layer, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    with lar.open(corpus, state=tmp_path / "ray") as eng:
        rep = eng.build(timebox=1e-6, layers=["fakestatic"], executor="ray")["layers"]["fakestatic"]
        assert rep["state"] == "aborted" and rep["ok"] == 0 and rep["pending"] == N_FILES + 1
        rep = eng.build(timebox=120, layers=["fakestatic"], executor="ray")["layers"]["fakestatic"]
        assert rep["state"] == "ran" and rep["ok"] == N_FILES and rep["coverage"] == 1.0


@pytest.mark.slow
def test_lar_build_ray_on_the_command_line(on_ray, fake_layer, tmp_path, capsys):
    import json

    from lar.apps.cli import main

    corpus = _corpus(tmp_path / "corpus")
    code = main(["build", "--root", str(corpus), "--state", str(tmp_path / "s"), "--json",
                 "--no-progress", "--layers", "fakestatic", "--ray"])
    rep = json.loads(capsys.readouterr().out)["layers"]["fakestatic"]
    assert code == 0 and rep["executor"] == "ray" and rep["ok"] == N_FILES and rep["pending"] == 0
