"""What every token encoder shares: byte-exact decoding, window planning, span bookkeeping.

``TokenEncoder`` turns byte spans of a unit's UTF-8 text into a ``UnitEncoding`` and a query
string into a ``QueryEncoding``. A subclass supplies a Hugging Face fast tokenizer and one
batched forward pass (``_forward``); everything about offsets lives here, so that every adapter
maps vectors back to the ORIGINAL bytes the same way:

1. each span is decoded with ``errors="replace"``-like behaviour while keeping, for every
   character, the byte where it starts (``decode_with_offsets``): a replacement character covers
   exactly the invalid bytes it stands for, so token spans stay inside the unit's bytes;
2. the span text is tokenised once, without special tokens and without truncation, with the
   tokenizer's character offsets;
3. a span with more tokens than fit in one window is split into several windows (``plan_windows``)
   - each window becomes its own chunk. Nothing is ever truncated.
"""
from __future__ import annotations

import codecs
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lar.core import deadline
from lar.core.errors import ConfigError, DeadlineExceeded, QueryError
from lar.encoders.encoding import UnitEncoding
from lar.encoders.batchplan import plan_batches
from lar.encoders.resume import PartialPasses, windows_key

__all__ = ["QueryEncoding", "TokenEncoder", "Window", "decode_with_offsets", "plan_windows"]

_ERR_HANDLER = "lar-embed-offsets"
_tls = threading.local()


def _record_error(exc: UnicodeError):
    if not isinstance(exc, UnicodeDecodeError):  # pragma: no cover - only registered for decoding
        raise exc
    _tls.errors.append((exc.start, exc.end))
    return "\ufffd", exc.end


codecs.register_error(_ERR_HANDLER, _record_error)


def decode_with_offsets(data: bytes) -> tuple[str, np.ndarray]:
    """Decode UTF-8 ``data`` like ``errors="replace"`` and return ``(text, c2b)`` where
    ``c2b[i]`` is the byte offset at which character ``i`` starts and ``c2b[len(text)] ==
    len(data)``. Each U+FFFD produced for invalid bytes maps to exactly those bytes."""
    raw = np.frombuffer(data, dtype=np.uint8)
    starts = (raw & 0xC0) != 0x80  # every byte that is not a continuation byte starts a char
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        _tls.errors = []
        text = data.decode("utf-8", errors=_ERR_HANDLER)
        for a, b in _tls.errors:
            starts[a] = True
            starts[a + 1:b] = False
        _tls.errors = []
    c2b = np.empty(len(text) + 1, dtype=np.int64)
    idx = np.flatnonzero(starts)
    if idx.shape[0] != len(text):  # pragma: no cover - would be a bug in the mapping above
        raise RuntimeError("internal error: character/byte offset mapping is inconsistent")
    c2b[:-1] = idx
    c2b[-1] = len(data)
    return text, c2b


_SENTENCE_END = frozenset(".!?;:")


def plan_windows(starts: np.ndarray, ends: np.ndarray, text: str, limit: int) -> list[tuple[int, int]]:
    """Split ``n`` tokens (character offsets ``starts``/``ends`` into ``text``) into windows of
    at most ``limit`` tokens, returned as ``[a, b)`` token ranges covering all tokens in order.

    A window that must be cut is cut within its last quarter: preferably before a token that
    begins a new line, else after sentence punctuation followed by white space, else at any white
    space between tokens, else (one unbroken run of tokens) at the window's end."""
    n = int(starts.shape[0])
    if limit < 1:
        raise ConfigError(f"a window must hold at least one token, got {limit}")
    out: list[tuple[int, int]] = []
    a = 0
    while n - a > limit:
        hi = a + limit
        lo = max(a + 1, a + (3 * limit) // 4)
        out.append((a, _best_cut(starts, ends, text, lo, hi)))
        a = out[-1][1]
    if n > a:
        out.append((a, n))
    return out


def _best_cut(starts: np.ndarray, ends: np.ndarray, text: str, lo: int, hi: int) -> int:
    gaps = [(j, text[ends[j - 1]:starts[j]]) for j in range(hi, lo - 1, -1)]
    for j, gap in gaps:
        if "\n" in gap:
            return j
    for j, gap in gaps:
        if gap and ends[j - 1] > 0 and text[ends[j - 1] - 1] in _SENTENCE_END:
            return j
    for j, gap in gaps:
        if gap:
            return j
    j = hi  # no white space at all: hard cut, but never between tokens of one character
    while j > lo and starts[j] == starts[j - 1]:
        j -= 1
    return j


@dataclass(frozen=True, eq=False)
class QueryEncoding:
    """A query's token vectors (special tokens dropped, rows L2-normalised, float32), the
    tokenizer's string for each token, its character span in the query, and the query's pooled
    vector (L2-normalised; ``None`` for models without a pooled output)."""

    tokens: np.ndarray
    token_texts: tuple[str, ...]
    token_spans: tuple[tuple[int, int], ...]
    pooled: np.ndarray | None


@dataclass(frozen=True)
class Window:
    """One encoder window: content token ids (no special tokens) and their text."""

    ids: np.ndarray
    text: str


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, float32; all-zero rows stay zero (no NaN)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def lower_same_length(s: str) -> str:
    """``s.lower()`` but characters whose lower case has another length stay as they are, so
    character offsets into the result are offsets into ``s``."""
    low = s.lower()
    if len(low) == len(s):
        return low
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in s)


class TokenEncoder:
    """Base of the token encoders. Subclasses set ``model_id``, ``kind``, ``dim``, ``pooled_dim``,
    ``max_tokens`` (window size including special tokens), ``batch_size``, ``_tok`` (a fast
    tokenizer), ``_n_special`` (special tokens per window), ``_lower`` (lower-case text before
    tokenising) and implement ``_forward``. Calls are serialised by ``_lock`` (the tokenizer is
    not safe to share between threads and torch already uses all cores)."""

    model_id: str
    kind: str
    dim: int
    pooled_dim: int | None
    max_tokens: int
    batch_size: int = 32
    _n_special: int = 2
    _lower: bool = False

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._partial = PartialPasses()

    # -- to implement ---------------------------------------------------------------------
    def _forward(self, windows: list[Window], *, is_query: bool
                 ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """For each window: ``(vectors (k, dim) float32 L2-normalised, rows (k,) int64,
        pooled (dp,) float32 L2-normalised or None)``. ``rows[i]`` is the index (into the window's
        content tokens) of the token vector ``i`` stands for, or -1 when the model's output could
        not be tied to one token (the vector then gets the whole window's span)."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def _padded(self, windows: list[Window], pre, suf, width: int | None = None,
                fill_mask: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(input_ids, attention_mask)`` int64 arrays: each window as ``pre + ids + suf``,
        padded with the pad id to ``width`` (default: the longest window)."""
        need = max(len(w.ids) for w in windows) + len(pre) + len(suf)
        width = max(need, width or 0)
        ids = np.full((len(windows), width), self._pad_id, dtype=np.int64)
        mask = np.full((len(windows), width), fill_mask, dtype=np.int64)
        for i, w in enumerate(windows):
            m = len(pre) + len(w.ids) + len(suf)
            ids[i, :m] = np.concatenate([pre, w.ids, suf])
            mask[i, :m] = 1
        return ids, mask

    @property
    def window_tokens(self) -> int:
        """Content tokens that fit in one window (``max_tokens`` minus the special tokens)."""
        return self.max_tokens - self._n_special

    @property
    def query_tokens(self) -> int:
        """Most content tokens a query may have."""
        return self.window_tokens

    def _tokenize(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        if not texts:
            return []
        prepared = [lower_same_length(t) for t in texts] if self._lower else texts
        enc = self._tok(prepared, add_special_tokens=False, return_offsets_mapping=True,
                        truncation=False, padding=False, return_attention_mask=False,
                        return_token_type_ids=False, verbose=False)
        out = []
        for ids, offs in zip(enc["input_ids"], enc["offset_mapping"]):
            o = np.asarray(offs, dtype=np.int64).reshape(-1, 2)
            out.append((np.asarray(ids, dtype=np.int64), o))
        return out

    def _run(self, windows: list[Window], *, is_query: bool):
        order = sorted(range(len(windows)), key=lambda i: -len(windows[i].ids))
        # a pass over these windows abandoned at its deadline left its finished batches here:
        # take them back (lar.encoders.resume), so a unit longer than any build slice finishes
        key = windows_key(windows)
        results: list = self._partial.take(key, len(windows))
        # batches cut where padding wastes least (lar.encoders.batchplan), batch_size at most
        cuts = plan_batches([len(windows[i].ids) + self._n_special for i in order], self.batch_size)
        for a, b in zip(cuts, cuts[1:]):
            batch = order[a:b]
            if all(results[j] is not None for j in batch):
                continue
            # between batches: work past the caller's deadline is abandoned (lar.core.deadline)
            try:
                deadline.check(f"encoding with {self.model_id}")
            except DeadlineExceeded:
                self._partial.put(key, results)
                raise
            for j, res in zip(batch, self._forward([windows[j] for j in batch], is_query=is_query)):
                results[j] = res
        return results

    def encode_spans(self, text: bytes, spans: Sequence[tuple[int, int]], *,
                     chunker_version: str = "1") -> UnitEncoding:
        """Encode byte spans ``[start, end)`` of a unit's UTF-8 ``text``: one chunk per window
        (a span longer than a window becomes several chunks), token byte spans pointing into
        ``text``. Empty and white-space-only spans are skipped; spans outside ``text`` are a
        ``ConfigError``. Chunks of one span tile it: the first starts at the span's start, each
        later one at its first token, each ends where the next begins, the last at the span's
        end."""
        return self.encode_spans_many([(text, spans)], chunker_version=chunker_version)[0]

    def encode_spans_many(self, units: Sequence[tuple[bytes, Sequence[tuple[int, int]]]], *,
                          chunker_version: str = "1") -> list[UnitEncoding]:
        """:meth:`encode_spans` of several units in one encoder pass: their windows are batched
        together, longest first (``batch_size`` windows a forward pass, as one long unit's are),
        so units of one or two windows each fill whole batches. Each unit's encoding is
        assembled from its own windows only."""
        per_unit = [self._span_items(text, spans) for text, spans in units]
        with self._lock:
            flat = self._tokenize([it[2] for items in per_unit for it in items])
            toks, at = [], 0
            for items in per_unit:
                toks.append(flat[at:at + len(items)])
                at += len(items)
            windows, plans = [], []
            for items, unit_toks in zip(per_unit, toks):
                plan = []
                for k, ((s, e, st, c2b), (ids, offs)) in enumerate(zip(items, unit_toks)):
                    for a, b in plan_windows(offs[:, 0], offs[:, 1], st, self.window_tokens):
                        plan.append((k, a, b, len(windows)))
                        windows.append(Window(ids[a:b], st[offs[a, 0]:offs[b - 1, 1]]))
                plans.append(plan)
            results = self._run(windows, is_query=False)
        return [self._assemble(items, unit_toks, [p[:3] for p in plan], [results[p[3]] for p in plan],
                               chunker_version)
                for items, unit_toks, plan in zip(per_unit, toks, plans)]

    @staticmethod
    def _span_items(text: bytes, spans: Sequence[tuple[int, int]]) -> list[tuple]:
        """The non-blank spans of ``text`` as (start, end, decoded text, char-to-byte map)."""
        if isinstance(text, str) or not isinstance(text, (bytes, bytearray, memoryview)):
            raise ConfigError("encode_spans takes the unit text as UTF-8 bytes")
        data = bytes(text)
        n = len(data)
        items = []
        for sp in spans:
            try:
                s, e = (int(v) for v in sp)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"a span must be a (start, end) pair of ints, got {sp!r}") from exc
            if not 0 <= s <= e <= n:
                raise ConfigError(f"span ({s}, {e}) lies outside the unit text of {n} bytes")
            if e > s:
                st, c2b = decode_with_offsets(data[s:e])
                if st.strip():
                    items.append((s, e, st, c2b))
        return items

    def _assemble(self, items, toks, plan, results, chunker_version: str) -> UnitEncoding:
        vecs, spans, chunk_starts, chunk_spans, pooled = [], [], [], [], []
        per_item: dict[int, list] = {}
        for (k, a, b), (v, rows, p) in zip(plan, results):
            if len(rows):
                per_item.setdefault(k, []).append((a, b, v, rows, p))
        row = 0
        for k in sorted(per_item):
            s, e, _st, c2b = items[k]
            offs = toks[k][1]
            wins = per_item[k]
            for w, (a, b, v, rows, p) in enumerate(wins):
                tok_spans = np.empty((len(rows), 2), dtype=np.int64)
                exact = rows >= 0
                tok_spans[exact] = s + c2b[offs[a + rows[exact]]]
                tok_spans[~exact] = (s + c2b[offs[a, 0]], s + c2b[offs[b - 1, 1]])
                c_start = s if w == 0 else s + int(c2b[offs[a, 0]])
                c_end = e if w == len(wins) - 1 else s + int(c2b[offs[wins[w + 1][0], 0]])
                vecs.append(v)
                spans.append(tok_spans)
                chunk_starts.append(row)
                chunk_spans.append((c_start, c_end))
                pooled.append(p)
                row += len(rows)
        has_pooled = self.pooled_dim is not None and all(p is not None for p in pooled)
        return UnitEncoding(
            model_id=self.model_id,
            chunker_version=chunker_version,
            tokens=np.concatenate(vecs).astype(np.float32, copy=False) if vecs
            else np.zeros((0, self.dim), dtype=np.float32),
            token_spans=np.concatenate(spans) if spans else np.zeros((0, 2), dtype=np.int64),
            chunk_starts=np.asarray(chunk_starts, dtype=np.int64),
            chunk_spans=np.asarray(chunk_spans, dtype=np.int64).reshape(-1, 2),
            pooled=(np.stack(pooled).astype(np.float32, copy=False) if pooled
                    else np.zeros((0, self.pooled_dim), dtype=np.float32)) if has_pooled else None,
        )

    def encode_query(self, text: str) -> QueryEncoding:
        """Encode a query. Its token spans are character offsets into ``text``. An empty query,
        one without tokens, or one longer than ``query_tokens`` is a ``QueryError`` (never
        truncated)."""
        if not isinstance(text, str):
            raise QueryError("embed", f"a query must be a string, got {type(text).__name__}")
        if not text.strip():
            raise QueryError("embed", "empty query")
        with self._lock:
            ids, offs = self._tokenize([text])[0]
            if ids.shape[0] == 0:
                raise QueryError("embed", f"the query {text!r} has no tokens for {self.model_id}")
            if ids.shape[0] > self.query_tokens:
                raise QueryError(
                    "embed", f"the query has {ids.shape[0]} tokens but {self.model_id} takes at "
                    f"most {self.query_tokens} (a {self.max_tokens}-token window with special "
                    f"tokens); shorten the query: lar never truncates")
            deadline.check(f"encoding the query with {self.model_id}")
            vecs, rows, pooled = self._forward([Window(ids, text)], is_query=True)[0]
            exact = rows >= 0
            texts = self._tok.convert_ids_to_tokens(ids[np.where(exact, rows, 0)].tolist())
        spans = tuple((int(offs[r, 0]), int(offs[r, 1])) if r >= 0 else (0, len(text)) for r in rows)
        token_texts = tuple(t if ok else "" for t, ok in zip(texts, exact))
        return QueryEncoding(tokens=np.asarray(vecs, dtype=np.float32), token_texts=token_texts,
                             token_spans=spans, pooled=pooled)
