"""BEIR-layout data: load it with an accounting of what cannot be scored, and write it as files.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title"?, "text"}`` per line), ``queries.jsonl``
(``{"_id", "text", "metadata"?: {...}}``, optionally a top-level ``"type"``) and
``qrels/<split>.tsv`` (``query-id <TAB> corpus-id <TAB> score``; the header line is optional).

:func:`load_beir` never drops anything silently: a malformed line raises
:class:`~lar_evals.errors.EvalDataError` naming the file and its 1-based line number, and judgments
that cannot be scored (their document is not in the corpus, their query is not in the queries
file, their score is not positive) are counted in :attr:`BeirData.report` and left out of
:attr:`BeirData.qrels`, the judgments the harness scores.

:func:`materialise` writes one file per document (``title\\n\\ntext``) under a cache folder keyed
by a hash of the corpus, so that lar can index it like any folder; the folder is reused when a
marker file (written last) says it is complete.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from lar_evals.errors import EvalConfigError, EvalDataError

LAYOUT_VERSION = 1
MARKER = "COMPLETE.json"
SAMPLE_FOR_EXT = 200
_EXT_RE = re.compile(r"^\.[A-Za-z0-9]{1,10}$")
_EXAMPLES = 5


@dataclass(frozen=True)
class BeirData:
    """A loaded BEIR split.

    ``corpus``: ``{doc_id: {"title", "text"}}`` in file order. ``queries``: ``{query_id: {"text",
    "type"?, "meta"}}`` in file order, every query of the file (``type`` only when the query
    carries one; ``meta`` holds ``metadata`` and any other extra field, e.g. answer spans).
    ``qrels``: the judgments that are scored, ``{query_id: {doc_id: score > 0}}``.
    ``report``: counts of what was read and of what is left out of scoring (see :func:`load_beir`).
    """

    corpus: dict[str, dict[str, str]]
    queries: dict[str, dict[str, Any]]
    qrels: dict[str, dict[str, int]]
    report: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    split: str = ""
    corpus_hash: str = ""

    def scored_queries(self) -> list[str]:
        """Ids of the queries that have at least one scored judgment, in queries-file order."""
        return [q for q in self.queries if self.qrels.get(q)]

    def query_type(self, qid: str) -> str | None:
        t = self.queries.get(qid, {}).get("type")
        return t if isinstance(t, str) and t else None


# -- reading ----------------------------------------------------------------------------------
def _lines(path: Path, digest=None) -> Iterator[tuple[int, str]]:
    """(1-based line number, decoded line) of a UTF-8 file, blank lines skipped."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise EvalDataError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    with fh:
        for no, raw in enumerate(fh, 1):
            if digest is not None:
                digest.update(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EvalDataError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})",
                                    path=str(path), line=no) from None
            if line.strip():
                yield no, line


def _json_object(path: Path, no: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EvalDataError(f"malformed JSON: {exc.msg} (column {exc.colno})",
                            path=str(path), line=no) from None
    if not isinstance(obj, dict):
        raise EvalDataError(f"expected a JSON object, got {type(obj).__name__}", path=str(path), line=no)
    return obj


def _id(obj: Mapping[str, Any], path: Path, no: int) -> str:
    raw = obj.get("_id")
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or str(raw) == "":
        raise EvalDataError('missing or invalid "_id" (a non-empty string or integer)',
                            path=str(path), line=no)
    return str(raw)


def _text(obj: Mapping[str, Any], key: str, path: Path, no: int, required: bool) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        what = "missing" if value is None else f"not a string ({type(value).__name__})"
        raise EvalDataError(f'field "{key}" is {what}', path=str(path), line=no)
    return value


def read_corpus(path: Path, report: dict[str, Any]) -> tuple[dict[str, dict[str, str]], str]:
    """The corpus and the blake2b hash of the file's bytes."""
    digest = hashlib.blake2b(digest_size=16)
    corpus: dict[str, dict[str, str]] = {}
    dup = 0
    for no, line in _lines(path, digest):
        obj = _json_object(path, no, line)
        did = _id(obj, path, no)
        doc = {"title": _text(obj, "title", path, no, False), "text": _text(obj, "text", path, no, True)}
        if did in corpus:
            dup += 1  # the first copy is kept
            continue
        corpus[did] = doc
    report["corpus_docs"] = len(corpus)
    report["corpus_duplicate_ids"] = dup
    return corpus, digest.hexdigest()


def read_queries(path: Path, report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    queries: dict[str, dict[str, Any]] = {}
    dup = 0
    for no, line in _lines(path):
        obj = _json_object(path, no, line)
        qid = _id(obj, path, no)
        text = _text(obj, "text", path, no, True)
        meta = obj.get("metadata") or {}
        if not isinstance(meta, dict):
            raise EvalDataError('field "metadata" must be a JSON object', path=str(path), line=no)
        meta = dict(meta)
        meta.update({k: v for k, v in obj.items() if k not in ("_id", "text", "metadata", "type")})
        qtype = obj.get("type", meta.get("type"))
        if qtype is not None and not isinstance(qtype, str):
            raise EvalDataError('field "type" must be a string', path=str(path), line=no)
        if qid in queries:
            dup += 1
            continue
        entry: dict[str, Any] = {"text": text, "meta": meta}
        if qtype:
            entry["type"] = qtype
        queries[qid] = entry
    report["queries"] = len(queries)
    report["queries_duplicate_ids"] = dup
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Every judgment of the file (any score), ``{query_id: {doc_id: score}}``."""
    qrels: dict[str, dict[str, int]] = {}
    for no, line in _lines(path):
        line = line.rstrip("\r\n")
        fields = line.split("\t")
        if len(fields) == 1:
            fields = line.split()
        if len(fields) != 3:
            raise EvalDataError(f"expected 3 fields (query-id, corpus-id, score), got {len(fields)}",
                                path=str(path), line=no)
        qid, did, score = (f.strip() for f in fields)
        try:
            value = int(score)
        except ValueError:
            if no == 1 and not qrels:  # a header line: query-id corpus-id score
                continue
            raise EvalDataError(f"score {score!r} is not an integer", path=str(path), line=no) from None
        if not qid or not did:
            raise EvalDataError("empty query-id or corpus-id", path=str(path), line=no)
        qrels.setdefault(qid, {})[did] = value
    return qrels


def load_beir(directory: str | os.PathLike, split: str) -> BeirData:
    """Read a BEIR folder's corpus, queries and ``qrels/<split>.tsv``.

    ``report`` counts: ``corpus_docs``, ``corpus_duplicate_ids``, ``queries``,
    ``queries_duplicate_ids``, ``qrels_pairs`` (judgments read), ``qrels_nonpositive`` (score <= 0:
    judged not relevant, not scored), ``qrels_docs_missing_from_corpus`` (positive judgments whose
    document is not in the corpus), ``qrels_queries_missing`` (judged query ids absent from the
    queries file; their judgments are not scored), ``queries_without_qrels`` (queries with no
    scored judgment, e.g. those of other splits) and ``queries_scored``; ``examples`` lists a few
    of the missing ids.
    """
    d = Path(directory).expanduser()
    if not d.is_dir():
        raise EvalDataError("not a folder; give the BEIR dataset folder (corpus.jsonl, "
                            "queries.jsonl, qrels/)", path=str(d))
    if not isinstance(split, str) or not split or "/" in split:
        raise EvalConfigError(f"split must be a name such as 'test', got {split!r}")
    qrels_path = d / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (d / "qrels").glob("*.tsv")) if (d / "qrels").is_dir() else []
        raise EvalDataError(f"no qrels for split {split!r}; available splits: "
                            f"{', '.join(have) or '(none)'}", path=str(qrels_path))
    report: dict[str, Any] = {}
    corpus, corpus_hash = read_corpus(d / "corpus.jsonl", report)
    queries = read_queries(d / "queries.jsonl", report)
    raw = read_qrels(qrels_path)
    qrels, missing_docs, missing_queries = {}, [], []
    pairs = nonpositive = 0
    for qid, judged in raw.items():
        pairs += len(judged)
        if qid not in queries:
            missing_queries.append(qid)
            continue
        keep = {}
        for did, score in judged.items():
            if score <= 0:
                nonpositive += 1
            elif did not in corpus:
                missing_docs.append([qid, did])
            else:
                keep[did] = score
        if keep:
            qrels[qid] = keep
    report.update({
        "qrels_pairs": pairs,
        "qrels_nonpositive": nonpositive,
        "qrels_docs_missing_from_corpus": len(missing_docs),
        "qrels_queries_missing": len(missing_queries),
        "queries_without_qrels": sum(1 for q in queries if q not in qrels),
        "queries_scored": len(qrels),
        "examples": {"docs_missing_from_corpus": missing_docs[:_EXAMPLES],
                     "queries_missing": missing_queries[:_EXAMPLES]},
    })
    return BeirData(corpus=corpus, queries=queries, qrels=qrels, report=report, name=d.name,
                    split=split, corpus_hash=corpus_hash)


# -- writing the corpus as files --------------------------------------------------------------
def looks_like_python(text: str) -> bool:
    """True when ``text`` parses as Python and is more than a bare name or constant."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    trivial = (ast.Name, ast.Constant, ast.Attribute)
    return any(not (isinstance(s, ast.Expr) and isinstance(s.value, trivial)) for s in tree.body)


def guess_ext(data: BeirData, sample: int = SAMPLE_FOR_EXT) -> str:
    """``".py"`` when most of an evenly spread sample of documents parse as Python, else ``".txt"``."""
    docs = list(data.corpus.values())
    if not docs:
        return ".txt"
    step = max(1, len(docs) // sample)
    picked = docs[::step][:sample]
    parsed = sum(1 for doc in picked if looks_like_python(doc["text"]))
    return ".py" if parsed * 2 > len(picked) else ".txt"


def doc_paths(data: BeirData, ext: str) -> dict[str, str]:
    """``{relative path: doc id}``: documents in corpus order, 10,000 to a subfolder."""
    return {f"{i // 10000:03d}/d{i:07d}{ext}": did for i, did in enumerate(data.corpus)}


def corpus_fingerprint(data: BeirData) -> str:
    """The corpus file's hash, or a hash of the corpus itself for data built in memory."""
    if data.corpus_hash:
        return data.corpus_hash
    blob = json.dumps(data.corpus, sort_keys=False, ensure_ascii=False).encode("utf-8")
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def default_cache_root() -> Path:
    from lar.encoders.models import lar_cache_dir

    return lar_cache_dir() / "evals"


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def materialise(data: BeirData, cache_root: str | os.PathLike | None = None,
                ext: str = "auto") -> tuple[Path, dict[str, str]]:
    """Write one file per document and return ``(root, {relative path: doc id})``.

    The folder is ``<cache_root>/<name>-<corpus hash>-<ext>/corpus`` (``cache_root`` defaults to
    ``lar_cache_dir() / "evals"``); each file holds ``title\\n\\ntext``. ``ext="auto"`` picks
    ``".py"`` when most of 200 sampled documents parse as Python, else ``".txt"``. An existing
    folder is reused when its marker file (written last) says it is complete.
    """
    if ext == "auto":
        ext = guess_ext(data)
    if not isinstance(ext, str) or not _EXT_RE.match(ext):
        raise EvalConfigError(f"ext must be 'auto' or an extension such as '.txt', got {ext!r}")
    base = Path(cache_root).expanduser() if cache_root is not None else default_cache_root()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", data.name or "corpus")[:60]
    folder = base / f"{name}-{corpus_fingerprint(data)[:16]}-{ext[1:]}"
    root = folder / "corpus"
    paths = doc_paths(data, ext)
    marker = folder / MARKER
    try:
        done = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        done = None
    expected = {"layout": LAYOUT_VERSION, "docs": len(paths), "ext": ext}
    if isinstance(done, dict) and all(done.get(k) == v for k, v in expected.items()) and root.is_dir():
        return root, paths
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"corpus.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    for rel, did in paths.items():
        doc = data.corpus[did]
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{doc['title']}\n\n{doc['text']}", encoding="utf-8", errors="replace")
    marker.unlink(missing_ok=True)
    if root.exists():
        shutil.rmtree(root)  # an incomplete earlier attempt
    os.replace(tmp, root)
    _write_json_atomic(marker, expected)
    return root, paths


__all__ = ["BeirData", "corpus_fingerprint", "default_cache_root", "doc_paths", "guess_ext",
           "load_beir", "looks_like_python", "materialise"]
