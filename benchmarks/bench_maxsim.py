#!/usr/bin/env python3
"""MaxSim scan throughput on the CPU: lar.maxsim against the usual alternatives, on the same vectors.

Run from the repository root:

    .venv/bin/python benchmarks/bench_maxsim.py [--tokens N] [--out benchmarks/results/DATE-maxsim]
    .venv/bin/python benchmarks/bench_maxsim.py --quick          # < 20 s smoke run

For each dimension (d=384, MiniLM token vectors; d=128, ColBERT) one seeded corpus of
variable-length documents (20-300 tokens, random unit vectors stored as float16, plus a float32
copy holding exactly the same values) and one query of nq=32 unit vectors are built. Ten
"planted" documents contain noisy copies of every query token with decreasing strength, so the
true top-10 is known and well separated. Every method scores every document; document tokens
per second is ``n_tokens / median(time)`` over >= 3 repetitions after one warm-up:

* lar numpy backend (``maxsim(..., backend="numpy")``) on float16 (the stored format) and float32;
* lar torch CPU backend (``backend="torch"``) on float16 and float32;
* a plain torch einsum baseline (pad a chunk of documents to (n, max_len, d), einsum
  'qd,ntd->nqt', mask the padding with -inf, max over t, sum over q); its padding time is
  included, the time of the einsum+mask+max part alone is reported as a second row;
* ``fast_maxsim.maxsim_scores_variable`` (PyPI fast-maxsim, a fork of mixedbread's maxsim-cpu;
  list of float32 (len, d) arrays, called per chunk of documents);
* ``maxsim_cpu`` when importable (it returns wrong scores at >= 224 dims, which is why every
  kernel is checked against numpy here);
* PyLate's ``pylate.scores.colbert_scores`` the way ``pylate.rank.rerank`` calls it
  (``pad_sequence`` with zeros, no mask: a padded row scores 0, so a query token whose best
  real similarity is negative gets 0 instead), per chunk of documents, padding included.

The machine's float32 GEMM rate is measured with the MaxSim core's shape over the same float32
token matrix (streamed from memory, as the kernels' input is): (nq x d) @ (d x N) in one call
(numpy, torch) and (T x d) @ (d x nq) over 4096- and 16384-token blocks into a reused output
(numpy, torch); the best of these is the "matmul limit": MaxSim does 2*nq*d flops per document
token, so limit tokens/s = GEMM flop/s / (2*nq*d). A square 2048^3 GEMM is shown for the peak.
The float16 -> float32 conversion alone (lar's ``f16_to_f32`` and torch's cast) is timed too.

Each method's scores are compared with lar numpy float32 (the reference the issue names) and
with an independent float64 numpy computation: top-10 set equality and max |diff|.

Timing protocol (the machine may be shared and has few cores): one warm-up call of everything,
then ``--reps`` rounds, each timing every method/GEMM/piece once (round-robin, so a slow spell
hits all alike). Before each timed call the script idles >= ``--gap-s`` (OpenBLAS worker
threads spin ~0.1 s after a call and would steal a core from the next library) and waits (up
to ``--max-wait-s``) for other processes to go quiet; a call during which other processes used
more than ``--max-foreign`` of the CPUs (from /proc/stat minus our own CPU time) is redone, up
to ``--retries`` times while the run is younger than ``--budget-s``. What was kept is reported.

Writes <out>.json and <out>.md and prints the markdown. Threads: whatever torch, OpenBLAS and
rayon pick by default on this machine (recorded); ratios within one run are what count.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lar.maxsim import maxsim  # noqa: E402
from lar.maxsim.common import f16_to_f32  # noqa: E402

NQ = 32
N_PLANTED = 10


def log(msg: str = "") -> None:
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- corpus
def make_corpus(torch, n_tokens: int, dim: int, seed: int, min_len: int = 20, max_len: int = 300):
    """Random unit vectors (float16 storage + the same values as float32), variable-length
    documents, a query, and N_PLANTED planted documents whose tokens copy the query's
    (strength 0.9, 0.85, ... so the top-10 is known, ordered and well separated)."""
    rng = np.random.default_rng(seed)
    mean = (min_len + max_len) / 2
    lens = rng.integers(min_len, max_len + 1, size=int(n_tokens / mean * 1.2) + 16)
    ends = np.cumsum(lens)
    n_docs = max(N_PLANTED + 1, int(np.searchsorted(ends, n_tokens, side="right")))
    lens = lens[:n_docs]
    starts = np.zeros(n_docs, dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    n_tok = int(lens.sum())
    x16 = np.empty((n_tok, dim), dtype=np.float16)
    step = 1 << 17
    gen = torch.Generator().manual_seed(seed)  # torch.randn: several times faster than numpy's
    for a in range(0, n_tok, step):
        b = min(n_tok, a + step)
        v = torch.randn((b - a, dim), generator=gen)
        v /= v.norm(dim=1, keepdim=True)
        x16[a:b] = v.numpy()
    q = rng.standard_normal((NQ, dim), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    # planted documents: among those with >= NQ tokens, spread over the corpus
    eligible = np.flatnonzero(lens >= NQ)
    planted = rng.choice(eligible, size=N_PLANTED, replace=False)
    for k, j in enumerate(planted):
        alpha = 0.9 - 0.05 * k
        noise = rng.standard_normal((NQ, dim), dtype=np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        rows = alpha * q + np.sqrt(1 - alpha**2) * noise
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        pos = rng.choice(int(lens[j]), size=NQ, replace=False)
        x16[int(starts[j]) + pos] = rows
    x32 = np.empty((n_tok, dim), dtype=np.float32)
    for a in range(0, n_tok, step):
        f16_to_f32(x16[a : a + step], x32[a : a + step])  # exact: the same values
    return x16, x32, starts, lens, q, [int(j) for j in planted]


def reference_f64(q, x32, starts, n_tok):
    """Independent float64 MaxSim (plain numpy, chunked)."""
    q64 = q.astype(np.float64)
    out = np.empty(starts.shape[0], dtype=np.float64)
    ends = np.append(starts[1:], n_tok)
    a = 0
    while a < starts.shape[0]:
        b = min(starts.shape[0], a + 256)
        t0, t1 = int(starts[a]), int(ends[b - 1])
        sim = x32[t0:t1].astype(np.float64) @ q64.T
        out[a:b] = np.maximum.reduceat(sim, starts[a:b] - t0, axis=0).sum(axis=1)
        a = b
    return out


# -------------------------------------------------------------------------- methods
def chunks_of_docs(n_docs: int, size: int):
    return [(a, min(n_docs, a + size)) for a in range(0, n_docs, size)]


def make_methods(torch, q, x16, x32, starts, lens, args, extra):
    """name -> zero-argument callable returning float32/64 scores (n_docs,)."""
    n_docs = starts.shape[0]
    views32 = [x32[int(s) : int(s) + int(n)] for s, n in zip(starts, lens)]  # built once, not timed
    t32 = torch.from_numpy(x32)
    tviews = [t32[int(s) : int(s) + int(n)] for s, n in zip(starts, lens)]
    tq = torch.from_numpy(q)
    lens_t = torch.from_numpy(lens.astype(np.int64))
    M = {}

    M["lar numpy fp16"] = lambda: maxsim(q, x16, starts, backend="numpy")
    M["lar numpy fp32"] = lambda: maxsim(q, x32, starts, backend="numpy")
    M["lar torch-cpu fp16"] = lambda: maxsim(q, x16, starts, backend="torch", device="cpu")
    M["lar torch-cpu fp32"] = lambda: maxsim(q, x32, starts, backend="torch", device="cpu")

    chunk = args.chunk_docs

    def einsum_baseline():
        out = torch.empty(n_docs, dtype=torch.float32)
        compute = 0.0
        with torch.no_grad():
            for a, b in chunks_of_docs(n_docs, chunk):
                padded = torch.nn.utils.rnn.pad_sequence(tviews[a:b], batch_first=True)  # (n, L, d)
                t = time.perf_counter()
                L = padded.shape[1]
                pad_mask = torch.arange(L)[None, :] >= lens_t[a:b, None]  # (n, L) True on padding
                sim = torch.einsum("qd,ntd->nqt", tq, padded)
                sim.masked_fill_(pad_mask[:, None, :], float("-inf"))
                out[a:b] = sim.amax(dim=2).sum(dim=1)
                compute += time.perf_counter() - t
        extra["einsum_compute_s"].append(compute)
        return out.numpy()

    M["torch einsum (padded)"] = einsum_baseline

    import fast_maxsim

    def fast_maxsim_run():
        out = np.empty(n_docs, dtype=np.float32)
        for a, b in chunks_of_docs(n_docs, args.fm_chunk_docs):
            out[a:b] = fast_maxsim.maxsim_scores_variable(q, views32[a:b])
        return out

    M["fast_maxsim (fp32)"] = fast_maxsim_run

    try:
        import maxsim_cpu  # noqa: F401

        def maxsim_cpu_run():
            out = np.empty(n_docs, dtype=np.float32)
            for a, b in chunks_of_docs(n_docs, args.fm_chunk_docs):
                out[a:b] = maxsim_cpu.maxsim_scores_variable(q, views32[a:b])
            return out

        M["maxsim_cpu (fp32)"] = maxsim_cpu_run
    except ImportError:
        pass

    from pylate.scores import colbert_scores

    def pylate_run():
        out = torch.empty(n_docs, dtype=torch.float32)
        with torch.no_grad():
            for a, b in chunks_of_docs(n_docs, chunk):
                padded = torch.nn.utils.rnn.pad_sequence(tviews[a:b], batch_first=True, padding_value=0)
                out[a:b] = colbert_scores(tq.unsqueeze(0), padded)[0]
        return out.numpy()

    M["pylate colbert_scores"] = pylate_run
    return M


def topk(scores, k=10):
    s = np.asarray(scores, dtype=np.float64)
    idx = np.argpartition(-s, k - 1)[:k]
    return [int(i) for i in idx[np.argsort(-s[idx], kind="stable")]]


def gemm_methods(torch, q, x32, square: int = 2048):
    """fp32 GEMMs of the MaxSim core's shape over the whole float32 token matrix (streamed from
    memory like the kernels' input): one call over all N tokens, and cache-sized blocks of
    tokens into a preallocated output (how a blocked kernel runs them). Plus a square GEMM."""
    n, d = x32.shape
    tq, tx = torch.from_numpy(q), torch.from_numpy(x32)
    qT = np.ascontiguousarray(q.T)
    tqT = torch.from_numpy(qT)
    G = {
        "numpy q @ X.T, one call": lambda: q @ x32.T,
        "torch q @ X.T, one call": lambda: tq @ tx.T,
    }
    for bt in (4096, 16384):
        buf = np.empty((bt, q.shape[0]), dtype=np.float32)
        tbuf = torch.from_numpy(buf)

        def np_blocked(bt=bt, buf=buf):
            for a in range(0, n, bt):
                xb = x32[a : a + bt]
                np.dot(xb, qT, out=buf[: xb.shape[0]])

        def torch_blocked(bt=bt, tbuf=tbuf):
            for a in range(0, n, bt):
                xb = tx[a : a + bt]
                torch.mm(xb, tqT, out=tbuf[: xb.shape[0]])

        G[f"numpy X @ q.T, blocks of {bt}"] = np_blocked
        G[f"torch X @ q.T, blocks of {bt}"] = torch_blocked
    m = square
    a = np.random.default_rng(1).standard_normal((m, m), dtype=np.float32)
    ta = torch.from_numpy(a)
    G[f"numpy square {m}^3 (peak)"] = lambda: a @ a
    G[f"torch square {m}^3 (peak)"] = lambda: ta @ ta
    flops = {k: (2.0 * m**3 if "square" in k else 2.0 * q.shape[0] * d * n) for k in G}
    return G, flops


def component_methods(torch, x16):
    """Pieces of the fp16 path, timed alone: float16 -> float32 conversion of the whole token
    matrix in 4096-token steps into a reused buffer (lar numpy's f16_to_f32, single-threaded
    numpy ufuncs; torch's ``.to(float32)``, its vectorised multi-threaded cast)."""
    n, d = x16.shape
    step = 4096
    buf = np.empty((step, d), dtype=np.float32)
    tx16, tbuf = torch.from_numpy(x16), torch.from_numpy(buf)

    def lar_conv():
        for a in range(0, n, step):
            xb = x16[a : a + step]
            f16_to_f32(xb, buf[: xb.shape[0]])

    def torch_conv():
        for a in range(0, n, step):
            xb = tx16[a : a + step]
            tbuf[: xb.shape[0]].copy_(xb)

    return {"fp16->fp32, lar f16_to_f32 (numpy ufuncs, 1 thread)": lar_conv,
            "fp16->fp32, torch copy_ (vectorised, 2 threads)": torch_conv}


def cpu_busy_s() -> float | None:
    """Busy CPU seconds of the whole machine so far (from /proc/stat), to tell foreign load."""
    try:
        f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        v = [int(x) for x in f]
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal
        return busy / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def wait_quiet(max_wait_s: float, threshold: float = 0.10, sample_s: float = 0.5) -> float:
    """Wait (at most ``max_wait_s``) until other processes use < ``threshold`` of the CPUs over a
    ``sample_s`` window (we are idle meanwhile). Returns the seconds waited."""
    t0 = time.perf_counter()
    ncpu = os.cpu_count() or 1
    while True:
        b0 = cpu_busy_s()
        time.sleep(sample_s)
        b1 = cpu_busy_s()
        if b0 is None or b1 is None or (b1 - b0) / (sample_s * ncpu) < threshold:
            break
        if time.perf_counter() - t0 > max_wait_s:
            break
    return time.perf_counter() - t0


def own_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_dim(torch, dim: int, args, budget_t0: float) -> dict:
    t = time.perf_counter()
    x16, x32, starts, lens, q, planted = make_corpus(torch, args.tokens, dim, args.seed + dim)
    n_tok, n_docs = int(x16.shape[0]), int(starts.shape[0])
    D = {"dim": dim, "nq": NQ, "n_docs": n_docs, "n_tokens": n_tok,
         "doc_len": {"min": int(lens.min()), "mean": float(lens.mean()), "max": int(lens.max())},
         "fp16_gib": x16.nbytes / 2**30, "fp32_gib": x32.nbytes / 2**30,
         "planted_docs_in_rank_order": planted, "build_s": time.perf_counter() - t}
    log(f"\n[d={dim}] {n_docs:,} docs, {n_tok:,} tokens (len {lens.min()}-{lens.max()}, mean "
        f"{lens.mean():.0f}); fp16 {D['fp16_gib']:.2f} GiB + fp32 {D['fp32_gib']:.2f} GiB; "
        f"built in {D['build_s']:.1f}s")

    t = time.perf_counter()
    ref64 = reference_f64(q, x32, starts, n_tok)
    D["reference_f64_s"] = time.perf_counter() - t
    top_ref64 = topk(ref64)
    D["top10_f64"] = top_ref64
    D["planted_is_top10_f64"] = top_ref64 == planted
    D["score_gap_10th_vs_11th"] = float(np.sort(ref64)[-10] - np.sort(ref64)[-11])

    extra = {"einsum_compute_s": []}
    methods = make_methods(torch, q, x16, x32, starts, lens, args, extra)
    gemms, gflop = gemm_methods(torch, q, x32, square=1024 if args.quick else 2048)
    comps = component_methods(torch, x16)
    everything = {**{("gemm", k): v for k, v in gemms.items()}, **{("component", k): v for k, v in comps.items()},
                  **{("method", k): v for k, v in methods.items()}}
    # one warm-up each, then repetitions round-robin over all methods and GEMMs, so that a
    # slow spell of a noisy machine hits every method alike
    times = {k: [] for k in everything}
    scores = {}
    einsum_parts = []
    t_busy, t_own, t_wall = cpu_busy_s(), own_cpu_s(), time.perf_counter()
    for k, fn in everything.items():
        gc.collect()
        wait_quiet(args.max_wait_s, sample_s=args.gap_s)
        out = fn()
        if k[0] == "method":
            scores[k[1]] = np.asarray(out, dtype=np.float64)
    # Each timed call: wait until the machine is quiet (this idle time also lets the previous
    # library's spinning worker threads park), time the call, and measure the CPU time other
    # processes used meanwhile; a call during which they used > args.max_foreign of the CPUs is
    # thrown away and redone (up to args.retries times, while the time budget lasts).
    ncpu = os.cpu_count() or 1
    calls = {k: [] for k in everything}  # per timed call: foreign share, attempts, waited
    for rep in range(args.reps):
        for k, fn in everything.items():
            for attempt in range(args.retries + 1):
                over_budget = time.perf_counter() - budget_t0 > args.budget_s
                waited = wait_quiet(0.0 if over_budget else args.max_wait_s, sample_s=args.gap_s)
                extra["einsum_compute_s"].clear()
                b0, o0 = cpu_busy_s(), own_cpu_s()
                t = time.perf_counter()
                fn()
                dt_call = time.perf_counter() - t
                b1, o1 = cpu_busy_s(), own_cpu_s()
                # /proc/stat counts in 10 ms ticks: too coarse to judge calls much shorter than 0.1 s
                foreign = (None if b0 is None or b1 is None or dt_call < 0.1
                           else max(0.0, ((b1 - b0) - (o1 - o0)) / (dt_call * ncpu)))
                clean = foreign is None or foreign <= args.max_foreign
                over_budget = time.perf_counter() - budget_t0 > args.budget_s
                if clean or attempt == args.retries or over_budget:
                    break
            times[k].append(dt_call)
            calls[k].append({"foreign_cpu_share": foreign, "attempts": attempt + 1, "waited_s": round(waited, 2)})
            if k == ("method", "torch einsum (padded)"):
                einsum_parts.append(sum(extra["einsum_compute_s"]))
        fs = [c[-1]["foreign_cpu_share"] or 0.0 for c in calls.values()]
        log(f"  repetition {rep + 1}/{args.reps} done; foreign CPU share per call max {100 * max(fs):.0f}%, "
            f"redone calls so far {sum(c['attempts'] - 1 for v in calls.values() for c in v)}")
    wall = time.perf_counter() - t_wall
    busy = cpu_busy_s()
    all_calls = [c for v in calls.values() for c in v]
    D["timing_window"] = {"wall_s": wall, "own_cpu_s": own_cpu_s() - t_own,
                          "machine_busy_cpu_s": None if busy is None else busy - t_busy,
                          "redone_calls": sum(c["attempts"] - 1 for c in all_calls),
                          "timed_calls": len(all_calls),
                          "kept_calls_over_threshold": sum(1 for c in all_calls
                                                           if (c["foreign_cpu_share"] or 0) > args.max_foreign),
                          "max_foreign_share_kept": max((c["foreign_cpu_share"] or 0) for c in all_calls),
                          "calls_too_short_to_judge": sum(1 for c in all_calls if c["foreign_cpu_share"] is None)}
    if busy is not None:
        D["timing_window"]["foreign_cpu_s"] = max(0.0, D["timing_window"]["machine_busy_cpu_s"] - D["timing_window"]["own_cpu_s"])
        D["timing_window"]["foreign_cpu_share"] = D["timing_window"]["foreign_cpu_s"] / (wall * ncpu)
    D["calls"] = {f"{k[0]}: {k[1]}": v for k, v in calls.items()}
    D["gemm"] = {}
    for name in gemms:
        ts = times[("gemm", name)]
        med = statistics.median(ts)
        D["gemm"][name] = {"median_s": med, "min_s": min(ts), "times_s": ts, "gflops": gflop[name] / med / 1e9}
        if "square" in name:
            D["gemm"][name]["peak_only"] = True
        else:
            D["gemm"][name]["limit_tokens_per_s"] = n_tok / med
        log(f"  GEMM {name:32s} {med * 1e3:8.1f} ms  {gflop[name] / med / 1e9:7.1f} GFLOP/s")
    D["components"] = {}
    for name in comps:
        ts = times[("component", name)]
        med = statistics.median(ts)
        D["components"][name] = {"median_s": med, "min_s": min(ts), "times_s": ts, "tokens_per_s": n_tok / med,
                                 "share_of_lar_numpy_fp16_time": None}
    best = max((k for k in D["gemm"] if "limit_tokens_per_s" in D["gemm"][k]),
               key=lambda k: D["gemm"][k]["limit_tokens_per_s"])
    lim = D["gemm"][best]["limit_tokens_per_s"]
    D["limit_from"] = best
    D["limit_tokens_per_s"] = lim
    D["limit_gflops"] = lim * 2.0 * NQ * dim / 1e9

    res = {}
    ref32 = scores["lar numpy fp32"]
    for name in methods:
        ts = times[("method", name)]
        med = statistics.median(ts)
        res[name] = {"median_s": med, "min_s": min(ts), "reps": len(ts), "times_s": ts,
                     "tokens_per_s": n_tok / med, "_scores": scores[name]}
        log(f"  {name:28s} {med:8.3f}s  {n_tok / med / 1e6:8.2f} M tok/s")
        if name == "torch einsum (padded)" and einsum_parts:
            cm = statistics.median(einsum_parts)
            res["  einsum part only (padding excluded)"] = {
                "median_s": cm, "min_s": min(einsum_parts), "reps": len(einsum_parts), "times_s": einsum_parts,
                "tokens_per_s": n_tok / cm, "_scores": scores[name], "derived_from": name}
    base = res["lar numpy fp16"]["tokens_per_s"]
    for c in D["components"].values():
        c["share_of_lar_numpy_fp16_time"] = c["median_s"] / res["lar numpy fp16"]["median_s"]
    for name, r in res.items():
        s = r.pop("_scores")
        top = topk(s)
        r.update(
            pct_of_gemm_limit=100.0 * r["tokens_per_s"] / lim,
            ratio_vs_lar_numpy_fp16=r["tokens_per_s"] / base,
            ratio_vs_lar_numpy_fp32=r["tokens_per_s"] / res["lar numpy fp32"]["tokens_per_s"],
            top10_set_equal_ref32=set(top) == set(topk(ref32)),
            top10_order_equal_ref32=top == topk(ref32),
            top10_set_equal_f64=set(top) == set(top_ref64),
            max_abs_diff_vs_lar_numpy_fp32=float(np.max(np.abs(s - ref32))),
            max_abs_diff_vs_f64=float(np.max(np.abs(s - ref64))),
            n_docs_diff_gt_1e3=int(np.sum(np.abs(s - ref64) > 1e-3)),
        )
    if "maxsim_cpu (fp32)" not in res:
        D["skipped"] = ["maxsim_cpu: not importable in this environment (package not installed)"]
    D["methods"] = res
    del x16, x32, methods, gemms, comps, everything, scores
    gc.collect()
    return D


# --------------------------------------------------------------------------- report
def env_info(torch) -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        flags = next(l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("flags"))
        simd = sorted(f for f in flags.split(":", 1)[1].split() if f.startswith(("avx", "fma", "amx", "f16c")))
    except Exception:  # noqa: BLE001
        simd = []
    blas = []
    try:
        import threadpoolctl

        blas = [{k: v for k, v in i.items() if k in ("user_api", "internal_api", "num_threads", "version",
                                                      "architecture", "prefix")}
                for i in threadpoolctl.threadpool_info()]
    except ImportError:
        pass
    vers = {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__}
    for mod in ("fast_maxsim", "pylate", "maxsim_cpu"):
        try:
            from importlib.metadata import version

            vers[mod] = version(mod.replace("_", "-"))
        except Exception:  # noqa: BLE001
            vers[mod] = None
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    return {"cpu_model": cpu, "simd_flags": simd, "os_cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "mem_total_gib": _mem_gib(), "platform": platform.platform(),
            "torch_num_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "threadpools": blas,
            "rayon_threads": os.environ.get("RAYON_NUM_THREADS") or f"default (= {os.cpu_count()} logical CPUs)",
            "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "RAYON_NUM_THREADS", "PYLATE_SCORES_BACKEND")},
            "versions": vers, "git_commit": commit}


def _mem_gib():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        return None


def fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f} M"


def markdown(R: dict) -> str:
    E = R["env"]
    blas = ", ".join(f"{t['internal_api']} {t.get('version') or ''} ({t['num_threads']} threads"
                     + (f", {t['architecture']}" if t.get("architecture") else "") + ")"
                     for t in E["threadpools"])
    L = [f"# MaxSim CPU scan throughput — {R['date']}", ""]
    L.append(f"Command: `{R['command']}`  ")
    L.append(f"Machine: {E['cpu_model']}, {E['os_cpu_count']} logical CPUs (affinity {E['cpu_affinity']}), "
             f"{E['mem_total_gib']} GiB RAM; SIMD: {' '.join(E['simd_flags'])}.  ")
    L.append(f"Threads: torch {E['torch_num_threads']} (interop {E['torch_interop_threads']}); "
             f"thread pools: {blas}; fast_maxsim (rayon) {E['rayon_threads']}.  ")
    v = E["versions"]
    L.append("Versions: " + ", ".join(f"{k} {v[k]}" for k in v if v[k]) + f"; lar at {E['git_commit']}"
             + ("" if v.get("maxsim_cpu") else "; maxsim_cpu not installed (skipped)") + ".  ")
    L.append(f"Timing: median of {R['args']['reps']} runs after 1 warm-up, whole corpus per run, repetitions "
             f"round-robin over all methods and GEMMs, >= {R['args']['gap_s']} s idle and a quiet machine before "
             f"each call (see the per-d notes); load average at start {R['loadavg_start']}, at end "
             f"{R['loadavg_end']}; total wall time {R['elapsed_s']:.0f} s.")
    L.append("")
    L.append("Tokens/s counts real document tokens (padding excluded). **% GEMM** = tokens/s divided by the "
             "machine's fp32 GEMM limit for this shape (best measured fp32 GEMM of the MaxSim shape, (nq x d) @ (d x N) "
             "in one call or (T x d) @ (d x nq) over 4096/16384-token blocks, over the same float32 token matrix, "
             "in flop/s, / (2 nq d)). **vs lar numpy** = ratio to lar numpy on float16 "
             "(the stored format) in the same run. Score checks are against lar numpy float32 "
             "(top-10 as a set) and against an independent float64 computation (max |diff|).")
    for D in R["dims"]:
        L += ["", f"## d = {D['dim']} (nq = {D['nq']}; {D['n_docs']:,} docs, {D['n_tokens']:,} tokens, "
                  f"length {D['doc_len']['min']}-{D['doc_len']['max']}, mean {D['doc_len']['mean']:.0f})", ""]
        g = D["gemm"]
        tw = D.get("timing_window", {})
        if tw.get("foreign_cpu_s") is not None:
            L.append(f"Timing window {tw['wall_s']:.0f} s; other processes used {tw['foreign_cpu_s']:.1f} CPU-s "
                     f"meanwhile ({100 * tw['foreign_cpu_share']:.0f}% of the {R['env']['os_cpu_count']} CPUs, "
                     f"waits included); {tw['redone_calls']} of {tw['timed_calls']} timed calls were redone because "
                     f"other processes used > {100 * R['args']['max_foreign']:.0f}% of the CPUs during them; "
                     f"{tw['kept_calls_over_threshold']} kept calls are still over that (worst "
                     f"{100 * tw['max_foreign_share_kept']:.0f}%)"
                     + (f"; {tw['calls_too_short_to_judge']} calls were too short (< 0.1 s) to judge"
                        if tw.get("calls_too_short_to_judge") else "") + "."
                     + (" **Some timings were taken while the machine was busy with other work.**"
                        if tw["kept_calls_over_threshold"] else ""))
            L.append("")
        L.append(f"fp32 GEMM with the MaxSim core's shape over the same float32 token matrix; the best one is the "
                 f"limit: {D['limit_from']} = {D['limit_gflops']:.0f} GFLOP/s = "
                 f"**{fmt_rate(D['limit_tokens_per_s'])} tokens/s** (2·nq·d = {2 * D['nq'] * D['dim']:,} flop per token).")
        L.append("")
        L.append("| GEMM | median ms | GFLOP/s | as tokens/s |")
        L.append("|---|---:|---:|---:|")
        for k, v in g.items():
            tok = fmt_rate(v["limit_tokens_per_s"]) if "limit_tokens_per_s" in v else "-"
            L.append(f"| {k} | {v['median_s'] * 1e3:.1f} | {v['gflops']:.0f} | {tok} |")
        L.append("")
        L.append(f"Planted top-10 recovered by the float64 reference: {D['planted_is_top10_f64']} "
                 f"(gap between 10th and 11th score {D['score_gap_10th_vs_11th']:.2f}).")
        L.append("")
        L.append("| method | median s | tokens/s | % GEMM | vs lar numpy fp16 | top-10 = ref | max abs diff vs lar numpy fp32 | vs float64 |")
        L.append("|---|---:|---:|---:|---:|:---:|---:|---:|")
        for name, r in D["methods"].items():
            top = "yes" if r["top10_set_equal_ref32"] else "**no**"
            if r["top10_set_equal_ref32"] and not r["top10_order_equal_ref32"]:
                top += " (order differs)"
            L.append(f"| {name.strip()} | {r['median_s']:.3f} | {fmt_rate(r['tokens_per_s'])} | "
                     f"{r['pct_of_gemm_limit']:.1f}% | {r['ratio_vs_lar_numpy_fp16']:.2f}x | {top} | "
                     f"{r['max_abs_diff_vs_lar_numpy_fp32']:.2e} | {r['max_abs_diff_vs_f64']:.2e} |")
        if D.get("components"):
            L.append("")
            L.append("Pieces of the float16 path, timed alone in the same rounds (whole token matrix, 4096-token steps):")
            L.append("")
            L.append("| piece | median s | as tokens/s | share of lar numpy fp16 time |")
            L.append("|---|---:|---:|---:|")
            for k, c in D["components"].items():
                L.append(f"| {k} | {c['median_s']:.3f} | {fmt_rate(c['tokens_per_s'])} | "
                         f"{100 * c['share_of_lar_numpy_fp16_time']:.0f}% |")
        for s in D.get("skipped", []):
            L.append(f"\nSkipped: {s}")
    if R.get("notes"):
        L += ["", "## Notes", ""] + [f"- {n}" for n in R["notes"]]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=None, help="document tokens per dimension (default 2,000,000)")
    ap.add_argument("--dims", default="384,128")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions after one warm-up (default 3)")
    ap.add_argument("--chunk-docs", type=int, default=256, help="documents per padded chunk (einsum, PyLate)")
    ap.add_argument("--fm-chunk-docs", type=int, default=4096, help="documents per fast_maxsim call")
    ap.add_argument("--gap-s", type=float, default=None,
                    help="idle seconds (at least) before each timed call, also the window of the quiet check "
                         "(default 0.2; quick 0.02): OpenBLAS worker threads spin ~0.1 s after a call and "
                         "would steal a core from the next library")
    ap.add_argument("--max-wait-s", type=float, default=None,
                    help="before each timed call, wait up to this long for other processes to go quiet "
                         "(default 5; quick 0)")
    ap.add_argument("--max-foreign", type=float, default=0.10,
                    help="redo a timed call if other processes used more than this share of the CPUs during it")
    ap.add_argument("--retries", type=int, default=None, help="redos per timed call (default 3; quick 0)")
    ap.add_argument("--budget-s", type=float, default=230.0,
                    help="no more waiting for quiet and no more redos once the run is this old (seconds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run (60k tokens, < 20 s)")
    ap.add_argument("--out", default=None, help="output stem (default benchmarks/results/DATE-maxsim)")
    args = ap.parse_args(argv)
    args.tokens = args.tokens or (60_000 if args.quick else 2_000_000)
    args.reps = args.reps or 3
    args.gap_s = (0.02 if args.quick else 0.2) if args.gap_s is None else args.gap_s
    args.max_wait_s = (0.0 if args.quick else 5.0) if args.max_wait_s is None else args.max_wait_s
    args.retries = (0 if args.quick else 3) if args.retries is None else args.retries
    today = str(dt.date.today())
    out = Path(args.out or (f"/tmp/{today}-maxsim-quick" if args.quick else f"benchmarks/results/{today}-maxsim"))
    out.parent.mkdir(parents=True, exist_ok=True)

    import torch

    t0 = time.perf_counter()
    R = {"date": today, "command": " ".join([".venv/bin/python", "benchmarks/bench_maxsim.py"] + sys.argv[1:]),
         "args": vars(args), "env": env_info(torch), "dims": [],
         "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    log(f"{R['env']['cpu_model']}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}")
    for dim in (int(s) for s in args.dims.split(",")):
        R["dims"].append(run_dim(torch, dim, args, t0))
    R["notes"] = [
        "Every method reads the same token values: the float32 matrix is the float16 one converted exactly.",
        "fast_maxsim only accepts float32 (a float16 store must be converted first; not included in its time). "
        "It is given a list of per-document views of the float32 matrix (built once, not timed), "
        f"{args.fm_chunk_docs} documents per call.",
        f"torch einsum and PyLate pad {args.chunk_docs} documents at a time (pad_sequence, included in their "
        "time); PyLate pads with zeros and passes no mask, as pylate.rank.rerank does, so a query token whose "
        "best real similarity is negative scores 0 there (rare with 20+ random tokens, visible as a score diff).",
        "lar numpy computes in float32 from float16 via lar.maxsim.common.f16_to_f32 (exact); lar torch-cpu uses "
        "torch's own cast and its default segment method on CPU (scatter_reduce).",
        "% GEMM above 100% is possible for float16 input: it reads half the bytes of the float32 GEMM.",
    ]
    R["elapsed_s"] = time.perf_counter() - t0
    R["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    md = markdown(R)
    Path(f"{out}.json").write_text(json.dumps(R, indent=2, default=str))
    Path(f"{out}.md").write_text(md)
    print(md)
    log(f"wrote {out}.json and {out}.md in {R['elapsed_s']:.0f}s")
    bad = [(D["dim"], n) for D in R["dims"] for n, r in D["methods"].items() if not r["top10_set_equal_ref32"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
