#!/usr/bin/env python3
"""The late scan on a GPU against the device's own memory bandwidth, and the same on the CPU
(issue 23, part 4). Run by ``benchmarks/gpu_device_run.sh``; alone:

    .venv/bin/python benchmarks/gpu_bench.py --out DIR            # the full run (GPU, ~4 min)
    .venv/bin/python benchmarks/gpu_bench.py --smoke --out DIR    # tiny, CPU only, seconds

Measures, each step written to ``DIR/gpu-bench.json`` as soon as it is done (a run cut short
keeps what it had) and summed up in ``DIR/gpu-bench.md``:

1. memory bandwidth: a large device-to-device copy (``torch`` clone, read + write bytes over
   the time), and a host copy (numpy) for the CPU;
2. the late scan of a SciFact-sized corpus (1.2 M tokens; 128 and 384 dims; synthetic unit
   vectors, 10-token to 300-token chunks, 4 chunks a unit): through ``scan_units`` with the
   token arena resident on the device (``lar.maxsim.resident.DeviceArena``: the first scan
   fills it, then steady scans), from host memory per query (the arena off), with numpy and
   torch on the CPU; each checked against numpy's top 100;
3. a synthetic 100 M-token corpus (fp16, 128 dims, 25.6 GB) resident on the device: the kernel
   over the whole arena (float32 and float16 compute), and ``scan_units`` end to end; tokens/s
   and the bytes read per second against the measured bandwidth (goal: >= 50 % for fp16);
   on the CPU a 10 M-token slice;
4. ``eng.search`` latency with the default layers on a small corpus (the first 300 SciFact
   documents when ``../shared/benchmarks/scifact-train`` is there, else the repository's docs),
   built within a time box, the late layer with ``late_device_mb`` auto (resident on CUDA).

Nothing is downloaded; only the local packages are used.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

NQ = 32  # query tokens (a MiniLM query of a sentence)


class Report:
    def __init__(self, out: Path, name: str, meta: dict):
        self.json = out / f"{name}.json"
        self.md = out / f"{name}.md"
        self.doc = {"meta": meta, "steps": []}
        out.mkdir(parents=True, exist_ok=True)

    def add(self, name: str, **fields) -> dict:
        row = {"step": name, **fields}
        self.doc["steps"].append(row)
        self.save()
        print(json.dumps(row, default=str), flush=True)
        return row

    def save(self) -> None:
        self.json.write_text(json.dumps(self.doc, indent=1, default=str))

    def run(self, name: str, fn, *args) -> None:
        """One step; a failure (out of memory, a missing package) is recorded, the run goes on."""
        try:
            fn(self, *args)
        except Exception as exc:  # noqa: BLE001 - the report says what failed
            self.add(name, failed=f"{type(exc).__name__}: {exc}"[:500])


def _sync(torch, dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(fn, reps: int, sync=lambda: None):
    fn()  # warm-up
    sync()
    ts = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        sync()
        ts.append(time.perf_counter() - t0)
    return out, float(np.median(ts))


# -- 1. bandwidth ---------------------------------------------------------------------------------
def device_bandwidth(torch, dev, nbytes: int) -> float:
    """Bytes per second of a device-to-device copy (read + write)."""
    x = torch.empty(nbytes // 2, dtype=torch.float16, device=dev)
    x.normal_()
    y = torch.empty_like(x)
    _, t = timed(lambda: y.copy_(x), 5, lambda: _sync(torch, dev))
    del x, y
    return 2 * nbytes / t


def host_bandwidth(nbytes: int) -> float:
    x = np.ones(nbytes // 2, dtype=np.float16)
    y = np.empty_like(x)
    _, t = timed(lambda: np.copyto(y, x), 3)
    return 2 * nbytes / t


# -- 2. a synthetic corpus of units ---------------------------------------------------------------
def make_units(n_tokens: int, dim: int, seed: int = 0, unit_tokens: int = 600):
    """Units of about ``unit_tokens`` float16 unit vectors in chunks of 10-300 tokens, one
    planted unit whose first tokens are noisy copies of the query; (units, q)."""
    from lar.encoders.encoding import UnitEncoding

    rng = np.random.default_rng(seed)
    q = rng.standard_normal((NQ, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    units, done, i = {}, 0, 0
    while done < n_tokens:
        n = min(int(rng.integers(unit_tokens // 2, unit_tokens * 3 // 2)), n_tokens - done)
        n = max(n, 1)
        x = rng.standard_normal((n, dim)).astype(np.float32)
        if i == 7:
            m = min(n, NQ)
            x[:m] = q[:m] + 0.05 * rng.standard_normal((m, dim))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        cuts = np.unique(np.clip(np.cumsum(rng.integers(10, 300, size=8)), 1, n))
        starts = np.concatenate([[0], cuts[cuts < n]]).astype(np.int64)
        ends = np.append(starts[1:], n)
        spans = np.stack([np.arange(n) * 5, np.arange(n) * 5 + 4], 1).astype(np.int64)
        chunks = np.stack([starts * 5, ends * 5], 1).astype(np.int64)
        units[f"{i:032x}"] = UnitEncoding("synthetic", "1", x.astype(np.float16), spans, starts,
                                          chunks)
        done += n
        i += 1
    return units, q


def same_top(a, b) -> tuple[bool, float]:
    same = [(h, c) for _, h, c in a.top] == [(h, c) for _, h, c in b.top]
    diff = float(np.max(np.abs(np.array([s for s, _, _ in a.top]) - np.array([s for s, _, _ in b.top]))))
    return same, diff


def scifact_sized(rep: Report, torch, dev, n_tokens: int, dims, cpu_reps: int, bw: float):
    from lar.layers.late.scan import scan_units
    from lar.maxsim.resident import DeviceArena

    for dim in dims:
        units, q = make_units(n_tokens, dim)
        order = list(units)
        total = sum(e.n_tokens for e in units.values())
        w = np.ones(NQ, np.float32)
        scan = lambda **kw: scan_units(q, w, order, units.get, 100, **kw)  # noqa: E731
        ref, t_np = timed(lambda: scan(backend="numpy"), cpu_reps)
        rep.add("scifact-sized scan", where="cpu", how="numpy", dim=dim, tokens=total, s=t_np,
                tokens_per_s=total / t_np)
        got, t = timed(lambda: scan(backend="torch", device="cpu"), cpu_reps)
        rep.add("scifact-sized scan", where="cpu", how="torch", dim=dim, tokens=total, s=t,
                tokens_per_s=total / t, same_top100=same_top(got, ref)[0],
                max_abs_diff=same_top(got, ref)[1])
        if dev.type != "cuda":
            continue
        sync = lambda: _sync(torch, dev)  # noqa: E731
        got, t = timed(lambda: scan(backend="torch", device=dev, block_tokens=1 << 20), 3, sync)
        rep.add("scifact-sized scan", where="cuda", how="from host per query", dim=dim,
                tokens=total, s=t, tokens_per_s=total / t, same_top100=same_top(got, ref)[0])
        arena = DeviceArena(str(dev), 8 << 30)
        t0 = time.perf_counter()
        first = scan(backend="torch", device=dev, block_tokens=1 << 20, resident=arena)
        sync()
        t_fill = time.perf_counter() - t0
        got, t = timed(lambda: scan(backend="torch", device=dev, block_tokens=1 << 20,
                                    resident=arena), 5, sync)
        same, diff = same_top(got, ref)
        rep.add("scifact-sized scan", where="cuda", how="resident arena", dim=dim, tokens=total,
                fill_s=t_fill, s=t, tokens_per_s=total / t, bytes_per_s=total * dim * 2 / t,
                of_bandwidth=total * dim * 2 / t / bw, hit_rate=got.hit_rate,
                first_hit_rate=first.hit_rate, same_top100=same, max_abs_diff=diff)
        arena.clear()
        del arena
        torch.cuda.empty_cache()


# -- 3. the 100 M-token corpus --------------------------------------------------------------------
def big_corpus(rep: Report, torch, dev, n_tokens: int, dim: int, bw: float, unit_tokens: int):
    """Units that share a pool of random host rows (the scan's cost does not depend on the
    values), put into a resident arena; the kernel over the whole arena, then ``scan_units``."""
    from lar.encoders.encoding import UnitEncoding
    from lar.layers.late.scan import scan_units
    from lar.maxsim import maxsim
    from lar.maxsim.resident import DeviceArena

    rng = np.random.default_rng(1)
    pool_rows = min(n_tokens, 1 << 22)
    pool = rng.standard_normal((pool_rows, dim), dtype=np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    pool = pool.astype(np.float16)
    q = rng.standard_normal((NQ, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = np.ones(NQ, np.float32)
    chunk = 100
    starts = np.arange(0, unit_tokens, chunk, dtype=np.int64)
    spans = np.zeros((unit_tokens, 2), np.int64)
    cspans = np.stack([starts, starts + chunk], 1)
    n_units = n_tokens // unit_tokens
    arena = DeviceArena(str(dev), n_tokens * dim * 2 + (64 << 20), segment_rows=1 << 24)
    units = {}
    t0 = time.perf_counter()
    for i in range(n_units):
        a = (i * unit_tokens) % (pool_rows - unit_tokens + 1)
        enc = UnitEncoding("synthetic", "1", pool[a:a + unit_tokens], spans, starts, cspans)
        h = f"{i:032x}"
        arena.put(h, enc.tokens)
        units[h] = enc
    _sync(torch, dev)
    t_fill = time.perf_counter() - t0
    total = n_units * unit_tokens
    st = arena.stats()
    rep.add("large corpus fill", where=dev.type, units=n_units, tokens=total, dim=dim, s=t_fill,
            resident_bytes=st.resident_bytes, allocated_bytes=st.allocated_bytes)
    order = sorted(units, key=arena.positions().__getitem__)
    by_segment: dict[int, list] = {}
    for h in order:
        slot = arena.get(h)
        by_segment.setdefault(slot.segment, []).append(slot)
    views = [arena.block(group) for group in by_segment.values()]  # one view per segment
    seg_starts = [np.arange(0, int(v.shape[0]), chunk, dtype=np.int64) for v in views]
    sync = lambda: _sync(torch, dev)  # noqa: E731
    bt = 1 << 20 if dev.type == "cuda" else 1 << 16
    reps = 3 if dev.type == "cuda" else 1
    for cd in ("float32", "float16"):
        _, t = timed(lambda: [maxsim(q, v, s0, w, backend="torch", device=dev, block_tokens=bt,
                                     compute_dtype=cd) for v, s0 in zip(views, seg_starts)],
                     reps, sync)
        rep.add("large corpus kernel", where=dev.type, compute_dtype=cd, tokens=total, dim=dim,
                s=t, tokens_per_s=total / t, bytes_per_s=total * dim * 2 / t,
                of_bandwidth=total * dim * 2 / t / bw, segments=len(views))
    got, t = timed(lambda: scan_units(q, w, order, units.get, 100, backend="torch", device=dev,
                                      block_tokens=bt, resident=arena), reps, sync)
    rep.add("large corpus scan_units", where=dev.type, tokens=total, dim=dim, units=n_units, s=t,
            tokens_per_s=total / t, bytes_per_s=total * dim * 2 / t,
            of_bandwidth=total * dim * 2 / t / bw, hit_rate=got.hit_rate)
    del views
    arena.clear()
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # the engine's arena sizes itself on the free memory


# -- 4. the engine --------------------------------------------------------------------------------
def small_corpus(folder: Path, n_docs: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for cand in (ROOT.parent / "shared", ROOT / "shared", Path(os.environ.get("LAR_SHARED", "/nonexistent"))):
        src = cand / "benchmarks" / "scifact-train" / "corpus.jsonl"
        if src.is_file():
            with src.open(encoding="utf-8") as f:
                for i, line in enumerate(f):
                    if i >= n_docs:
                        break
                    d = json.loads(line)
                    (folder / f"{d['_id']}.txt").write_text(f"{d.get('title', '')}\n\n{d['text']}\n")
            return folder
    for p in sorted((ROOT / "docs").glob("*.md"))[:n_docs]:
        (folder / p.name).write_text(p.read_text(encoding="utf-8"))
    return folder


def engine_search(rep: Report, tmp: Path, n_docs: int, build_s: float, reps: int):
    try:
        import lar
    except Exception as exc:  # a stripped environment: say so, go on
        rep.add("eng.search", skipped=f"lar not importable: {exc}")
        return
    corpus = small_corpus(tmp / "corpus", n_docs)
    queries = ["how do cells repair damaged DNA", "vitamin D and bone density in older adults",
               "what reduces the risk of heart disease", "gene expression in tumour cells"]
    eng = lar.open(corpus, state=tmp / "state")
    try:
        t0 = time.perf_counter()
        eng.build(timebox=build_s)
        t_build = time.perf_counter() - t0
        st = eng.status()
        cov = {l.name: round(l.coverage, 3) for l in st.layers}
        eng.search(queries[0], timebox=5, k=10)  # warm: models loaded, arena filled
        lat = []
        for i in range(reps):
            t0 = time.perf_counter()
            res = eng.search(queries[i % len(queries)], timebox=5, k=10)
            lat.append(time.perf_counter() - t0)
        late = eng.status().layer("late") if "late" in cov else None
        rep.add("eng.search", docs=n_docs, build_s=t_build, coverage=cov, reps=reps,
                median_s=float(np.median(lat)), p90_s=float(np.quantile(lat, 0.9)),
                hits=len(res.hits), late_device=getattr(late, "device", None),
                late_resident=getattr(late, "resident", None))
    finally:
        eng.close()


def summary(doc: dict) -> str:
    m = doc["meta"]
    lines = [f"# GPU bench ({'smoke, CPU only' if m['smoke'] else 'full'})", "",
             f"Command: `{m['command']}`", "",
             f"Machine: {m['machine']}; torch {m['torch']}; device {m['device']}", ""]
    lines += ["| step | where | what | tokens | s | tokens/s | of bandwidth | check |",
              "|---|---|---|---:|---:|---:|---:|---|"]
    for r in doc["steps"]:
        what = (r.get("how") or r.get("compute_dtype") or r.get("skipped") or r.get("failed")
                or "")
        if r["step"] == "eng.search" and "docs" in r:
            what = (f"{r['docs']} docs built {r['build_s']:.0f} s (late {r['coverage'].get('late')}"
                    f", dense {r['coverage'].get('dense')}); median of {r['reps']}, p90 "
                    f"{r['p90_s']:.3g} s; late device {r['late_device']}")
        if "dim" in r:
            what = f"{what} d={r['dim']}".strip()
        check = ""
        if "same_top100" in r:
            check = "same top-100" if r["same_top100"] else "TOP-100 DIFFERS"
        if r.get("hit_rate") is not None:
            check += f" hit {r['hit_rate']:.0%}"
        tps = f"{r['tokens_per_s']:.3g}" if "tokens_per_s" in r else ""
        if "bandwidth_GBps" in r:
            tps = f"{r['bandwidth_GBps']:.1f} GB/s"
        of = f"{r['of_bandwidth']:.0%}" if "of_bandwidth" in r else ""
        s = r.get("s", r.get("median_s", ""))
        lines.append(f"| {r['step']} | {r.get('where', '')} | {what} | {r.get('tokens', '')} | "
                     f"{s if s == '' else f'{s:.4g}'} | {tps} | {of} | {check.strip()} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"),
                    help="the folder of the report (default $OUT, else benchmarks/results)")
    ap.add_argument("--name", default=None, help="the report's file name, without suffix "
                    "(default <date>-gpu-bench, or <date>-gpu-bench-cpu-smoke with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, CPU only (seconds)")
    ap.add_argument("--no-engine", action="store_true", help="skip the eng.search step")
    args = ap.parse_args(argv)
    import torch

    cuda = torch.cuda.is_available() and not args.smoke
    dev = torch.device("cuda" if cuda else "cpu")
    threads = torch.get_num_threads()
    if args.smoke:  # a loaded small machine: torch's thread pool spins on contended cores
        torch.set_num_threads(1)
    try:
        return _run(args, torch, dev, cuda)
    finally:
        torch.set_num_threads(threads)


def _run(args, torch, dev, cuda) -> int:
    day = time.strftime("%Y-%m-%d", time.gmtime())
    name = args.name or f"{day}-gpu-bench" + ("-cpu-smoke" if args.smoke else "")
    meta = {"command": "python benchmarks/gpu_bench.py" + (" --smoke" if args.smoke else "")
            + (" --no-engine" if args.no_engine else ""),
            "smoke": args.smoke, "torch": torch.__version__, "device":
            torch.cuda.get_device_name(0) if cuda else "cpu",
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch threads "
                       f"{torch.get_num_threads()}",
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    rep = Report(Path(args.out), name, meta)
    t_start = time.perf_counter()
    host_bw = host_bandwidth((16 if args.smoke else 512) << 20)
    rep.add("bandwidth", where="cpu", bandwidth_GBps=host_bw / 1e9)
    bw = host_bw
    if cuda:
        bw = device_bandwidth(torch, dev, 4 << 30)
        rep.add("bandwidth", where="cuda", bandwidth_GBps=bw / 1e9)
    cpu = torch.device("cpu")
    rep.run("scifact-sized scan", scifact_sized, torch, dev, 20_000 if args.smoke else 1_200_000,
            (128,) if args.smoke else (128, 384), 1 if args.smoke else 2, bw)
    if cuda:
        rep.run("large corpus", big_corpus, torch, dev, 100_000_000, 128, bw, 10_000)
    rep.run("large corpus", big_corpus, torch, cpu, 200_000 if args.smoke else 10_000_000, 128,
            host_bw, 1000 if args.smoke else 10_000)
    if not args.no_engine:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            rep.run("eng.search", engine_search, Path(tmp), 20 if args.smoke else 300,
                    20 if args.smoke else 90, 3 if args.smoke else 10)
    rep.doc["meta"]["total_s"] = round(time.perf_counter() - t_start, 1)
    rep.save()
    rep.md.write_text(summary(rep.doc))
    print(summary(rep.doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
