"""Write a BEIR folder with at most N queries of each query type (``metadata.type``).

The per-kind runs of ``2026-12-03-harness-3`` and ``2026-12-04-harness-4`` cut a generated set
to a stratified seeded sample: a fresh ``random.Random(seed).sample`` of each type's queries
(in file order), the corpus unchanged, the qrels of the kept queries only.

    python benchmarks/kind_subset.py sets/std60 sets/std60-40 40
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("n", type=int, help="queries of each type to keep at most")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    src, dst = Path(a.src), Path(a.dst)
    lines = [ln for ln in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines() if ln]
    by_type: dict[str, list[str]] = {}
    for line in lines:
        q = json.loads(line)
        by_type.setdefault((q.get("metadata") or {}).get("type", ""), []).append(q["_id"])
    keep: set[str] = set()
    for ids in by_type.values():
        keep.update(ids if len(ids) <= a.n else random.Random(a.seed).sample(ids, a.n))
    (dst / "qrels").mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "corpus.jsonl", dst / "corpus.jsonl")
    (dst / "queries.jsonl").write_text(
        "".join(ln + "\n" for ln in lines if json.loads(ln)["_id"] in keep), "utf-8")
    for f in (src / "qrels").glob("*.tsv"):
        rows = f.read_text(encoding="utf-8").splitlines()
        out = [r for r in rows if r.startswith("query-id") or r.split("\t")[0] in keep]
        (dst / "qrels" / f.name).write_text("\n".join(out) + "\n", "utf-8")
    print(f"{dst}: {len(keep)} queries of {len(lines)} "
          f"({', '.join(f'{k} {min(len(v), a.n)}' for k, v in sorted(by_type.items()))})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
