"""The independent original-text route: ``screen(engine, screener)``.

It enumerates the permitted units of a snapshot (``engine.inventory(scope)``, no relevance
match), plans bounded batches with source addresses, hands each batch to a screening callable
(an agent, a person at a prompt, a model) and records, batch by batch, what was processed,
what failed and what the screener returned. ``screen(..., run=<same name>)`` resumes with the
batches not yet processed. See docs/screening.md.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from typing import Any, Callable, Iterable, Sequence

from lar.core.errors import LarError
from lar.core.scope import Scope
from lar.core.timebox import parse_duration
from lar.core.version import __version__
from lar.apps.screening.batches import (DEFAULT_BATCH_BYTES, BatchItem, PlannedItem, digest, order_units, plan,
                      validate_budget, validate_order)
from lar.apps.screening.candidates import Outcome, judge
from lar.apps.screening.errors import CorruptRunError, RunNotFoundError, ScreenerFailedError, ScreeningConfigError
from lar.apps.screening.record import RunStore, check_name, new_run_id, run_lock, run_path, runs_dir
from lar.apps.screening.run import ScreeningRun, load_view

Screener = Callable[[Sequence[BatchItem]], Iterable[Any] | None]


def screener_name(screener: Any) -> str:
    name = getattr(screener, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(screener, "__qualname__", None) or type(screener).__name__


def _positive_int(value: Any, name: str, minimum: int = 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScreeningConfigError(f"{name} must be an integer >= {minimum} or None, got {value!r}")
    return value


def _call(screener: Screener, batch: tuple[BatchItem, ...]) -> list[Any]:
    """Call the screener; an ``async`` screener is awaited on a private loop (so this also
    works inside a Jupyter kernel, whose own loop is already running)."""
    out = screener(batch)
    if inspect.isawaitable(out):
        async def _wait(aw):
            return await aw

        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lar-screen") as ex:
            out = ex.submit(asyncio.run, _wait(out)).result()
    if out is None:
        return []
    if isinstance(out, (str, bytes, dict)) or not isinstance(out, Iterable):
        raise TypeError(f"the screener returned a {type(out).__name__}; return an iterable of "
                        "candidates (a list, possibly empty), or None for no candidate")
    return list(out)


def _read_items(engine, planned: list[tuple[int, PlannedItem]], context_lines: int):
    """BatchItems for the items still readable as planned, and (idx, reason) for the others."""
    batch, datas, idxs, bad = [], [], [], []
    for idx, it in planned:
        try:
            data = engine.reader.unit_text(it.hash, it.path)
        except (LarError, OSError) as exc:
            bad.append((idx, f"its text is no longer available: {exc}"))
            continue
        if it.end > len(data) or digest(data[it.start:it.end]) != it.digest:
            bad.append((idx, "the unit's text no longer matches the snapshot's plan "
                             "(its extraction changed); start a new run to screen it"))
            continue
        before = ""
        if context_lines and it.start > 0:
            s = it.start
            for _ in range(context_lines):
                if s <= 0:
                    break
                s = data.rfind(b"\n", 0, s - 1) + 1
            before = data[s:it.start].decode("utf-8", errors="replace")
        batch.append(BatchItem(it.address, it.path, it.hash, (it.start, it.end), (it.line_a, it.line_b),
                               data[it.start:it.end].decode("utf-8", errors="replace"), before))
        datas.append(data)
        idxs.append((idx, it))
    return batch, datas, idxs, bad


def _screen_batch(engine, store: RunStore, bid: int, screener: Screener, name: str,
                  context_lines: int) -> tuple[str, str]:
    """Screen one batch and commit its result. Returns (state, error)."""
    planned = store.batch_items(bid)
    batch, datas, idxs, bad = _read_items(engine, planned, context_lines)
    states = [(idx, "unreadable", why) for idx, why in bad]
    if not batch:
        error = "none of its items could be read: " + "; ".join(why for _, why in bad[:3])
        store.finish(bid, state="failed", screener=name, elapsed=0.0, error=error, items=states)
        return "failed", error
    t0 = time.monotonic()
    try:
        returned = _call(screener, tuple(batch))
    except Exception as exc:  # the screener is foreign code: record its failure, go on
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        store.finish(bid, state="failed", screener=name, elapsed=time.monotonic() - t0, error=error,
                     items=[(idx, "pending", "") for idx, _ in idxs] + states)
        return "failed", error
    elapsed = time.monotonic() - t0
    outcomes: list[Outcome] = judge(returned, batch, datas)
    for h in {idxs[o.item][1].hash for o in outcomes if o.kind == "candidate"}:
        engine.reader.snapshot(h)  # keeps the candidates' ids fetchable after edits
    states += [(idx, "screened", "") for idx, _ in idxs]
    store.finish(bid, state="processed", screener=name, elapsed=elapsed, items=states,
                 outcomes=[(o, None if o.item is None else idxs[o.item][1]) for o in outcomes])
    return "processed", ""


def _create(engine, path, name: str, screener: Screener, scope: Scope, budget: int, order: str,
            seed: int, keep_text: bool, context_lines: int, question: str | None) -> RunStore:
    units = order_units(engine.inventory(scope), order, seed,
                        engine.index.usage() if order == "usage" else None)
    rows, batches = plan(engine, units, budget, keep_text=keep_text)
    skipped = [(p, r) for p, r, _ in engine.index.skipped() if scope.matches(p)]
    meta = {"run": name, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "created_ts": time.time(),
            "screener": screener_name(screener), "question": question, "scope": scope.to_dict(),
            "batch_bytes": budget, "order": order, "seed": seed, "keep_text": keep_text,
            "context_lines": context_lines, "lar_version": __version__}
    return RunStore.create(path, meta, rows, skipped, batches)


def _check_resume(meta: dict, name: str, **given: Any) -> None:
    for key, value in given.items():
        if value is not None and value != meta.get(key):
            raise ScreeningConfigError(
                f"run {name!r} was created with {key}={meta.get(key)!r}, not {value!r}; omit {key} "
                "to resume it, or give a new run name for a new snapshot")


def screen(engine, screener: Screener, *, run: str | None = None, scope: Any = None,
           batch_bytes: int | None = None, max_batches: int | None = None, timebox: Any = None,
           order: str | None = None, seed: int | None = None, question: str | None = None,
           keep_text: bool | None = None, context_lines: int | None = None,
           retry_failed: bool = False, stop_on_error: bool = False,
           rescan: bool = True) -> ScreeningRun:
    """Screen the units of a snapshot batch by batch with ``screener`` and record the outcome.

    A new run (``run=None`` or a new name) takes the snapshot ``engine.inventory(scope)`` and
    plans its batches (``batch_bytes``, default 16 000; ``order`` "path", "usage" or "shuffle"
    with ``seed``); giving the name of an existing run resumes it with its pending batches (and
    failed ones with ``retry_failed=True``), on its own snapshot and settings. ``max_batches``
    and ``timebox`` (seconds or '2m'; counted from the call's start, checked before each batch)
    bound this call; what is left stays pending. A screener exception marks its batch failed
    and the run goes on (``stop_on_error=True`` raises ``ScreenerFailedError`` instead, after
    recording it). ``keep_text=True`` copies every snapshot unit into the content store, so a
    resume reads the snapshot's text even after edits. ``context_lines`` gives each item up to
    that many preceding lines as ``before``. ``rescan`` brings the file index up to date first."""
    if not callable(screener):
        raise ScreeningConfigError(f"the screener must be callable (batch -> candidates), got "
                                   f"{type(screener).__name__}")
    t_call = time.monotonic()
    max_batches = _positive_int(max_batches, "max_batches")
    limit = None if timebox is None else parse_duration(timebox)
    if batch_bytes is not None:
        validate_budget(batch_bytes)
    if order is not None:
        validate_order(order)
    _positive_int(seed, "seed", 0)
    _positive_int(context_lines, "context_lines", 0)
    if keep_text is not None and not isinstance(keep_text, bool):
        raise ScreeningConfigError(f"keep_text must be True or False, got {keep_text!r}")
    if question is not None and not isinstance(question, str):
        raise ScreeningConfigError(f"question must be a string, got {type(question).__name__}")
    name = check_name(run) if run is not None else new_run_id()
    path = run_path(engine, name)
    if rescan:
        engine.index_now()
    with run_lock(path):
        if path.exists():
            store = RunStore(path)
            meta = store.meta()
            _check_resume(meta, name, scope=None if scope is None else Scope.parse(scope).to_dict(),
                          batch_bytes=batch_bytes, order=order, seed=seed, keep_text=keep_text,
                          context_lines=context_lines, question=question)
            created = False
        else:
            q = question if question is not None else getattr(screener, "question", None)
            store = _create(engine, path, name, screener, Scope.parse(scope),
                            batch_bytes or DEFAULT_BATCH_BYTES, order or "path", seed or 0,
                            bool(keep_text), context_lines or 0, q if isinstance(q, str) else None)
            meta = store.meta()
            created = True
        try:
            todo = store.batch_ids(("pending", "failed") if retry_failed else ("pending",))
            done = {"processed": 0, "failed": 0}
            stopped, failure = "complete", None
            name_s = screener_name(screener)
            for bid in todo:
                if max_batches is not None and sum(done.values()) >= max_batches:
                    stopped = "max_batches"
                    break
                if limit is not None and time.monotonic() - t_call >= limit:
                    stopped = "timebox"
                    break
                state, error = _screen_batch(engine, store, bid, screener, name_s,
                                             int(meta.get("context_lines") or 0))
                done[state] += 1
                if state == "failed" and stop_on_error:
                    stopped, failure = "error", (bid, error)
                    break
            last_call = {"created": created, "batches_processed": done["processed"],
                         "batches_failed": done["failed"], "stopped_by": stopped,
                         "elapsed": round(time.monotonic() - t_call, 6), "screener": name_s}
            view = load_view(engine, store, last_call=last_call)
        finally:
            store.close()
    if failure is not None:
        raise ScreenerFailedError(name, *failure)
    return view


def load_run(engine, run: str, *, rescan: bool = True) -> ScreeningRun:
    """The current view of a recorded run (``rescan`` first brings the file index up to date,
    so that ``changed`` and ``not_in_snapshot`` describe the folder as it is now)."""
    path = run_path(engine, run)
    if not path.exists():
        raise RunNotFoundError(f"no screening run {run!r} in {path.parent}; list them with "
                               "lar.apps.screening.list_runs(engine)")
    if rescan:
        engine.index_now()
    store = RunStore(path)
    try:
        return load_view(engine, store)
    finally:
        store.close()


def list_runs(engine) -> list[dict[str, Any]]:
    """One summary per recorded run, oldest first: run, created, screener, question, batch
    counts by state, bytes processed and total, and an ``error`` for an unreadable record."""
    out = []
    for path in sorted(runs_dir(engine).glob("*.sqlite")):
        try:
            store = RunStore(path)
        except (CorruptRunError, RunNotFoundError) as exc:
            out.append({"run": path.stem, "error": str(exc)})
            continue
        try:
            meta = store.meta()
            states = {s: n for s, n in store.rows("SELECT state, COUNT(*) FROM batches GROUP BY state")}
            total, done = store.rows('SELECT COALESCE(SUM("end" - start), 0), COALESCE(SUM(CASE WHEN '
                                     "state='screened' THEN \"end\" - start END), 0) FROM items")[0]
            out.append({"run": meta.get("run", path.stem), "created": meta.get("created"),
                        "created_ts": meta.get("created_ts", 0.0), "screener": meta.get("screener"),
                        "question": meta.get("question"),
                        "batches": {s: states.get(s, 0) for s in ("pending", "processed", "failed")},
                        "bytes_total": total, "bytes_processed": done,
                        "fraction": round(done / total, 6) if total else 0.0})
        finally:
            store.close()
    out.sort(key=lambda r: (r.get("created_ts") or 0.0, r["run"]))
    return out
