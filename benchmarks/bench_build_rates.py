"""Build rate of each model layer (units per second, model already loaded) on a BEIR sample,
and the hours a 5,000-document folder would take at that rate: whether a layer can be a default
("a default layer finishes building a 5k-document corpus within an hour of use").

    python benchmarks/bench_build_rates.py --docs 500 --seconds 60 --layers dense,dense-e5
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

SRC = Path("/work/shared/benchmarks/scifact-train")  # the judged split (read, never copied)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=str(SRC))
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=60.0, help="build slice per layer")
    ap.add_argument("--layers", default="dense,dense-e5")
    ap.add_argument("--target", type=int, default=5000, help="documents to extrapolate to")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import lar

    work = Path(tempfile.mkdtemp(prefix="lar-rates-"))
    root = work / "corpus"
    root.mkdir()
    lines = (Path(a.src) / "corpus.jsonl").read_text("utf-8").splitlines()[: a.docs]
    sizes = []
    for line in lines:
        d = json.loads(line)
        text = f"{d.get('title', '')}\n\n{d.get('text', '')}\n"
        sizes.append(len(text.encode()))
        (root / f"{d['_id']}.txt").write_text(text, "utf-8")
    out = {"docs": len(lines), "mean_doc_bytes": round(sum(sizes) / len(sizes)), "seconds": a.seconds,
           "cpus": os.cpu_count(), "layers": {}}
    with lar.open(root, state=work / "state", spare_build=False) as eng:
        for name in a.layers.split(","):
            t0 = time.monotonic()
            eng.warm([name])
            load_s = time.monotonic() - t0
            load0 = os.getloadavg()[0]
            rep = eng.build(timebox=a.seconds, layers=[name])["layers"][name]
            built = rep["ok"] + rep["skipped"] + rep["failed"]
            elapsed = min(a.seconds, time.monotonic() - t0 - load_s)
            rate = built / elapsed if elapsed > 0 else 0.0
            hours = (a.target / rate / 3600) if rate else None
            out["layers"][name] = {"load_s": round(load_s, 1), "built": built, "elapsed_s": round(elapsed, 1),
                                   "units_per_s": round(rate, 2),
                                   f"hours_for_{a.target}": None if hours is None else round(hours, 2),
                                   "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)]}
            print(name, out["layers"][name], flush=True)
    print(json.dumps(out, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
