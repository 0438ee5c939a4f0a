"""Write a smaller BEIR folder: every judged document plus a seeded random sample of the others.

Used when a full corpus cannot be built in the time at hand (``bench_sparse.py``'s results say
so when a subset was used). The subset keeps all queries and all judgments, so each query's
relevant documents are all there; only distractors are dropped (an easier, not a different,
task: compare layers on the same subset, never a subset's figure with a full corpus's).

    python benchmarks/beir_subset.py ../shared/benchmarks/scifact-train /tmp/scifact-2k --docs 2000
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--docs", type=int, required=True, help="documents to keep in all")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    src, dst = Path(a.src), Path(a.dst)
    judged: set[str] = set()
    for f in (src / "qrels").glob("*.tsv"):
        for line in f.read_text(encoding="utf-8").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[0] != "query-id":
                judged.add(parts[1])
    lines = (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["_id"] for line in lines]
    others = sorted(set(ids) - judged)
    keep = judged | set(random.Random(a.seed).sample(others, max(0, min(len(others), a.docs - len(judged)))))
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "corpus.jsonl").write_text("\n".join(l for l, i in zip(lines, ids) if i in keep) + "\n", "utf-8")
    shutil.copy(src / "queries.jsonl", dst / "queries.jsonl")
    shutil.copytree(src / "qrels", dst / "qrels", dirs_exist_ok=True)
    (dst / "SUBSET.json").write_text(json.dumps({"source": str(src), "docs": len(keep), "judged": len(judged),
                                                 "seed": a.seed}, indent=1))
    print(f"{dst}: {len(keep)} of {len(ids)} documents ({len(judged)} judged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
