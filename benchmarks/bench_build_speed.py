#!/usr/bin/env python
"""Build at the encoder's speed (issue 26): lar's dense + late build of some SciFact abstracts
against a raw ``SentenceTransformer.encode`` of exactly the same chunk texts, with cross-unit
batching on and off (``LAR_BUILD_BATCH``), quiet and loaded.

Plain script (not collected by pytest)::

    nice -n 19 timeout 900 .venv/bin/python benchmarks/bench_build_speed.py --docs 200 --reps 2 \
        [--busy 2] [--out benchmarks/results/DATE-build-speed.json]

Per repetition, in rotating order: ``raw`` (``model.encode(texts, batch_size=32)`` of the chunk
texts; it sorts by length itself, and truncates a chunk at the model's window), ``raw-windows``
(the same call on the texts of the windows lar encodes: a chunk longer than one window is two,
so this is the same tokens as lar's pass), ``lar`` (``eng.build(layers=["dense", "late"])`` on a fresh state folder,
batching on) and ``lar-unbatched`` (the same with ``LAR_BUILD_BATCH=0``). The model is loaded
once before (``eng.warm``; the raw encode uses the same loaded model), so load time counts in
none. ``--busy N`` starts N busy-loop processes (at the script's own niceness) for the whole
run. The documents are read from ``/work/shared/benchmarks/scifact-train`` at run time. Each
figure is the median over the repetitions; ratio = lar / raw per repetition, then the median.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DISABLE_TQDM", "1")
SRC = Path("/work/shared/benchmarks/scifact-train")


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


def materialise(src: Path, n: int, root: Path) -> None:
    root.mkdir(parents=True)
    with open(src / "corpus.jsonl", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i >= n:
                break
            d = json.loads(line)
            (root / f"{d['_id']}.txt").write_text(f"{d.get('title', '')}\n\n{d.get('text', '')}\n", "utf-8")


def chunk_texts(eng) -> list[str]:
    """The texts the shared pass encodes: each unit's embedding chunks (as bench_embed.py)."""
    from lar.layers.kits.vectors.shared import embedding_chunks

    target = eng.layers["dense"].shared.target
    texts = []
    for u in eng.scope_view().units():
        doc = eng.reader.document(u.hash, u.path)
        for s, e in embedding_chunks(doc, target):
            t = doc.text[s:e].decode("utf-8", errors="replace")
            if t.strip():
                texts.append(t)
    return texts


def window_texts(eng) -> tuple[list[str], int]:
    """The texts of the encoder windows lar's shared pass runs (a chunk longer than one window
    is several windows; ``SentenceTransformer.encode`` would truncate it at the window size),
    and their content tokens in all: the same work for the raw peer."""
    from lar.encoders.base import plan_windows
    from lar.layers.kits.vectors.shared import embedding_chunks

    shared = eng.layers["dense"].shared
    enc = shared.encoder
    out, tokens = [], 0
    for u in eng.scope_view().units():
        doc = eng.reader.document(u.hash, u.path)
        items = enc._span_items(doc.text, embedding_chunks(doc, shared.target))
        for (s, e, st, c2b), (ids, offs) in zip(items, enc._tokenize([it[2] for it in items])):
            for a, b in plan_windows(offs[:, 0], offs[:, 1], st, enc.window_tokens):
                out.append(st[offs[a, 0]:offs[b - 1, 1]])
                tokens += b - a
    return out, tokens


def lar_build(root: Path, state: Path, batched: bool) -> tuple[float, dict]:
    import lar

    os.environ["LAR_BUILD_BATCH"] = "1" if batched else "0"
    with lar.open(root, state=state, spare_build=False) as eng:
        eng.index_now()
        t0 = time.perf_counter()
        rep = eng.build(timebox=100_000, layers=["dense", "late"])
        dt = time.perf_counter() - t0
        passes = eng.layers["dense"].shared.encoded + eng.layers["late"].shared.encoded
    built = {n: rep["layers"][n]["ok"] for n in ("dense", "late")}
    return dt, {"built": built, "encoder_passes": passes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=str(SRC))
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--busy", type=int, default=0, help="busy-loop processes to run beside")
    ap.add_argument("--variants", default="raw,raw-windows,lar,lar-unbatched")
    ap.add_argument("--profile", action="store_true", help="cProfile one batched lar build")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import lar

    work = Path(tempfile.mkdtemp(prefix="lar-build-speed-"))
    root = work / "corpus"
    materialise(Path(a.src), a.docs, root)
    with lar.open(root, state=work / "probe", spare_build=False) as eng:
        eng.index_now()
        eng.warm(["dense"])
        texts = chunk_texts(eng)
        windows, win_tokens = window_texts(eng)
        model = eng.layers["dense"].shared.encoder._model
        model.encode(texts[:32], batch_size=32)  # warm-up (first-call costs of torch)
    import torch

    out = {"model": eng.layers["dense"].shared.encoder.model_id, "docs": a.docs, "chunks": len(texts),
           "windows": len(windows), "window_tokens": win_tokens, "busy": a.busy, "torch_threads": torch.get_num_threads(),
           "cpus": os.cpu_count(), "nice": os.nice(0), "runs": []}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        time.sleep(2.0 if busy else 0.0)
        variants = a.variants.split(",")
        for r in range(a.reps):
            k = r % len(variants)
            for v in variants[k:] + variants[:k]:
                l0 = load_avg()
                if v in ("raw", "raw-windows"):
                    t0 = time.perf_counter()
                    model.encode(texts if v == "raw" else windows, batch_size=32)
                    dt, extra = time.perf_counter() - t0, {}
                else:
                    dt, extra = lar_build(root, work / f"state-{v}-{r}", v == "lar")
                run = {"rep": r, "variant": v, "s": round(dt, 2), "load": [l0, load_avg()], **extra}
                out["runs"].append(run)
                print(json.dumps(run), flush=True)
        if a.profile:
            import cProfile
            import io
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            lar_build(root, work / "state-profile", True)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(40)
            out["profile"] = s.getvalue()
            print(out["profile"])
    finally:
        for p in busy:
            p.kill()
            p.wait()
    med = {v: statistics.median([x["s"] for x in out["runs"] if x["variant"] == v])
           for v in {x["variant"] for x in out["runs"]}}
    out["median_s"] = med
    for peer in ("raw", "raw-windows"):
        base = {x["rep"]: x["s"] for x in out["runs"] if x["variant"] == peer}
        for v in med:
            if v.startswith("lar") and base:
                out[f"ratio_{v}_vs_{peer}"] = round(statistics.median(
                    [x["s"] / base[x["rep"]] for x in out["runs"] if x["variant"] == v and base.get(x["rep"])]), 3)
    print(json.dumps({k: v for k, v in out.items() if k not in ("runs", "profile")}, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
