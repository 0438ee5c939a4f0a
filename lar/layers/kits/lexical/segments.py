"""Immutable BM25 segments: a bm25s index over the chunks of a set of units, in one folder.

A segment folder holds bm25s's own files (``save``; loaded with ``mmap=True``), ``docs.json``
(the unit hashes and, per bm25s doc id, ``[unit index, start, end]``) and ``segment.json``, the
header: format, the parameters it was built with (tokenizer/build key, k1, b, method) and the
size and CRC-32 of every other file. A folder is built under a temporary name and renamed when
complete, so a reader never sees half a segment; ``load`` checks the header against the files
and raises ``CorruptSegment`` when anything disagrees.

``SegmentStore`` owns the folders and the layout file ``segments.json`` (the live main segment
and the delta segments), which is replaced atomically, read-modify-write under an ``flock`` on
``segments.lock`` so that two processes' commits never undo each other. Uncommitted work is
private to its writer: a segment id names the process that built it (``<time>-p<pid>-<random>``),
and a folder no layout names (a temporary one, or one built and not yet committed) is removed
only by its own process once it is no longer in flight, or by anyone when that process is dead
or the folder is older than ``writers.STALE_AFTER_S`` (``lar.layers.kits.lexical.writers``).
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from lar.core.errors import CorruptStateError, require
from lar.layers.kits.lexical import writers
from lar.layers.kits.lexical.corpus_stats import idf, term_frequencies
from lar.layers.kits.lexical.writers import TMP
from lar.store.cas import atomic_write

SEGMENT_FORMAT = 1
HEADER = "segment.json"
DOCS = "docs.json"
LAYOUT = "segments.json"
TF, DOCLEN = "tf.npy", "doclen.npy"  # raw term frequencies and doc lengths
STATS_VERSION = 1
LOCK = "segments.lock"
# errors that say reading failed (no memory, no file handles, I/O), not that the segment is bad
NOT_CORRUPTION = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EIO, errno.EAGAIN,
                            errno.EACCES, errno.EPERM, errno.EINTR})


class CorruptSegment(CorruptStateError):
    """A segment folder failed its checks (missing or altered file, wrong parameters)."""


@dataclass(frozen=True)
class SegmentParams:
    """What a segment's scores depend on; a segment built with other parameters is stale."""

    key: str
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"

    def to_dict(self) -> dict[str, Any]:
        # "stats": segments keep raw term frequencies and doc lengths (corpus-wide scoring,
        # lar.layers.kits.lexical.corpus_stats); older segments are rebuilt from stored terms
        return {"key": self.key, "k1": self.k1, "b": self.b, "method": self.method,
                "stats": STATS_VERSION}


def _crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            crc = zlib.crc32(block, crc)
    return crc


class Segment:
    """A loaded segment: its units, its doc table and its bm25s model (None when empty)."""

    def __init__(self, seg_id: str, path: Path, units: list[str], docs: np.ndarray, model: Any,
                 tf: np.ndarray | None = None, doclen: np.ndarray | None = None):
        self.id = seg_id
        self.path = path
        self.units = units
        self.docs = docs  # (n, 3) int64: unit index, start, end
        self.model = model
        self.tf = tf  # per stored (term, doc) entry of model.scores: the raw count
        self.doclen = doclen  # per doc: its number of tokens
        self.n_docs = int(len(docs))
        self.unit_set = frozenset(units)
        self.docs_per_unit = np.bincount(docs[:, 0], minlength=len(units)) if len(docs) else \
            np.zeros(len(units), dtype=np.int64)

    @classmethod
    def load(cls, path: Path, params: SegmentParams) -> "Segment":
        """Load and verify a segment folder; ``CorruptSegment`` says what is wrong."""
        try:
            header = json.loads((path / HEADER).read_text("utf-8"))
            if header.get("format") != SEGMENT_FORMAT:
                raise CorruptSegment(f"format {header.get('format')!r}, expected {SEGMENT_FORMAT}")
            if header.get("params") != params.to_dict():
                raise CorruptSegment("built with other parameters (tokenizer, k1, b or method)")
            for name, (size, crc) in header["files"].items():
                fp = path / name
                if fp.stat().st_size != size or _crc(fp) != crc:
                    raise CorruptSegment(f"{name} does not match the header (size or checksum)")
            table = json.loads((path / DOCS).read_text("utf-8"))
            units = list(table["units"])
            docs = np.asarray(table["docs"], dtype=np.int64).reshape(-1, 3)
            if len(docs) != header["n_docs"] or len(units) != header["n_units"]:
                raise CorruptSegment("doc table size differs from the header")
            if len(docs) and (docs[:, 0].min() < 0 or docs[:, 0].max() >= len(units)
                              or (docs[:, 1] > docs[:, 2]).any() or docs[:, 1].min() < 0):
                raise CorruptSegment("doc table holds invalid entries")
            model = tf = doclen = None
            if len(docs):
                bm25s = require("bm25s", "lexical")
                model = bm25s.BM25.load(str(path), mmap=True, load_corpus=False, show_progress=False)
                if int(model.scores["num_docs"]) != len(docs):
                    raise CorruptSegment("bm25s index and doc table disagree on the doc count")
                n_cols = len(model.scores["indptr"]) - 1
                if max(model.vocab_dict.values(), default=-1) > n_cols:
                    raise CorruptSegment("bm25s vocabulary and score matrix disagree")
                tf = np.load(path / TF, mmap_mode="r")
                doclen = np.load(path / DOCLEN, mmap_mode="r")
                if len(tf) != len(model.scores["data"]) or len(doclen) != len(docs):
                    raise CorruptSegment("term frequencies or doc lengths disagree with the index")
        except CorruptSegment:
            raise
        except MemoryError:
            raise  # a failure to read, not a damaged segment
        except OSError as exc:
            if exc.errno in NOT_CORRUPTION:  # likewise (no file handles, I/O error, access)
                raise
            raise CorruptSegment(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # missing file, bad JSON, numpy/bm25s load error
            raise CorruptSegment(f"{type(exc).__name__}: {exc}") from None
        return cls(path.name, path, units, docs, model, *((tf, doclen) if len(docs) else ()))

    # -- scoring ------------------------------------------------------------------------------
    def df(self, term: str) -> int:
        """How many docs of this segment contain ``term``."""
        if self.model is None:
            return 0
        tid = self.model.vocab_dict.get(term)
        indptr = self.model.scores["indptr"]
        if tid is None or tid >= len(indptr) - 1:
            return 0
        return int(indptr[tid + 1] - indptr[tid])

    def term_docs(self, term: str) -> np.ndarray | None:
        """The doc ids whose stored entries hold ``term`` (None when none does)."""
        if self.model is None:
            return None
        tid = self.model.vocab_dict.get(term)
        indptr = self.model.scores["indptr"]
        if tid is None or tid >= len(indptr) - 1:
            return None
        return np.asarray(self.model.scores["indices"][int(indptr[tid]):int(indptr[tid + 1])])

    def alive_mask(self, allowed: set[str] | frozenset[str]) -> np.ndarray | None:
        """Per-doc 1/0 weights: 1 for docs of units in ``allowed`` (tombstones filtered); None
        when every doc is alive."""
        alive = np.fromiter((h in allowed for h in self.units), dtype=bool, count=len(self.units))
        if alive.all():
            return None
        return alive[self.docs[:, 0]].astype(np.float32)

    def search(self, terms: Sequence[str], k: int, allowed: set[str] | frozenset[str],
               weights: dict[str, float] | None = None, moments=None,
               scored: np.ndarray | None = None) -> list[tuple[float, int]]:
        """Top ``k`` ``(score, doc id)`` with a positive score among docs of ``allowed`` units.
        Without ``weights`` the scores are bm25s's (segment-local IDF, via ``retrieve``, or from
        its score columns when ``moments`` is given); with them each term's column is scaled by
        its weight first (global-IDF rescaling); ``scored`` gives every doc's score already
        (corpus-wide statistics, ``lar.layers.kits.lexical.corpus_stats.live_scores``).
        ``moments`` (a :class:`lar.core.background.ScoreMoments`) is given every allowed doc's score,
        zeros included: the query's score background in this segment."""
        if self.model is None or k < 1:
            return []
        vocab = self.model.vocab_dict
        n_cols = len(self.model.scores["indptr"]) - 1
        present = [t for t in terms if t and vocab.get(t, n_cols) < n_cols]
        if not present:
            return []
        mask = self.alive_mask(allowed)
        if mask is not None and not mask.any():
            return []
        k = min(k, self.n_docs)
        if weights is None and moments is None and scored is None:
            res = self.model.retrieve([present], k=k, show_progress=False, n_threads=0,
                                      weight_mask=mask)
            ids, scores = res.documents[0], res.scores[0]
        else:  # every doc's score, once: the top k and, when asked, the background come from it
            scores_all = np.array(scored, dtype=np.float32) if scored is not None else \
                self._column_scores(present, weights)
            if moments is not None:
                moments.add(scores_all if mask is None else scores_all[mask > 0])
            if mask is not None:
                scores_all *= mask
            ids = np.argpartition(-scores_all, k - 1)[:k] if k < self.n_docs else np.arange(self.n_docs)
            ids = ids[np.argsort(-scores_all[ids], kind="stable")]
            scores = scores_all[ids]
        return [(float(s), int(i)) for s, i in zip(scores, ids) if s > 0]

    def _column_scores(self, present: Sequence[str], weights: dict[str, float] | None) -> np.ndarray:
        """Every doc's score: the sum of the query terms' (weighted) score columns."""
        sc, vocab = self.model.scores, self.model.vocab_dict
        out = np.zeros(self.n_docs, dtype=np.float32)
        for t in present:
            tid = vocab[t]
            a, b = int(sc["indptr"][tid]), int(sc["indptr"][tid + 1])
            w = np.float32(1.0 if weights is None else weights.get(t, 1.0))
            out[sc["indices"][a:b]] += w * sc["data"][a:b]
        return out

    def doc(self, i: int) -> tuple[str, int, int]:
        u, s, e = self.docs[i]
        return self.units[int(u)], int(s), int(e)


def global_weights(segments: Sequence[Segment], terms: Sequence[str], method: str
                   ) -> list[dict[str, float]]:
    """Per segment, ``{term: global IDF / segment IDF}`` over all the segments' docs."""
    n_total = sum(s.n_docs for s in segments)
    dfs = [{t: s.df(t) for t in terms} for s in segments]
    out = []
    for s, df in zip(segments, dfs):
        w = {}
        for t in terms:
            local = idf(method, df[t], s.n_docs)
            if df[t] and local > 0:
                w[t] = idf(method, sum(d[t] for d in dfs), n_total) / local
        out.append(w)
    return out


@dataclass(frozen=True)
class Layout:
    """The live segments: one main segment (or none yet) and the deltas, oldest first."""

    key: str
    main: str | None = None
    deltas: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ids(self) -> list[str]:
        return ([self.main] if self.main else []) + list(self.deltas)


class SegmentStore:
    """Segment folders under ``<dir>/segments`` and the layout file ``<dir>/segments.json``."""

    def __init__(self, directory: Path, params: SegmentParams):
        self.dir = Path(directory)
        self.seg_dir = self.dir / "segments"
        self.seg_dir.mkdir(parents=True, exist_ok=True)
        self.params = params
        with self.locked():  # temporary folders left by a writer that was killed
            for p in self.seg_dir.glob(TMP + "*"):
                if self.removable(p):
                    shutil.rmtree(p, ignore_errors=True)

    # -- the writers' lock and uncommitted work -------------------------------------------------
    def locked(self):
        """Hold the store's cross-process lock (layout changes and garbage collection)."""
        return writers.locked(self.dir / LOCK)

    claim = staticmethod(writers.claim)
    release = staticmethod(writers.release)

    @staticmethod
    def removable(path: Path) -> bool:
        return writers.removable(path)

    # -- the layout -------------------------------------------------------------------------------
    def layout_stamp(self) -> tuple[int, int, int] | None:
        """Changes whenever the layout file is replaced (by any process)."""
        try:
            st = (self.dir / LAYOUT).stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def read_layout(self) -> Layout:
        try:
            d = json.loads((self.dir / LAYOUT).read_text("utf-8"))
            if d.get("key") == self.params.key and d.get("params") == self.params.to_dict():
                return Layout(d["key"], d.get("main"), tuple(d.get("deltas", ())))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return Layout(self.params.key)

    def update(self, make: Callable[[Layout], Layout], spare: Iterable[str] = (),
               discard: Iterable[str] = ()) -> Layout:
        """Under the lock: the layout on disk now, changed by ``make``, written atomically; then
        the folders of ``discard`` (corrupt ones) and the garbage are removed. Returns it."""
        with self.locked():
            layout = make(self.read_layout())
            body = {"key": layout.key, "params": self.params.to_dict(), "main": layout.main,
                    "deltas": list(layout.deltas), "at": time.time()}
            atomic_write(self.dir / LAYOUT, json.dumps(body, indent=1).encode(), durable=False)
            for sid in discard:
                if sid not in layout.ids:
                    shutil.rmtree(self.seg_dir / sid, ignore_errors=True)
            self._collect(layout, spare)
        return layout

    def write_layout(self, layout: Layout, spare: Iterable[str] = ()) -> None:
        """Replace the layout atomically, then remove the garbage (never ``spare``: segments
        built but not yet committed)."""
        self.update(lambda _: layout, spare)

    def collect(self, layout: Layout | None = None, spare: Iterable[str] = ()) -> None:
        """Remove the folders the layout on disk does not name and that are garbage."""
        with self.locked():
            self._collect(self.read_layout() if layout is None else layout, spare)

    def _collect(self, layout: Layout, spare: Iterable[str]) -> None:
        keep = set(layout.ids) | set(spare)
        for p in self.seg_dir.iterdir():
            if p.name in keep or p.name[len(TMP):] in keep:
                continue
            if self.removable(p):
                shutil.rmtree(p, ignore_errors=True)

    def load(self, seg_id: str) -> Segment:
        return Segment.load(self.seg_dir / seg_id, self.params)

    @staticmethod
    def new_id() -> str:
        return f"{time.time_ns():x}-p{os.getpid()}-{secrets.token_hex(3)}"

    def build(self, units: Iterable[tuple[str, Sequence[tuple[int, int]], Sequence[Sequence[str]]]],
              seg_id: str | None = None) -> Segment:
        """Write a new segment from ``(hash, spans, term lists)`` of units; returns it loaded.
        Units with no terms still count as covered by the segment."""
        seg_id = seg_id or self.new_id()
        tmp = self.seg_dir / f"{TMP}{seg_id}"
        tmp.mkdir(parents=True)
        try:
            unit_list: list[str] = []
            docs: list[list[int]] = []
            corpus: list[Sequence[str]] = []
            for h, spans, terms in units:
                ui = len(unit_list)
                unit_list.append(h)
                for (s, e), t in zip(spans, terms):
                    if t:
                        docs.append([ui, int(s), int(e)])
                        corpus.append(t)
            if corpus:
                bm25s = require("bm25s", "lexical")
                model = bm25s.BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
                model.index(corpus, show_progress=False)
                model.save(str(tmp), show_progress=False)
                tf, doclen = term_frequencies(model, corpus)
                np.save(tmp / TF, tf)
                np.save(tmp / DOCLEN, doclen)
            (tmp / DOCS).write_text(json.dumps({"units": unit_list, "docs": docs},
                                               separators=(",", ":")), "utf-8")
            files = {p.name: [p.stat().st_size, _crc(p)] for p in sorted(tmp.iterdir())}
            header = {"format": SEGMENT_FORMAT, "id": seg_id, "params": self.params.to_dict(),
                      "n_docs": len(docs), "n_units": len(unit_list), "files": files,
                      "created": time.time()}
            (tmp / HEADER).write_text(json.dumps(header, indent=1), "utf-8")
            os.replace(tmp, self.seg_dir / seg_id)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.load(seg_id)
