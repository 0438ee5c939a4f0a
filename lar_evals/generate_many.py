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
    corpora = [(part / "corpus.jsonl").read_bytes() for part in parts]
    merged, part_texts = _merge_corpora(parts, corpora)
    dropped = 0
    for part, texts in zip(parts, part_texts):
        keep: set[str] = set()
        for no, line in enumerate(_read_lines(part / "queries.jsonl"), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                qid = row["_id"]
            except (ValueError, KeyError, TypeError) as exc:
                raise GenerateError(f"{part / 'queries.jsonl'}, line {no}: not a query ({exc})") from None
            if qid in seen:
                raise GenerateError(f"query id {qid!r} is in both {seen[qid]} and {part}")
            seen[qid] = part
            if texts is not None and _term_blanked(row.get("metadata") or {}, merged):
                dropped += 1  # another part blanked this query's term in its answer
                continue
            keep.add(qid)
            queries.append(line)
        for no, line in enumerate(_read_lines(part / "qrels" / f"{split}.tsv"), 1):
            if no == 1 and line.lower().startswith("query-id"):
                continue
            if line.strip() and line.split("\t", 1)[0] in keep:
                qrels.append(line)
    if merged is not None:
        first = "".join(json.dumps({"_id": d, "title": title, "text": t}, ensure_ascii=False) + "\n"
                        for d, (title, t) in merged.items()).encode("utf-8")
    out = Path(out_dir)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    (out / "corpus.jsonl").write_bytes(first)
    (out / "queries.jsonl").write_text("".join(q + "\n" for q in queries), encoding="utf-8")
    (out / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(r + "\n" for r in qrels), encoding="utf-8")
    return {"parts": [str(p) for p in parts], "queries": len(queries), "qrels": len(qrels),
            "dropped_blanked_answers": dropped}


def _docs(data: bytes) -> dict[str, tuple[str, str]]:
    out = {}
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["_id"]] = (row.get("title", ""), row["text"])
    return out


def _merge_corpora(parts: Sequence[Path], corpora: Sequence[bytes]):
    """``(None, [None] * n)`` when every part has the same corpus. Otherwise the parts must differ
    only by blanked text (a paraphrase-pair part blanks its queries' own prose, byte for byte):
    the merged corpus blanks what any part blanked. Returns ``(merged {id: (title, text)},
    [each part's {id: (title, text)}])``; anything else is a :class:`GenerateError`."""
    if all(c == corpora[0] for c in corpora):
        return None, [None] * len(parts)
    docs = [_docs(c) for c in corpora]
    ids = list(docs[0])
    merged: dict[str, tuple[str, str]] = {}
    for part, d in zip(parts, docs):
        if list(d) != ids:
            raise GenerateError(f"{part} has another corpus than {parts[0]}: generate the parts "
                                "from the same folder with the same --max-files/--exclude")
    for i in ids:
        versions = [d[i][1].encode("utf-8") for d in docs]
        if all(v == versions[0] for v in versions):
            merged[i] = (docs[0][i][0], docs[0][i][1])
            continue
        if len({len(v) for v in versions}) != 1:
            raise GenerateError(f"document {i!r} differs between the parts beyond blanked text")
        out = bytearray(versions[0])
        for v in versions[1:]:
            for pos, (a, b) in enumerate(zip(out, v)):
                if a != b:
                    if b == 0x20:
                        out[pos] = 0x20
                    elif a != 0x20:
                        raise GenerateError(f"document {i!r} differs between the parts beyond "
                                            "blanked text")
        merged[i] = (docs[0][i][0], out.decode("utf-8", errors="replace"))
    return merged, docs


def _term_blanked(meta: dict, merged: dict) -> bool:
    """Whether a rare-term or mixed query's term is gone from its answer in the merged corpus
    (a paraphrase query only loses words of its answer: still valid)."""
    from lar_evals.generators.common import contains_word

    ans, term = meta.get("answer") or {}, meta.get("term")
    doc, start, end = ans.get("doc"), ans.get("start"), ans.get("end")
    if not term or doc not in merged or not isinstance(start, int) or not isinstance(end, int):
        return False
    span = merged[doc][1].encode("utf-8")[start:end].decode("utf-8", errors="replace")
    return not contains_word(span, term)


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
              "queries": merged["queries"], "qrels": merged["qrels"],
              "dropped_blanked_answers": merged["dropped_blanked_answers"], "parts": reports}
    (out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n",
                                     encoding="utf-8")
    return report


__all__ = ["generate_many", "merge_sets"]
