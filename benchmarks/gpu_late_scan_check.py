#!/usr/bin/env python3
"""GPU check of the late layer's scan path (``lar.layers.late.scan.scan_units``) against numpy.

Run from the repository root on a CUDA machine with python3, numpy and torch:

    python3 benchmarks/gpu_late_scan_check.py --out $OUT/gpu_late_scan.json

CPU smoke test: ``.venv/bin/python benchmarks/gpu_late_scan_check.py --cpu-smoke --out /tmp/x.json``

Only the modules the scan needs are imported (``lar`` is registered as a bare namespace, so
``lar/__init__.py`` and its dependencies are not loaded). Synthetic units (unit-normalised
float16 tokens, 1-4 chunks each, a planted relevant chunk) are placed back to back in a
``TokenArena`` as the layer does; the scan is run with numpy (CPU), torch on the CPU, and torch on
CUDA at several block sizes (the arena lives in host memory: each block is copied to the device,
as in the layer today). Checks: the same top-k (hash, chunk) and scores within 1e-3 of numpy.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
pkg = types.ModuleType("lar")
pkg.__path__ = [str(ROOT / "lar")]
sys.modules.setdefault("lar", pkg)

import numpy as np  # noqa: E402

from lar.layers.late.arena import TokenArena  # noqa: E402
from lar.layers.late.scan import scan_units  # noqa: E402
from lar.encoders.encoding import UnitEncoding  # noqa: E402


def corpus(n_units: int, mean_tokens: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    arena = TokenArena()
    units = {}
    q = rng.standard_normal((24, d)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    for i in range(n_units):
        n = int(rng.integers(mean_tokens // 2, mean_tokens * 3 // 2))
        x = rng.standard_normal((n, d)).astype(np.float32)
        if i == n_units // 3:  # planted: its tokens are noisy copies of the query tokens
            x[: q.shape[0]] = q + 0.05 * rng.standard_normal(q.shape)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        k = int(rng.integers(1, 5))
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(k - 1, n - 1), replace=False)) if n > 1 else []
        starts = np.concatenate([[0], cuts]).astype(np.int64)
        spans = np.stack([np.arange(n) * 5, np.arange(n) * 5 + 4], 1).astype(np.int64)
        ends = np.append(starts[1:], n)
        chunks = np.stack([starts * 5, ends * 5], 1).astype(np.int64)
        enc = UnitEncoding("synthetic", "1", arena.add(x.astype(np.float16)), spans, starts, chunks)
        units[f"{i:032x}"] = enc
    return units, q


def timed(fn, reps: int):
    fn()  # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, float(np.median(ts))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu-smoke", action="store_true")
    ap.add_argument("--units", type=int, default=20000)
    ap.add_argument("--tokens", type=int, default=150)
    args = ap.parse_args()
    import torch

    cuda = torch.cuda.is_available() and not args.cpu_smoke
    n_units = 500 if args.cpu_smoke else args.units
    res: dict = {"torch": torch.__version__, "cuda": cuda,
                 "gpu": torch.cuda.get_device_name(0) if cuda else None, "runs": []}
    units, q = corpus(n_units, args.tokens, 384)
    order = list(units)
    total = sum(e.n_tokens for e in units.values())
    res["units"], res["tokens"] = n_units, total
    w = np.ones(q.shape[0], np.float32)
    ref, t_np = timed(lambda: scan_units(q, w, order, units.get, 100, backend="numpy"), 2)
    res["runs"].append({"backend": "numpy", "block_tokens": 65536, "s": t_np,
                        "tokens_per_s": total / t_np})
    res["planted_first"] = ref.top[0][1] == f"{n_units // 3:032x}"
    configs = [("torch", "cpu", 65536)]
    if cuda:
        configs += [("torch", "cuda", b) for b in (65536, 1 << 18, 1 << 20)]
    for backend, device, block in configs:
        got, t = timed(lambda: scan_units(q, w, order, units.get, 100, backend=backend,
                                          device=device, block_tokens=block), 3)
        same = [(h, c) for _, h, c in got.top] == [(h, c) for _, h, c in ref.top]
        diff = float(np.max(np.abs(np.array([s for s, _, _ in got.top]) -
                                   np.array([s for s, _, _ in ref.top]))))
        res["runs"].append({"backend": backend, "device": device, "block_tokens": block, "s": t,
                            "tokens_per_s": total / t, "same_top100": same, "max_abs_diff": diff,
                            "speedup_vs_numpy": t_np / t})
        print(res["runs"][-1], flush=True)
        Path(args.out).write_text(json.dumps(res, indent=1))
    ok = all(r.get("same_top100", True) and r.get("max_abs_diff", 0) < 1e-3 for r in res["runs"])
    res["ok"] = ok and res["planted_first"]
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
