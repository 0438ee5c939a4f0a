"""Issue 18: a build process killed with SIGKILL at random points, 21 times, then resumed.

Layers: trigram, bm25, symbols (a JSON sidecar per unit) and static (a model layer: a tiny
Model2Vec model made here, with vectors appended to a file). The kills land during start-up and
the scan, a few units into a pass (and a few milliseconds into the next unit) and right after a
sidecar or vector file was written. After every kill nothing reported done is lost (each unit
the build reported finished is in its manifest; no layer's count goes down); at the end the
resumed state answers a fixed query set exactly as a clean build of the same corpus does.
Seeded; about a minute on two loaded cores."""
from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import lar

pytestmark = pytest.mark.slow
pytest.importorskip("model2vec")
pytest.importorskip("bm25s")

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["trigram", "bm25", "symbols", "static"]
KILLS = 21
# a build that finishes before its kill point starts again from nothing, at most this often
MAX_RESTARTS = 10
WORDS = ("river delta harbour lantern quartz meadow falcon copper tundra orchid glacier "
         "saddle ember violet canyon parser deadline scheduler fusion segment").split()
QUERIES = {
    "trigram": ["lantern", "def parse_", "quartz meadow"],
    "bm25": ["river delta", "falcon copper tundra", "scheduler fusion"],
    "symbols": ["parse_item_3", "Handler7", "render"],
    "static": ["glacier orchid", "ember violet canyon"],
}
CHILD = """
import json, sys
import lar
corpus, state, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def progress(layer, done, total):
    print("P", layer, done, total, flush=True)
with lar.open(corpus, state=state, config=cfg) as eng:
    print("OPEN", flush=True)
    eng.build(timebox=600, layers=sys.argv[4].split(","), progress=progress)
print("DONE", flush=True)
"""


def _corpus(root: Path, rng: random.Random) -> Path:
    root.mkdir(parents=True)
    for i in range(18):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        (root / f"mod{i}.py").write_text(
            f'"""Module {i}: {words}."""\n\n\ndef parse_item_{i}(value):\n    """{words}"""\n'
            f"    return value * {i}\n\n\nclass Handler{i}:\n    def render(self):\n"
            f"        return parse_item_{i}({i})\n")
    for i in range(14):
        lines = [" ".join(rng.choice(WORDS) for _ in range(10)) for _ in range(rng.randint(3, 12))]
        (root / f"note{i}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(lines) + "\n")
    return root


def _tiny_model(path: Path) -> Path:
    """A Model2Vec model over a word-level vocabulary: built in a second, nothing downloaded."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[UNK]", "[PAD]", *WORDS, "def", "return", "class"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(18).standard_normal((len(vocab), 16)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tok, normalize=True).save_pretrained(path)
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "model_type": "model2vec"}))
    return path


def _counts(state: Path) -> dict[str, int]:
    """Units in each layer's manifest (every row a unit whose build completed)."""
    out = {}
    for name in LAYERS:
        db = state / "layers" / name / "manifest.sqlite"
        if not db.exists():
            out[name] = 0
            continue
        conn = sqlite3.connect(db)
        try:
            out[name] = conn.execute("SELECT count(*) FROM units").fetchone()[0]
        except sqlite3.OperationalError:  # killed before the table was made
            out[name] = 0
        finally:
            conn.close()
    return out


def _sidecar_marks(state: Path) -> tuple[int, int]:
    """(symbols' sidecar files, bytes of static's vector files): grow with each unit."""
    sym = state / "layers" / "symbols" / "units"
    n = sum(len(os.listdir(sym / d)) for d in os.listdir(sym)) if sym.is_dir() else 0
    size = 0
    for p in (state / "layers" / "static").glob("vectors-*/vectors.*"):
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return n, size


class Child:
    def __init__(self, corpus: Path, state: Path, cfg: dict):
        env = dict(os.environ, LAR_SPARE_BUILD="0",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(corpus), str(state), json.dumps(cfg), ",".join(LAYERS)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.started = time.monotonic()
        self.lines: queue.Queue = queue.Queue()
        self.done: dict[str, int] = {}  # per layer: units the child reported finished
        self.steps = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def poll(self) -> bool:
        """Take the lines printed so far; False once the child ended."""
        while True:
            try:
                parts = self.lines.get_nowait()
            except queue.Empty:
                return self.proc.poll() is None
            if parts is None:
                self.proc.wait()
                return False
            if parts[0] == "P" and int(parts[2]) > 0:
                self.done[parts[1]] = int(parts[2])
                self.steps += 1

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def _run_until(child: Child, stop) -> bool:
    """Poll until ``stop()`` says kill (True: killed) or the child ends (False)."""
    while child.poll():
        if stop():
            child.kill()
            return True
        time.sleep(0.001)
    assert child.proc.returncode == 0, child.proc.stderr.read()
    return False


def _answers(corpus: Path, state: Path, cfg: dict) -> dict:
    with lar.open(corpus, state=state, config=cfg) as eng:
        eng.layers["bm25"].merge()  # one segment, as a clean build has: scores need the same avgdl
        out = {}
        for layer, qs in QUERIES.items():
            for q in qs:
                res = eng.search({layer: q}, timebox=30, k=10)
                run = res.run(layer)
                assert run.state.value == "ran" and run.coverage == 1.0, (layer, run)
                out[(layer, q)] = [(h.hash, h.span.start, h.span.end, round(h.score or 0, 4))
                                   for h in res.hits]
        states = {n: dict(eng.layers[n].built()) for n in LAYERS}
    assert all(s == "ok" or s == "skipped" for st in states.values() for s in st.values())
    return {"answers": out, "states": states}


def test_a_build_killed_at_random_points_resumes_to_a_clean_builds_state(tmp_path):
    rng = random.Random(18)
    corpus = _corpus(tmp_path / "corpus", rng)
    cfg = {"static_model": str(_tiny_model(tmp_path / "m2v"))}
    state = tmp_path / "state"
    kills, modes, restarts = 0, {"startup": 0, "units": 0, "sidecar": 0}, 0
    before = _counts(state)
    while kills < KILLS:
        mode = rng.choice(["startup", "units", "units", "sidecar", "sidecar"])
        child = Child(corpus, state, cfg)
        if mode == "startup":  # during the imports, the open, the scan or the first units
            at = child.started + rng.uniform(0.05, 1.8)
            killed = _run_until(child, lambda: time.monotonic() >= at)
        elif mode == "units":  # a few units into the pass, and a few ms into the next one
            n, delay = rng.randint(1, 4), rng.uniform(0.0, 0.02)
            mark: list[float] = []

            def units_done() -> bool:
                if child.steps >= n and not mark:
                    mark.append(time.monotonic() + delay)
                return bool(mark) and time.monotonic() >= mark[0]

            killed = _run_until(child, units_done)
        else:  # right after a sidecar (symbols) or vector file (static) write
            start = _sidecar_marks(state)
            killed = _run_until(child, lambda: _sidecar_marks(state) != start)
        after = _counts(state)
        for name in LAYERS:  # nothing done was lost
            assert after[name] >= before[name], (mode, name, before, after)
            assert after[name] >= before[name] + child.done.get(name, 0), (mode, name)
        before = after
        if killed:
            kills += 1
            modes[mode] += 1
        elif all(after[n] for n in LAYERS):
            # the build finished before the kill point (a fast machine): start again from an
            # empty state, so that every further kill still interrupts real work
            restarts += 1
            assert restarts <= MAX_RESTARTS, (kills, modes, restarts)
            shutil.rmtree(state)
            before = _counts(state)
    assert kills >= 20, (kills, modes, before)
    assert min(modes.values()) >= 1, modes
    assert not _run_until(Child(corpus, state, cfg), lambda: False)  # resume to the end
    clean = tmp_path / "clean"
    assert not _run_until(Child(corpus, clean, cfg), lambda: False)
    resumed, fresh = _answers(corpus, state, cfg), _answers(corpus, clean, cfg)
    assert resumed["states"] == fresh["states"]
    assert all(fresh["answers"].values()), fresh["answers"]  # every query finds something
    assert resumed["answers"] == fresh["answers"]
