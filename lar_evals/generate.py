"""Generate a test set from a folder of files, in BEIR layout.

``generate(corpus_dir, kind, n, seed, out_dir)`` reads every text file under ``corpus_dir``
(sorted walk; hidden and cache folders, binaries and files over 1 MB skipped) and writes:

* ``corpus.jsonl``: one document per file, ``{"_id": relative path, "title": "", "text"}``
  (UTF-8, undecodable bytes replaced);
* ``queries.jsonl``: ``{"_id", "text", "metadata": {"type", "answer": {"doc", "start", "end"},
  "source", "overlap", "leak", ...}}``; ``start``/``end`` are byte offsets into the UTF-8
  encoding of the document's ``text`` (the file's own bytes when it is valid UTF-8),
  ``overlap`` is the query's token Jaccard with the answer span, ``leak`` the fraction of
  the span's rare tokens the query holds and ``idf_leak`` the share of the query's IDF mass
  the span holds (``generators.verify``);
* ``qrels/test.tsv``: ``query-id\\tcorpus-id\\tscore``;
* ``report.json``: the verification report, also returned.

Kinds: ``rare-term`` (``generators.rare_term``), ``mixed`` (``generators.mixed``: a rare name
plus its docstring's intent), ``paraphrase`` (``generators.pairs``: human-written prose against
what it describes, the prose blanked in the written corpus; one pair kind alone by its name) and
``word-swap`` (``generators.paraphrase``: neighbour substitutions, a noisy kind).
A ``generator(target_text, kind, rng) -> str | None`` callable (an LLM, say) replaces the
built-in query writing; its queries pass the same verification (``generators.verify``).
Everything is deterministic for a seed: the same inputs give byte-identical files.
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Callable, Iterable, Optional

from lar_evals.generators import mixed, pairs, paraphrase, rare_term
from lar_evals.generators.common import Doc, GenerateError, Target, blank
from lar_evals.generators.verify import (HIST_BINS, MAX_IDF_LEAK, MAX_PARAPHRASE_JACCARD, RARE_DF,
                                         CorpusStats, distribution, overlap, rejection)

__all__ = ["GenerateError", "KINDS", "MAX_FILE_BYTES", "generate", "load_generator",
           "read_corpus"]

# paraphrase: every pair kind in turns (each query typed by its pair kind); word-swap: the
# old neighbour-substitution paraphraser, a noisy vocabulary-mismatch set
KINDS = ("rare-term", "mixed", "paraphrase", *pairs.PAIR_KINDS, "word-swap")
TERM_KINDS = ("rare-term", "mixed")
MAX_FILE_BYTES = 1 << 20
# paraphrases use the corpus's own words when it shares this many with the static model
MIN_CORPUS_VOCABULARY = 2000
SKIP_DIRS = frozenset({"__pycache__", "node_modules", ".git", ".hg", ".svn", ".lar", ".venv",
                       "venv", ".tox", ".mypy_cache", ".pytest_cache", ".ipynb_checkpoints"})
BINARY_SUFFIXES = frozenset(
    ".pdf .png .jpg .jpeg .gif .bmp .ico .webp .tif .tiff .zip .gz .tgz .bz2 .xz .zst .7z .tar "
    ".jar .whl .egg .pyc .pyo .so .dll .dylib .exe .o .a .bin .dat .db .sqlite .npy .npz .pt "
    ".pkl .pickle .safetensors .onnx .woff .woff2 .ttf .otf .mp3 .mp4 .wav .ogg .avi .mov".split())
Generator = Callable[[str, str, random.Random], Optional[str]]
_ID_PREFIX = {"rare-term": "rare", "mixed": "mixed", "paraphrase": "para", "doc2code": "d2c",
              "heading2section": "h2s", "caption2text": "c2t", "ref2env": "r2e",
              "readme2code": "rd2c", "cell2code": "nb2c",
              "word-swap": "swap"}


def _excluder(patterns: Iterable[str]):
    """A predicate on relative POSIX paths (folders end with ``/``) from gitignore-style
    ``patterns``, or None when there are none."""
    patterns = [p for p in patterns if p and p.strip()]
    if not patterns:
        return None
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(patterns)
    return spec.match_file


def read_corpus(corpus_dir: str | os.PathLike, *, max_files: int | None = None,
                exclude: Iterable[str] = ()) -> tuple[list[Doc], dict[str, int]]:
    """The text files under ``corpus_dir`` as ``Doc``s in path order, and how many files were
    skipped for which reason (``hidden``, ``excluded``, ``symlink``, ``bad-name``,
    ``too-large``, ``binary``, ``unreadable``, ``max-files``). ``max_files`` keeps that many
    files spread evenly over the sorted list (independent of the seed); ``exclude`` holds
    gitignore-style patterns."""
    root = Path(corpus_dir)
    if not root.is_dir():
        raise GenerateError(f"corpus folder {str(root)!r} does not exist or is not a folder")
    if max_files is not None and (not isinstance(max_files, int) or max_files < 1):
        raise GenerateError(f"max_files must be a positive integer, got {max_files!r}")
    excluded = _excluder(exclude)
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    paths: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            if d.startswith(".") or d in SKIP_DIRS:
                continue
            if excluded is not None and excluded(f"{rel_dir}{d}/"):
                skip("excluded")
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel, path = rel_dir + name, Path(dirpath) / name
            if name.startswith("."):
                skip("hidden")
            elif any(c in rel for c in "\t\n\r"):
                skip("bad-name")  # would break the qrels TSV
            elif excluded is not None and excluded(rel):
                skip("excluded")
            elif path.is_symlink():
                skip("symlink")
            else:
                paths.append((rel, path))
    paths.sort()
    docs: list[Doc] = []
    for rel, path in paths:
        if path.suffix.lower() in BINARY_SUFFIXES:
            skip("binary")
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                skip("too-large")
                continue
            data = path.read_bytes()
        except OSError:
            skip("unreadable")
            continue
        if b"\x00" in data[:8192]:
            skip("binary")
            continue
        text = data.decode("utf-8", errors="replace")
        if text.count("\ufffd") * 10 > max(len(text), 1):
            skip("binary")
            continue
        docs.append(Doc(rel, text))
    if max_files is not None and len(docs) > max_files:
        skipped["max-files"] = len(docs) - max_files
        docs = [docs[i * len(docs) // max_files] for i in range(max_files)]
    return docs, dict(sorted(skipped.items()))


def load_generator(spec: str) -> Generator:
    """Import ``module:function`` (e.g. ``mypkg.llm:ask``) as a query generator."""
    import importlib

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise GenerateError(f"--generator must look like module:function, got {spec!r}")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise GenerateError(f"cannot import generator {spec!r}: {exc}") from exc
    if not callable(obj):
        raise GenerateError(f"generator {spec!r} is not callable")
    return obj


def _name_of(generator: Generator | None) -> str:
    if generator is None:
        return "built-in"
    name = getattr(generator, "__qualname__", type(generator).__name__)
    return f"{getattr(generator, '__module__', '?')}:{name}"


_NEIGHBOURS: dict[str, object] = {}


def _neighbours():
    """The word-neighbour finder over the default static model (loaded once per process)."""
    from lar.encoders.static import get_static_encoder

    from lar_evals.generators.neighbours import Neighbours

    enc = get_static_encoder()
    key = str(enc.path)
    if key not in _NEIGHBOURS:
        _NEIGHBOURS[key] = Neighbours(enc)
    return _NEIGHBOURS[key]


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def generate(corpus_dir: str | os.PathLike, kind: str, n: int, seed: int,
             out_dir: str | os.PathLike, *, generator: Generator | None = None,
             max_files: int | None = None, exclude: Iterable[str] = (),
             max_idf_leak: float = MAX_IDF_LEAK) -> dict:
    """Generate up to ``n`` verified queries of ``kind`` from ``corpus_dir`` into ``out_dir``
    (BEIR layout) and return the verification report (also written as ``report.json``).
    ``max_idf_leak`` (in [0, 1]; 1 turns the check off) caps a paraphrase query's IDF-mass
    share in its answer."""
    if kind not in KINDS:
        raise GenerateError(f"unknown test-set kind {kind!r}; choose one of {', '.join(KINDS)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise GenerateError(f"n must be a positive integer, got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise GenerateError(f"seed must be an integer, got {seed!r}")
    if isinstance(max_idf_leak, bool) or not isinstance(max_idf_leak, (int, float)) or not (
            0.0 <= max_idf_leak <= 1.0):
        raise GenerateError(f"max_idf_leak must be a number in [0, 1], got {max_idf_leak!r}")
    if generator is not None and not callable(generator):
        raise GenerateError(f"generator must be callable, got {type(generator).__name__}")
    exclude = [str(p) for p in exclude]
    docs, skipped = read_corpus(corpus_dir, max_files=max_files, exclude=exclude)
    if not docs:
        raise GenerateError(f"no text files found under {str(corpus_dir)!r}")
    rng = random.Random(seed)
    stats = CorpusStats(docs)
    defined_in: dict = {}
    if kind == "rare-term":
        targets, defined_in = rare_term.ordered_targets(docs, stats, n, rng)
    elif kind == "mixed":
        targets = mixed.ordered_targets(docs, stats, rng)
        defined_in = rare_term.definition_targets(docs, stats)[1]
    elif kind == "word-swap":
        targets = paraphrase.ordered_targets(docs, rng)
    else:
        targets = pairs.ordered_targets(docs, rng, pairs.PAIR_KINDS if kind == "paraphrase" else (kind,))
    neighbours = None
    if kind == "word-swap" and generator is None and targets:
        neighbours = _neighbours().restrict(stats.word_df.keys())
        if neighbours.size < MIN_CORPUS_VOCABULARY:  # a small corpus: the model's words
            neighbours = neighbours.restrict(None)
    copies: dict[str, list[str]] = {}
    for d in docs:
        copies.setdefault(d.text, []).append(d.id)

    queries, qrels, rejected = [], [], {}
    written_ov, produced_ov, sources = [], [], {}
    by_type_ov: dict[str, list[dict]] = {}
    blanked: dict[str, list[tuple[int, int]]] = {}  # doc id -> character ranges to blank
    answers: dict[str, list[tuple[int, int]]] = {}  # doc id -> written answer spans
    seen: set[str] = set()
    tried = 0
    for target in targets:
        if len(queries) >= n:
            break
        tried += 1
        query = _make_query(kind, target, stats, neighbours, rng, generator)
        reason = None
        if query is None:
            reason = "no-query"
        else:
            ov = overlap(query, target.text, stats)
            produced_ov.append(ov)
            reason = rejection(kind, query, ov, target.term, max_idf_leak)
            if reason is None and query.lower() in seen:
                reason = "duplicate"
            if reason is None and _conflicts(target, answers, blanked, copies):
                reason = "blank-conflict"  # it would blank another query's answer, or the reverse
        if reason is not None:
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        seen.add(query.lower())
        written_ov.append(ov)
        by_type_ov.setdefault(target.kind, []).append(ov)
        sources[target.kind] = sources.get(target.kind, 0) + 1
        qid = f"{_ID_PREFIX[kind]}-{len(queries) + 1:05d}"
        queries.append(_query_row(qid, target.kind if kind == "paraphrase" else kind, query,
                                  target, ov))
        for d, ranges in pairs.redactions(target):
            for copy in copies[d.text]:
                blanked.setdefault(copy, []).extend(ranges)
        for copy in copies[target.doc.text]:
            answers.setdefault(copy, []).append((target.start, target.end))
        if kind in TERM_KINDS:
            rel = rare_term.qrels(target, stats, defined_in)
        else:
            rel = {d: 1 for d in sorted(copies[target.doc.text])}
        qrels.extend((qid, d, s) for d, s in rel.items())

    report = {
        "schema": 2, "kind": kind, "seed": seed, "n_requested": n, "n_written": len(queries),
        "corpus": str(Path(corpus_dir).resolve()), "corpus_files": len(docs),
        "skipped_files": skipped, "max_files": max_files, "exclude": list(exclude),
        "generator": _name_of(generator), "candidates": len(targets), "tried": tried,
        "rejected": dict(sorted(rejected.items())), "n_rejected": sum(rejected.values()),
        "sources": dict(sorted(sources.items())),
        "redacted": {"docs": len(blanked), "ranges": sum(len(v) for v in blanked.values()),
                     "chars": sum(b - a for v in blanked.values() for a, b in _union(v))},
        "overlap": _distributions(written_ov),
        "overlap_by_source": {t: _distributions(v) for t, v in sorted(by_type_ov.items())},
        "overlap_generated": _distributions(produced_ov),
        "thresholds": {"rare_df": RARE_DF, "max_paraphrase_jaccard": MAX_PARAPHRASE_JACCARD,
                       "max_idf_leak": max_idf_leak, "histogram_bins": HIST_BINS,
                       "max_file_bytes": MAX_FILE_BYTES},
        "files": {"corpus": "corpus.jsonl", "queries": "queries.jsonl",
                  "qrels": "qrels/test.tsv", "report": "report.json"},
    }
    if blanked:
        docs = [Doc(d.id, _blanked(d.text, blanked[d.id])) if d.id in blanked else d for d in docs]
    _write(Path(out_dir), docs, queries, qrels, report)
    return report


def _distributions(ovs: list[dict]) -> dict:
    return {m: distribution([o[m] for o in ovs]) for m in ("jaccard", "rare_leak", "idf_leak")}


def _conflicts(target: Target, answers: dict, blanked: dict, copies: dict) -> bool:
    """Whether ``target``'s blanking would cut into a written query's answer, or its answer
    holds text a written query blanks (one query's answer is never another's hidden prose)."""
    def hit(a: int, b: int, spans) -> bool:
        return any(a < y and x < b for x, y in spans)

    for d, ranges in pairs.redactions(target):
        for copy in copies[d.text]:
            if any(hit(a, b, answers.get(copy, ())) for a, b in ranges):
                return True
    return any(hit(target.start, target.end, blanked.get(copy, ()))
               for copy in copies[target.doc.text])


def _union(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        elif a < b:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _blanked(text: str, ranges: Iterable[tuple[int, int]]) -> str:
    """``text`` with ``ranges`` (characters) blanked (:func:`generators.common.blank`)."""
    parts, pos = [], 0
    for a, b in _union(ranges):
        parts += [text[pos:a], blank(text[a:b])]
        pos = b
    return "".join(parts) + text[pos:]


def _make_query(kind: str, target: Target, stats: CorpusStats, neighbours, rng: random.Random,
                generator: Generator | None) -> str | None:
    """The query text for ``target`` (whitespace collapsed), or None."""
    if generator is not None:
        try:
            out = generator(target.text, kind, rng)
        except Exception as exc:  # a user's callable: name it and the target
            raise GenerateError(f"generator {_name_of(generator)} failed on {target.doc.id} "
                                f"[{target.start}:{target.end}]: {type(exc).__name__}: {exc}"
                                ) from exc
        if out is not None and not isinstance(out, str):
            raise GenerateError(f"generator {_name_of(generator)} returned "
                                f"{type(out).__name__}; it must return a string or None")
    elif kind == "rare-term":
        out = rare_term.build_query(target, stats, rng)
    elif kind == "mixed":
        out = mixed.build_query(target)
    elif kind == "word-swap":
        out = paraphrase.build_query(target, stats, neighbours, rng)
    else:  # a pair kind: the human-written prose itself
        out = target.source_text
    if out is None:
        return None
    out = " ".join(out.split())
    return out or None


def _query_row(qid: str, kind: str, query: str, target: Target, ov: dict) -> dict:
    doc = target.doc
    start, end = doc.byte_offset(target.start), doc.byte_offset(target.end)
    meta = {"type": kind, "answer": {"doc": doc.id, "start": start, "end": end},
            "source": target.source(), "overlap": round(ov["jaccard"], 4),
            "leak": round(ov["rare_leak"], 4), "idf_leak": round(ov["idf_leak"], 4)}
    if target.term:
        meta["term"] = target.term
    return {"_id": qid, "text": query, "metadata": meta}


def _write(out: Path, docs: list[Doc], queries: list[dict], qrels: list[tuple], report: dict
           ) -> None:
    try:
        (out / "qrels").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GenerateError(f"cannot create the output folder {str(out)!r}: {exc}") from exc
    _write_jsonl(out / "corpus.jsonl", ({"_id": d.id, "title": "", "text": d.text} for d in docs))
    _write_jsonl(out / "queries.jsonl", queries)
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8", newline="\n") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, doc_id, score in qrels:
            fh.write(f"{qid}\t{doc_id}\t{score}\n")
    (out / "report.json").write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n",
                                     encoding="utf-8")
