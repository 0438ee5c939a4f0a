"""Summarise a ``bench_first_hour.py --progress FILE`` log (complete or cut short): per layer the
search and time at which it covered the folder, its coverage at fixed times, its measured build
rate while it was building and, for a layer not yet at 1, the time to coverage 1 extrapolated
at that rate (labelled as such); per cycle of the query list, the mean nDCG@10 and the
latency.

    python benchmarks/first_hour_summary.py PROGRESS.jsonl [--out summary.json --rows-every 10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

CHECKPOINTS_MIN = (1, 2, 5, 10, 20, 30, 45, 60, 75, 90)


def load(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    header = next(x for x in lines if x.get("header"))
    return header, [x for x in lines if not x.get("header")]


def layer_summary(name: str, units: int, rows: list[dict]) -> dict:
    cov = [(r["at_s"], r["coverage"].get(name, 0.0), r["search"]) for r in rows]
    done = next(((t, s) for t, c, s in cov if c >= 1.0), None)
    at = {}
    for m in CHECKPOINTS_MIN:
        before = [c for t, c, _ in cov if t <= 60 * m]
        if before and cov[-1][0] >= 60 * m:
            at[f"{m}min"] = round(before[-1], 4)
    started = next(((t, c) for t, c, _ in cov if c > 0.0), None)
    end_t, end_c, _ = cov[-1]
    rate = None
    if started is not None and units:
        stop_t, stop_c = (done[0], 1.0) if done else (end_t, end_c)
        if stop_t > started[0]:
            rate = (stop_c - started[1]) * units / (stop_t - started[0])
    recent = None  # the rate over the last 10 minutes of the log, while still building
    if not done and units and end_t > 600:
        c0 = [c for t, c, _ in cov if t <= end_t - 600][-1]
        recent = (end_c - c0) * units / 600
    out = {"units": units, "covered_at_search": done[1] if done else None,
           "covered_at_s": done[0] if done else None, "coverage_at": at,
           "final_coverage": end_c, "started_at_s": started[0] if started else None,
           "units_per_s": round(rate, 3) if rate else None,
           "units_per_s_last_10min": round(recent, 3) if recent is not None else None}
    if not done and units:
        out["extrapolated_s_to_1"] = (round(end_t + (1 - end_c) * units / rate, 0)
                                      if rate else None)
    return out


def cycles(rows: list[dict], n: int) -> list[dict]:
    out = []
    for i in range(0, len(rows), n):
        part = rows[i:i + n]
        lat = sorted(r["elapsed_s"] for r in part)
        out.append({"searches": f"{part[0]['search']}-{part[-1]['search']}", "complete": len(part) == n,
                    "from_s": part[0]["at_s"], "to_s": part[-1]["at_s"],
                    "mean_ndcg10": round(statistics.fmean(r["ndcg10"] for r in part), 4),
                    "p50_s": lat[len(lat) // 2], "p90_s": lat[min(len(lat) - 1, int(0.9 * len(lat)))],
                    "load1": round(statistics.fmean(r.get("load", 0.0) for r in part), 1)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("progress")
    ap.add_argument("--queries", type=int, default=40, help="length of the query cycle")
    ap.add_argument("--out", default=None)
    ap.add_argument("--rows-every", type=int, default=0,
                    help="also write every Nth search's row (search, time, nDCG, coverage) to --out")
    a = ap.parse_args(argv)
    header, rows = load(Path(a.progress))
    if not rows:
        print("no searches logged yet")
        return 1
    layers = {n: layer_summary(n, u, rows) for n, u in header["units"].items() if u}
    out = {"docs": header["docs"], "mode": header["mode"], "timebox": header["timebox"],
           "think_s": header["think_s"], "searches": len(rows), "wall_s": rows[-1]["at_s"],
           "layers": layers, "cycles": cycles(rows, a.queries),
           "no_units": sorted(n for n, u in header["units"].items() if not u)}
    print(f"{len(rows)} searches over {rows[-1]['at_s'] / 60:.1f} min, {header['docs']} docs, "
          f"mode {header['mode']}")
    for n, s in layers.items():
        tail = (f"covered at search {s['covered_at_search']} ({s['covered_at_s'] / 60:.1f} min)"
                if s["covered_at_search"] else
                f"{100 * s['final_coverage']:.1f} % at the end; extrapolated to 1 at "
                + (f"{s['extrapolated_s_to_1'] / 60:.0f} min" if s.get("extrapolated_s_to_1") else "? (no rate)"))
        print(f"  {n:<10} {s['units_per_s'] or 0:>9.2f} units/s  {tail}")
    for c in out["cycles"]:
        print(f"  searches {c['searches']:>9}: nDCG@10 {c['mean_ndcg10']:.4f}  p50 {c['p50_s']:.3f} s  "
              f"p90 {c['p90_s']:.3f} s  load {c['load1']}")
    if a.rows_every:
        out["rows"] = [{k: r[k] for k in ("search", "at_s", "elapsed_s", "ndcg10", "coverage",
                                          "top10_signals") if k in r}
                       for r in rows if r["search"] % a.rows_every == 1 or r is rows[-1]]
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
