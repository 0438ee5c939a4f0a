"""Add an emulated ``dense-e5`` route to a ``beir`` run's recorded route lists, from the e5
encodings ``study_fusion_ceiling.py --e5`` cached (whole documents, outside the engine).

    python benchmarks/add_e5_lists.py ../shared/benchmarks/scifact-train RUNS_DIR OUT_RUNS_DIR \
        --work /tmp/lar-ceiling

For every query of ``RUNS_DIR/route-lists.jsonl.gz`` it adds the 100 best documents by e5 cosine
and the background of all documents' cosines (``lar.core.background``'s ``{"n", "mean", "std"}``),
as the engine's ``dense-e5`` layer records them, and writes ``OUT_RUNS_DIR/route-lists.jsonl.gz``
for ``python -m lar_evals fit``. It stands in for the engine's own e5 lists where building them
takes too long (SciFact's 5,183 abstracts: under 1 unit/s on 2 shared cores, 24 min on 2 idle
ones); the engine scores chunks, this whole documents, so figures from it are labelled as
emulated. The packaged model no longer uses it (``2026-11-30-fusion-fit-engine.md``).
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("runs")
    ap.add_argument("out")
    ap.add_argument("--work", default="/tmp/lar-ceiling")
    ap.add_argument("--k", type=int, default=100)
    a = ap.parse_args()
    enc = np.load(Path(a.work) / f"{Path(a.bench).name}-e5.npz", allow_pickle=False)
    qpos = {str(q): i for i, q in enumerate(enc["qids"])}
    dids = [str(d) for d in enc["dids"]]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(Path(a.runs) / "route-lists.jsonl.gz", "rt", encoding="utf-8") as src, \
            gzip.open(out / "route-lists.jsonl.gz", "wt", encoding="utf-8") as dst:
        for line in src:
            row = json.loads(line)
            i = qpos.get(row["qid"])
            if i is not None:
                s = (enc["D"] @ enc["Q"][i]).astype(np.float64)
                top = np.argsort(-s, kind="stable")[:a.k]
                row["routes"]["dense-e5"] = [[dids[j], round(float(s[j]), 6)] for j in top]
                row.setdefault("backgrounds", {})["dense-e5"] = {
                    "n": int(s.shape[0]), "mean": float(s.mean()), "std": float(s.std())}
                n += 1
            dst.write(json.dumps(row) + "\n")
    print(f"added dense-e5 to {n} queries: {out / 'route-lists.jsonl.gz'}")


if __name__ == "__main__":
    main()
