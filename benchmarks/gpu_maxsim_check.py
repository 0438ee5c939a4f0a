#!/usr/bin/env python3
"""GPU check and benchmark of lar.maxsim (exact late-interaction MaxSim scoring).

Run from the repository root on a CUDA machine that has python3 with torch and numpy:

    PYTHONPATH=. python3 benchmarks/gpu_maxsim_check.py --out $OUT/gpu_maxsim.json

Local CPU smoke test (tiny sizes, CUDA parts skipped):

    PYTHONPATH=. .venv/bin/python benchmarks/gpu_maxsim_check.py --cpu-smoke --out /tmp/g.json

Only ``lar/core/errors.py`` and ``lar/maxsim/*.py`` are loaded, by file path (``lar/__init__.py``
and the rest of the package are never executed, so their dependencies need not be
installed). What it does, under a wall-clock budget (default 200 s; phases that would not
fit are skipped and recorded as such):

* builds random unit-normalised float16 token corpora (d=384): a ~1M-token case and a
  large case (default 200k docs x ~150 tokens = ~30M tokens), with one "planted" document
  whose tokens the query copies (plus noise), so it must rank first;
* checks CUDA scores against the numpy backend (max abs diff, top-10 identical) on the
  whole small case and on a prefix of the large case;
* times numpy (CPU), torch CPU, and torch CUDA with the corpus already on the GPU and
  with host->device transfer included, per compute dtype and segment-max method;
* measures plain matmuls of the same shape (and a square one) and a plain read of the
  corpus, and reports the kernel's throughput as a fraction of those;
* prints a table and writes everything to the JSON file given by --out (rewritten after
  every phase, so a killed run still leaves its partial results).
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
import types
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ loading
def load_maxsim(root: Path):
    """Import lar.maxsim from its files without running lar/__init__.py."""
    lar_dir = root / "lar"
    if "lar" not in sys.modules:
        pkg = types.ModuleType("lar")
        pkg.__path__ = [str(lar_dir)]  # a namespace-like stub: lar/__init__.py is not run
        sys.modules["lar"] = pkg

    def load(name: str, path: Path, package: bool = False):
        spec = importlib.util.spec_from_file_location(
            name, path, submodule_search_locations=[str(path.parent)] if package else None
        )
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    if "lar.core.errors" not in sys.modules:
        load("lar.core.errors", lar_dir / "errors.py")
    ms = load("lar.maxsim", lar_dir / "maxsim" / "__init__.py", package=True)
    tb = importlib.import_module("lar.maxsim.torch_backend")
    return ms, tb


# ---------------------------------------------------------------------------- utilities
class Budget:
    def __init__(self, seconds: float):
        self.t0 = time.perf_counter()
        self.seconds = seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return self.seconds - self.elapsed()


def log(msg: str) -> None:
    print(msg, flush=True)


def bench(fn, sync, reps: int = 3, warmup: int = 1, max_s: float = 10.0):
    """Time ``fn`` (synchronising the device around each call). Returns (stats, last result)."""
    out = None
    for _ in range(warmup):
        out = fn()
        sync()
    times = []
    stop = time.perf_counter() + max_s
    for _ in range(max(1, reps)):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t)
        if time.perf_counter() > stop:
            break
    times.sort()
    return {"min_s": times[0], "median_s": times[len(times) // 2], "reps": len(times)}, out


def topk(scores: np.ndarray, k: int = 10) -> list[int]:
    k = min(k, scores.shape[0])
    idx = np.argpartition(-scores, k - 1)[:k]
    return [int(i) for i in idx[np.argsort(-scores[idx], kind="stable")]]


def compare(ref: np.ndarray, got: np.ndarray) -> dict:
    t_ref, t_got = topk(ref), topk(got)
    return {
        "max_abs_diff": float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))),
        "max_abs_ref": float(np.max(np.abs(ref))),
        "top10_identical": t_ref == t_got,
        "top10_overlap": len(set(t_ref) & set(t_got)),
    }


def rank_of(scores: np.ndarray, j: int) -> int:
    return int(np.sum(scores > scores[j]))


# ------------------------------------------------------------------------------- corpus
def make_corpus(torch, dev, n_docs: int, avg_tokens: int, dim: int, nq: int, seed: int):
    """Random unit-normalised float16 tokens, made on ``dev`` (fast on a GPU) and copied to
    the host. Returns host tokens, device tokens, starts, query and the planted doc index."""
    rng = np.random.default_rng(seed)
    lo = max(1, avg_tokens // 5)
    hi = max(lo, 2 * avg_tokens - lo)
    lens = rng.integers(lo, hi + 1, size=n_docs)
    starts = np.zeros(n_docs, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    n_tok = int(lens.sum())
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    x_dev = torch.empty((n_tok, dim), dtype=torch.float16, device=dev)
    step = 1 << 21
    for a in range(0, n_tok, step):
        b = min(n_tok, a + step)
        v = torch.randn((b - a, dim), generator=gen, device=dev, dtype=torch.float32)
        v /= v.norm(dim=1, keepdim=True)
        x_dev[a:b] = v.half()
    host = np.empty((n_tok, dim), dtype=np.float16)
    host_t = torch.from_numpy(host)
    for a in range(0, n_tok, 1 << 23):
        b = min(n_tok, a + (1 << 23))
        host_t[a:b].copy_(x_dev[a:b])
    planted = int(rng.integers(0, n_docs))
    s0, ln = int(starts[planted]), int(lens[planted])
    rows = host[s0 + (np.arange(nq) % ln)].astype(np.float32)
    q = rows + 0.5 * rng.standard_normal(rows.shape).astype(np.float32) / np.sqrt(dim)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return host, x_dev, starts, q.astype(np.float32), planted


def prefix_docs(starts: np.ndarray, n_tok: int, max_tokens: int) -> tuple[int, int]:
    """Number of leading docs (and their tokens) that fit into ``max_tokens`` (>= 1 doc)."""
    ends = np.append(starts[1:], n_tok)
    k = max(1, int(np.searchsorted(ends, max_tokens, side="right")))
    return k, int(ends[k - 1])


# ------------------------------------------------------------------------------- phases
def env_info(torch, dev) -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "cuda_available": bool(torch.cuda.is_available()),
        "device": str(dev),
    }
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        info.update(
            gpu_name=p.name,
            gpu_capability=f"{p.major}.{p.minor}",
            gpu_memory_gib=round(p.total_memory / 2**30, 1),
            gpu_sms=p.multi_processor_count,
            cuda_version=torch.version.cuda,
        )
    return info


def matmul_reference(torch, dev, sync, shapes: dict, dtypes: list[str]) -> dict:
    """Plain matmul rates: the kernel's shape (T, d) @ (d, nq) with operands already in the
    compute dtype, and a square one for the device's peak."""
    out = {}
    for label, (m, k, n) in shapes.items():
        for cd in dtypes:
            tdt = {"float32": torch.float32, "tf32": torch.float32,
                   "bfloat16": torch.bfloat16, "float16": torch.float16}[cd]
            a = torch.randn((m, k), device=dev).to(tdt)
            b = torch.randn((k, n), device=dev).to(tdt)
            old = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("high" if cd == "tf32" else "highest")
            try:
                st, _ = bench(lambda: a @ b, sync, reps=10, warmup=2, max_s=3.0)
            finally:
                torch.set_float32_matmul_precision(old)
            flops = 2.0 * m * k * n
            st.update(
                shape=[m, k, n],
                tflops=flops / st["min_s"] / 1e12,
                operand_read_gbps=(m * k + k * n) * a.element_size() / st["min_s"] / 1e9,
            )
            out[f"{label}/{cd}"] = st
            log(f"  matmul {label:10s} {cd:9s} {m}x{k}x{n}: {st['min_s'] * 1e3:8.3f} ms "
                f"{st['tflops']:8.2f} TFLOP/s")
            del a, b
    return out


def read_bandwidth(torch, x_dev, sync) -> dict:
    """A plain full read of the float16 corpus on the device (sum in float32)."""
    st, _ = bench(lambda: x_dev.sum(dtype=torch.float32), sync, reps=5, warmup=1, max_s=3.0)
    nbytes = x_dev.numel() * x_dev.element_size()
    st.update(bytes=nbytes, gbps=nbytes / st["min_s"] / 1e9)
    return st


def h2d_bandwidth(torch, dev, nbytes: int, sync) -> dict:
    res = {}
    pinned = torch.empty(nbytes // 2, dtype=torch.float16, pin_memory=True)
    pageable = torch.empty(nbytes // 2, dtype=torch.float16)
    for name, src in (("pinned", pinned), ("pageable", pageable)):
        st, _ = bench(lambda: src.to(dev, non_blocking=True), sync, reps=3, warmup=1, max_s=3.0)
        st["gbps"] = nbytes / st["min_s"] / 1e9
        res[name] = st
    host = np.ones(nbytes // 2, dtype=np.float16)
    st, _ = bench(lambda: np.copyto(pinned.numpy(), host), lambda: None, reps=3, warmup=1, max_s=3.0)
    st["gbps"] = nbytes / st["min_s"] / 1e9
    res["host_memcpy_into_pinned"] = st
    return res


def run_case(name, ctx, R, n_docs, avg_tokens, full_matrix: bool):
    """One corpus size: correctness vs numpy, then timings."""
    torch, tb, ms, dev, sync, args, budget = (
        ctx["torch"], ctx["tb"], ctx["ms"], ctx["dev"], ctx["sync"], ctx["args"], ctx["budget"])
    case = R["cases"].setdefault(name, {})
    t = time.perf_counter()
    host, x_dev, starts, q, planted = make_corpus(
        torch, dev, n_docs, avg_tokens, args.dim, args.nq, args.seed + len(R["cases"]))
    sync()
    n_tok = host.shape[0]
    case.update(n_docs=n_docs, n_tokens=n_tok, dim=args.dim, nq=args.nq, planted_doc=planted,
                corpus_gib_fp16=host.nbytes / 2**30, build_s=time.perf_counter() - t)
    log(f"\n[{name}] {n_docs} docs, {n_tok:,} tokens x {args.dim} fp16 "
        f"({host.nbytes / 2**30:.2f} GiB), built in {case['build_s']:.1f}s")
    ctx["save"]()

    # ---- numpy reference on a prefix (the whole corpus when it is small enough)
    k_docs, k_tok = prefix_docs(starts, n_tok, args.numpy_check_tokens)
    est = k_tok / 2e6  # numpy manages >= ~2M tokens/s on a modest CPU
    sub = host[:k_tok]
    ref = None
    if budget.left() > est * 3 + 20:
        st, ref = bench(lambda: ms.maxsim_numpy(q, sub, starts[:k_docs]), lambda: None,
                        reps=2 if est < 3 else 1, warmup=0, max_s=2 * est + 1)
        st.update(n_docs=k_docs, n_tokens=k_tok, tokens_per_s=k_tok / st["min_s"],
                  cpu_count=os.cpu_count())
        case["numpy"] = st
        log(f"  numpy (CPU, {os.cpu_count()} cores) on {k_docs} docs / {k_tok:,} tokens: "
            f"{st['min_s']:.3f}s = {st['tokens_per_s'] / 1e6:.2f} M tokens/s")
    else:
        R["skipped"].append(f"{name}: numpy reference (time budget)")
    ctx["save"]()

    def check(scores):
        c = {"planted_rank": rank_of(scores, planted)}
        if ref is not None:
            c.update(compare(ref, scores[:k_docs]))
        return c

    # ---- torch CPU on the same prefix (cheap, tells numpy vs torch on this CPU)
    if ref is not None and budget.left() > est + 20:
        try:
            st, got = bench(lambda: tb.maxsim_torch(q, sub, starts[:k_docs], device="cpu"),
                            lambda: None, reps=2 if est < 3 else 1, warmup=1 if est < 3 else 0,
                            max_s=2 * est + 1)
            st.update(tokens_per_s=k_tok / st["min_s"], torch_threads=torch.get_num_threads(),
                      **compare(ref, got))
            case["torch_cpu"] = st
            log(f"  torch CPU ({torch.get_num_threads()} threads) same prefix: {st['min_s']:.3f}s = "
                f"{st['tokens_per_s'] / 1e6:.2f} M tokens/s, max|diff| {st['max_abs_diff']:.2e}")
        except Exception as exc:  # noqa: BLE001 - record and continue
            R["errors"].append(f"{name} torch_cpu: {exc!r}")
    ctx["save"]()

    # ---- torch on the device, corpus resident there
    flops_per_token = 2.0 * args.nq * args.dim
    res = case.setdefault("resident", {})
    dtypes = ctx["dtypes"]
    segs = ["segment_reduce", "index_reduce", "scatter", "pad"]
    configs = [("float32", s) for s in segs] + [(d, "segment_reduce") for d in dtypes if d != "float32"]
    if not full_matrix:
        configs = [("float32", "segment_reduce")]
    for cd, seg in configs:
        if budget.left() < 25:
            R["skipped"].append(f"{name}: resident {cd}/{seg} (time budget)")
            continue
        key = f"{cd}/{seg}"
        try:
            st, got = bench(lambda: tb.maxsim_torch(q, x_dev, starts, device=dev, compute_dtype=cd,
                                                    segment=seg), sync, reps=5, warmup=1, max_s=8.0)
            st.update(tokens_per_s=n_tok / st["min_s"],
                      tflops=flops_per_token * n_tok / st["min_s"] / 1e12,
                      fp16_read_gbps=n_tok * args.dim * 2 / st["min_s"] / 1e9, **check(got))
            res[key] = st
            log(f"  {dev.type} resident {key:25s} {st['min_s'] * 1e3:9.2f} ms "
                f"{st['tokens_per_s'] / 1e9:7.3f} G tok/s  max|diff| {st.get('max_abs_diff', float('nan')):.2e} "
                f"top10 {st.get('top10_identical')} planted rank {st['planted_rank']}")
        except Exception as exc:  # noqa: BLE001
            res[key] = {"error": repr(exc)}
            R["errors"].append(f"{name} resident {key}: {exc!r}")
            log(f"  {dev.type} resident {key}: ERROR {exc!r}")
        ctx["save"]()

    # ---- block size sweep (float32, fastest segment method)
    ok = {k: v for k, v in res.items() if "min_s" in v and k.startswith("float32/")}
    best_seg = min(ok, key=lambda k: ok[k]["min_s"]).split("/")[1] if ok else "segment_reduce"
    case["best_float32_segment"] = best_seg
    if full_matrix:
        sweep = case.setdefault("block_sweep_float32", {})
        for bt in ctx["block_sizes"]:
            if budget.left() < 25:
                R["skipped"].append(f"{name}: block sweep {bt} (time budget)")
                break
            try:
                st, got = bench(lambda: tb.maxsim_torch(q, x_dev, starts, device=dev, block_tokens=bt,
                                                        segment=best_seg), sync, reps=3, warmup=1, max_s=5.0)
                st.update(tokens_per_s=n_tok / st["min_s"], **check(got))
                sweep[str(bt)] = st
                log(f"  block_tokens={bt:>9,}: {st['min_s'] * 1e3:9.2f} ms {st['tokens_per_s'] / 1e9:7.3f} G tok/s")
            except Exception as exc:  # noqa: BLE001
                sweep[str(bt)] = {"error": repr(exc)}
                R["errors"].append(f"{name} block {bt}: {exc!r}")
            ctx["save"]()

    # ---- including host -> device transfer (numpy float16 corpus on the host)
    est_h2d = host.nbytes / 3e9 + 1  # pessimistic 3 GB/s
    if budget.left() > 3 * est_h2d + 20:
        try:
            st, got = bench(lambda: tb.maxsim_torch(q, host, starts, device=dev, segment=best_seg),
                            sync, reps=3 if est_h2d < 3 else 2, warmup=1, max_s=3 * est_h2d)
            st.update(tokens_per_s=n_tok / st["min_s"], fp16_host_gbps=host.nbytes / st["min_s"] / 1e9,
                      **check(got))
            case["from_host_float32"] = st
            log(f"  {dev.type} from host (incl. H2D) float32/{best_seg}: {st['min_s']:.3f}s "
                f"{st['tokens_per_s'] / 1e6:9.1f} M tok/s ({st['fp16_host_gbps']:.1f} GB/s of fp16)")
        except Exception as exc:  # noqa: BLE001
            R["errors"].append(f"{name} from_host: {exc!r}")
            log(f"  from host: ERROR {exc!r}")
    else:
        R["skipped"].append(f"{name}: host->device timing (time budget)")
    ctx["save"]()

    # ---- explain + iter consistency on the device (cheap)
    try:
        full = tb.maxsim_torch(q, x_dev, starts, device=dev)
        s0 = int(starts[planted])
        s1 = int(starts[planted + 1]) if planted + 1 < len(starts) else n_tok
        ex_d = tb.maxsim_explain_torch(q, x_dev[s0:s1], device=dev)
        ex_n = ms.maxsim_explain_numpy(q, host[s0:s1])
        parts = list(tb.iter_maxsim_torch(q, x_dev, starts, device=dev, block_tokens=1 << 16))
        it = np.concatenate([p[1] for p in parts])
        case["consistency"] = {
            "explain_sum_minus_score": float(ex_d.contrib.sum() - full[planted]),
            "explain_device_vs_numpy_max_abs": float(np.max(np.abs(ex_d.contrib - ex_n.contrib))),
            "explain_argmax_equal": bool(np.array_equal(ex_d.argmax, ex_n.argmax)),
            "iter_blocks": len(parts),
            "iter_vs_full_max_abs": float(np.max(np.abs(it - full))),
        }
        log(f"  consistency: {case['consistency']}")
    except Exception as exc:  # noqa: BLE001
        R["errors"].append(f"{name} consistency: {exc!r}")
        log(f"  consistency: ERROR {exc!r}")
    ctx["save"]()

    if dev.type == "cuda" and budget.left() > 15:
        try:
            case["read_bandwidth_fp16"] = read_bandwidth(torch, x_dev, sync)
            log(f"  plain fp16 read of the corpus on device: {case['read_bandwidth_fp16']['gbps']:.0f} GB/s")
        except Exception as exc:  # noqa: BLE001
            R["errors"].append(f"{name} read bandwidth: {exc!r}")
    del x_dev, host
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    ctx["save"]()


def summarise(R) -> list[str]:
    lines = []
    mm = R.get("matmul", {})
    lines.append("")
    lines.append(f"{'case':6s} {'path':36s} {'time':>10s} {'tokens/s':>12s} {'TFLOP/s':>8s} "
                 f"{'%mm':>6s} {'max|diff|':>10s} {'top10':>6s} {'rank':>5s}")
    for name, c in R["cases"].items():
        rows = []
        if "numpy" in c:
            rows.append((f"numpy CPU ({c['numpy'].get('cpu_count')} cores, prefix)", c["numpy"], None))
        if "torch_cpu" in c:
            rows.append(("torch CPU (prefix)", c["torch_cpu"], None))
        for k, v in c.get("resident", {}).items():
            rows.append((f"resident {k}", v, k.split("/")[0]))
        for k, v in c.get("block_sweep_float32", {}).items():
            rows.append((f"resident float32 block={k}", v, "float32"))
        if "from_host_float32" in c:
            rows.append(("from host float32 (incl. H2D)", c["from_host_float32"], "float32"))
        for label, v, cd in rows:
            if "min_s" not in v:
                lines.append(f"{name:6s} {label:36s} ERROR {v.get('error', '')[:60]}")
                continue
            tfl = 2.0 * c["nq"] * c["dim"] * v["tokens_per_s"] / 1e12
            ref = mm.get(f"kernel_shape/{cd}", {}).get("tflops") if cd else None
            frac = f"{100 * tfl / ref:5.1f}%" if ref else "     -"
            diff = f"{v['max_abs_diff']:.2e}" if "max_abs_diff" in v else "-"
            top = str(v.get("top10_identical", "-"))
            rank = str(v.get("planted_rank", "-"))
            t = f"{v['min_s'] * 1e3:.2f}ms" if v["min_s"] < 1 else f"{v['min_s']:.2f}s"
            lines.append(f"{name:6s} {label:36s} {t:>10s} {v['tokens_per_s']:12.3e} {tfl:8.3f} "
                         f"{frac:>6s} {diff:>10s} {top:>6s} {rank:>5s}")
        base = c.get("numpy", {}).get("tokens_per_s")
        if base:
            best = max((v["tokens_per_s"] for v in c.get("resident", {}).values() if "tokens_per_s" in v),
                       default=None)
            host = c.get("from_host_float32", {}).get("tokens_per_s")
            parts = [f"best resident x{best / base:.1f}" if best else None,
                     f"from host x{host / base:.1f}" if host else None]
            lines.append(f"{name:6s} speed-up over numpy: " + ", ".join(p for p in parts if p))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU, CUDA skipped")
    ap.add_argument("--budget-s", type=float, default=None, help="wall-clock budget (default 200; smoke 60)")
    ap.add_argument("--docs", type=int, default=None, help="large case: number of documents (default 200000)")
    ap.add_argument("--avg-tokens", type=int, default=150)
    ap.add_argument("--small-tokens", type=int, default=None, help="small case: ~tokens (default 1M)")
    ap.add_argument("--numpy-check-tokens", type=int, default=None, help="numpy reference prefix (default 2M)")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--nq", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    smoke = args.cpu_smoke
    args.budget_s = args.budget_s or (60.0 if smoke else 200.0)
    args.docs = args.docs or (600 if smoke else 200_000)
    args.small_tokens = args.small_tokens or (20_000 if smoke else 1_000_000)
    args.numpy_check_tokens = args.numpy_check_tokens or (30_000 if smoke else 2_000_000)
    budget = Budget(args.budget_s)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore", message=".*index_reduce.*")

    R = {"args": vars(args), "meta": {}, "cases": {}, "matmul": {}, "errors": [], "skipped": []}

    def save():
        R["elapsed_s"] = budget.elapsed()
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(R, indent=2, default=str))
        tmp.replace(out)

    ms, tb = load_maxsim(ROOT)
    import torch

    if torch.cuda.is_available() and not smoke:
        dev = torch.device("cuda")
        sync = torch.cuda.synchronize
    elif smoke:
        dev = torch.device("cpu")
        sync = lambda: None  # noqa: E731
        R["skipped"].append("cuda: --cpu-smoke runs the device paths on the CPU")
    else:
        R["errors"].append("torch sees no CUDA device (use --cpu-smoke for a CPU run)")
        save()
        log("ERROR: no CUDA device; use --cpu-smoke")
        return 2
    R["meta"] = env_info(torch, dev)
    R["meta"]["lar_maxsim_loaded_from"] = str(Path(ms.__file__).parent)
    log(f"device {dev}: {R['meta'].get('gpu_name', platform.processor() or 'cpu')}; "
        f"torch {torch.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs; budget {args.budget_s:.0f}s")
    save()
    ctx = dict(torch=torch, tb=tb, ms=ms, dev=dev, sync=sync, args=args, budget=budget, save=save,
               dtypes=["float32", "tf32", "bfloat16", "float16"] if dev.type == "cuda" else ["float32", "bfloat16"],
               block_sizes=[1 << 16, 1 << 18, 1 << 20, 1 << 22] if dev.type == "cuda" else [1 << 12, 1 << 14])

    # ---- small case: everything
    try:
        run_case("small", ctx, R, max(1, args.small_tokens // args.avg_tokens), args.avg_tokens, full_matrix=True)
    except Exception:  # noqa: BLE001
        R["errors"].append("small case: " + traceback.format_exc())
        log(R["errors"][-1])
    save()

    # ---- reference matmuls and transfer rates
    if budget.left() > 40:
        try:
            T = 1 << 18 if dev.type == "cuda" else 1 << 12
            sq = 8192 if dev.type == "cuda" else 512
            R["matmul"] = matmul_reference(
                torch, dev, sync, {"kernel_shape": (T, args.dim, args.nq), "square": (sq, sq, sq)}, ctx["dtypes"])
            if dev.type == "cuda":
                R["h2d"] = h2d_bandwidth(torch, dev, 1 << 30, sync)
                log("  H2D 1 GiB: " + ", ".join(f"{k} {v['gbps']:.1f} GB/s" for k, v in R["h2d"].items()))
        except Exception:  # noqa: BLE001
            R["errors"].append("matmul/h2d: " + traceback.format_exc())
            log(R["errors"][-1])
    else:
        R["skipped"].append("matmul reference (time budget)")
    save()

    # ---- large case, shrunk if time is short
    left = budget.left()
    n_docs = args.docs
    if dev.type == "cuda":
        # ~0.6 s per million tokens of build + timings, pessimistically; keep 30 s spare
        fit = int(max(0.0, left - 30) / 0.6 * 1e6 / args.avg_tokens)
        if fit < n_docs:
            R["skipped"].append(f"large case shrunk from {n_docs} to {fit} docs (time budget)")
            n_docs = fit
    if n_docs >= 1000 or (smoke and n_docs > 0):
        try:
            run_case("large", ctx, R, n_docs, args.avg_tokens, full_matrix=True)
        except Exception:  # noqa: BLE001
            R["errors"].append("large case: " + traceback.format_exc())
            log(R["errors"][-1])
    else:
        R["skipped"].append("large case (time budget)")

    lines = summarise(R)
    R["table"] = lines
    save()
    for line in lines:
        log(line)
    log(f"\nerrors: {len(R['errors'])}; skipped: {R['skipped']}; total {budget.elapsed():.1f}s; wrote {out}")
    return 1 if R["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
