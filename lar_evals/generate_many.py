"""Several generated kinds in one test set, so one run scores them side by side.

``generate_many(corpus, ["rare-term", "paraphrase"], n, seed, out)`` runs
:func:`lar_evals.generate.generate` once per kind into ``out/parts/<kind>/`` (same files, same seed)
and merges the parts into ``out``: one ``corpus.jsonl`` (the parts' corpora must be identical,
which they are when the file selection options are the same), the queries of every part (their
ids carry the kind's prefix, ``rare-`` / ``para-``, and their ``metadata.type`` the kind, so the
harness's per-type breakdown separates them), one ``qrels/test.tsv`` and a ``report.json`` whose
``parts`` hold each kind's own report. :func:`merge_sets` merges any BEIR folders that share a
corpus.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

from lar_evals.generate import KINDS, GenerateError, generate


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GenerateError(f"cannot read {path}: {exc}") from exc


def merge_sets(parts: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
               split: str = "test") -> dict[str, Any]:
    """Merge BEIR folders with the same ``corpus.jsonl`` into ``out_dir``; returns counts.
    A differing corpus or a query id present in two parts is a :class:`GenerateError`."""
    parts = [Path(p) for p in parts]
    if not parts:
        raise GenerateError("merge needs at least one test set folder")
    corpus = parts[0] / "corpus.jsonl"
    first = corpus.read_bytes() if corpus.is_file() else None
    if first is None:
        raise GenerateError(f"{corpus} is missing: is {parts[0]} a BEIR folder?")
    queries: list[str] = []
    qrels: list[str] = []
    seen: dict[str, Path] = {}
    for part in parts:
        if (part / "corpus.jsonl").read_bytes() != first:
            raise GenerateError(f"{part} has another corpus than {parts[0]}: generate the parts "
                                "from the same folder with the same --max-files/--exclude")
        for no, line in enumerate(_read_lines(part / "queries.jsonl"), 1):
            if not line.strip():
                continue
            try:
                qid = json.loads(line)["_id"]
            except (ValueError, KeyError, TypeError) as exc:
                raise GenerateError(f"{part / 'queries.jsonl'}, line {no}: not a query ({exc})") from None
            if qid in seen:
                raise GenerateError(f"query id {qid!r} is in both {seen[qid]} and {part}")
            seen[qid] = part
            queries.append(line)
        for no, line in enumerate(_read_lines(part / "qrels" / f"{split}.tsv"), 1):
            if no == 1 and line.lower().startswith("query-id"):
                continue
            if line.strip():
                qrels.append(line)
    out = Path(out_dir)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_bytes(first)
    (out / "queries.jsonl").write_text("".join(q + "\n" for q in queries), encoding="utf-8")
    (out / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(r + "\n" for r in qrels), encoding="utf-8")
    return {"parts": [str(p) for p in parts], "queries": len(queries), "qrels": len(qrels)}


def generate_many(corpus_dir: str | os.PathLike, kinds: Sequence[str], n: int, seed: int,
                  out_dir: str | os.PathLike, **options: Any) -> dict[str, Any]:
    """Generate ``n`` queries of each kind (``options`` as for :func:`generate`) and merge them
    into ``out_dir``. Returns ``{"kind": "a+b", "parts": {kind: report}, "n_written", ...}``."""
    kinds = list(dict.fromkeys(kinds))
    unknown = [k for k in kinds if k not in KINDS]
    if not kinds or unknown:
        raise GenerateError(f"unknown test-set kind(s) {unknown or kinds!r}; choose from "
                            f"{', '.join(KINDS)}")
    out = Path(out_dir)
    if len(kinds) == 1:
        return generate(corpus_dir, kinds[0], n, seed, out, **options)
    reports = {}
    part_dirs = []
    for kind in kinds:
        part = out / "parts" / kind
        if part.exists():
            shutil.rmtree(part)
        reports[kind] = generate(corpus_dir, kind, n, seed, part, **options)
        part_dirs.append(part)
    merged = merge_sets(part_dirs, out)
    report = {"schema": 1, "kind": "+".join(kinds), "seed": seed, "n_requested": n * len(kinds),
              "n_written": sum(r["n_written"] for r in reports.values()),
              "n_rejected": sum(r.get("n_rejected", 0) for r in reports.values()),
              "corpus_files": next(iter(reports.values())).get("corpus_files"),
              "generator": next(iter(reports.values())).get("generator"),
              "queries": merged["queries"], "qrels": merged["qrels"], "parts": reports}
    (out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n",
                                     encoding="utf-8")
    return report


__all__ = ["generate_many", "merge_sets"]
