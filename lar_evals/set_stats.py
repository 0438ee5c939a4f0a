"""What a generated test set holds, per query type: the lexical overlap of the queries with
their answers (token Jaccard, rare-term leak and IDF-mass leak, from ``metadata``) and sample
queries.

``python -m lar_evals.set_stats SET_DIR [--samples 20] [--seed 0]`` prints a Markdown table of
the quantiles per type and, per type, a seeded sample of queries with their answer document.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from lar_evals.generators.verify import distribution

__all__ = ["main", "set_stats"]


def set_stats(folder: str | Path, samples: int = 20, seed: int = 0) -> dict[str, Any]:
    """``{type: {"n", "jaccard", "rare_leak", "idf_leak": distribution, "samples": [...]}}``
    (``idf_leak`` over the queries that carry it: sets generated before it existed have none)."""
    by_type: dict[str, list[dict]] = {}
    for line in (Path(folder) / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            by_type.setdefault((q.get("metadata") or {}).get("type") or "untyped", []).append(q)
    out = {}
    for t, qs in sorted(by_type.items()):
        meta = [q.get("metadata") or {} for q in qs]
        pick = random.Random(seed).sample(qs, min(samples, len(qs)))
        out[t] = {"n": len(qs),
                  "jaccard": distribution([m.get("overlap", 0.0) for m in meta]),
                  "rare_leak": distribution([m.get("leak", 0.0) for m in meta]),
                  "idf_leak": distribution([m["idf_leak"] for m in meta if "idf_leak" in m]),
                  "samples": [{"qid": q["_id"], "text": q["text"],
                               "doc": ((q.get("metadata") or {}).get("answer") or {}).get("doc")}
                              for q in sorted(pick, key=lambda q: q["_id"])]}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lar_evals.set_stats", description=__doc__)
    p.add_argument("folder")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    stats = set_stats(args.folder, args.samples, args.seed)
    print("| type | n | Jaccard min / p25 / median / p75 / max | rare leak median / max "
          "| IDF leak min / p25 / median / p75 / max |")
    print("|---|---|---|---|---|")
    for t, st in stats.items():
        j, r, i = st["jaccard"], st["rare_leak"], st["idf_leak"]
        print(f"| {t} | {st['n']} | {j['min']} / {j['p25']} / {j['median']} / {j['p75']} / {j['max']} "
              f"| {r['median']} / {r['max']} "
              f"| {i['min']} / {i['p25']} / {i['median']} / {i['p75']} / {i['max']} |")
    for t, st in stats.items():
        print(f"\n**{t}** ({len(st['samples'])} of {st['n']}):\n")
        for s in st["samples"]:
            print(f"- `{s['qid']}` {s['text']}  → `{s['doc']}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
