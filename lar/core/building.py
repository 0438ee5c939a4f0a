"""Layers that build an index lazily, unit by unit: the shared base class and its manifest.

A building layer keeps, in its own folder, a manifest (SQLite, WAL) with one row per content
hash it processed: the build version (layer version + chunker version), the state ('ok',
'skipped' with a reason, 'failed' with a reason) and a small info dict. A unit counts as built
only when its manifest row carries the current version, so a new layer or chunker version
rebuilds lazily, and a build killed half-way loses at most the unit in progress (the layer writes
that unit's artefacts atomically first, then the manifest row; a re-build overwrites them).

Subclasses set ``name``/``version``/``chunker_version``, decide ``accepts(unit)``, and implement
``index_unit(unit, doc) -> dict`` (raise ``SkipUnit`` to skip with a reason) and ``drop(hashes)``
to forget units that are no longer live. Searches use only built, live units and report coverage.
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from lar.core.errors import CorruptStateError, DeadlineExceeded
from lar.core.sqlite_repair import Repair, SqliteFile
from lar.core.layer import BaseLayer, LayerContext, ScopeView, Unit
from lar.core.types import LayerStatus


class SkipUnit(Exception):
    """Raised by ``index_unit`` when a unit cannot be indexed by this layer (with the reason)."""


class RemoteUnitError(Exception):
    """A unit's pass failed in another process (``lar.distributed.ray_build``): the message is
    ``"<exception type>: <message>"``, as a local failure records it."""


class Manifest:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._gen = 0  # bumped on every local write; with PRAGMA data_version it keys a cache
        self._states_cache: tuple | None = None
        self.db = SqliteFile(self.path, label="the layer manifest", setup=self._setup,
                             on_reset=self._reset,
                             todo="Its units are rebuilt lazily: run `lar build` (or let the "
                                  "background build catch up); until then the layer covers less.")
        try:
            self.db.open()
        except sqlite3.DatabaseError as exc:
            raise CorruptStateError(
                f"the layer manifest {self.path} is unreadable ({exc}); delete {self.path.parent} "
                "and the layer rebuilds lazily") from None

    @staticmethod
    def _setup(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS units(hash TEXT PRIMARY KEY, version TEXT NOT NULL, "
            "state TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', info TEXT NOT NULL DEFAULT '{}', "
            "at REAL NOT NULL)")

    def _reset(self) -> None:
        self._gen += 1
        self._states_cache = None

    def _conn(self) -> sqlite3.Connection:
        return self.db.conn()

    def clear(self) -> None:
        """Forget every unit (the layer's artefacts were lost: everything rebuilds lazily)."""
        with self._lock:
            self._gen += 1
            self.db.recovering(lambda: self._conn().execute("DELETE FROM units"))

    def mark(self, h: str, version: str, state: str, reason: str = "", info: dict | None = None) -> None:
        with self._lock:
            self._gen += 1
            self._conn().execute(
                "INSERT INTO units(hash, version, state, reason, info, at) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(hash) DO UPDATE SET version=excluded.version, state=excluded.state, "
                "reason=excluded.reason, info=excluded.info, at=excluded.at",
                (h, version, state, reason, json.dumps(info or {}), time.time()))

    def forget(self, hashes: Iterable[str]) -> None:
        with self._lock:
            self._gen += 1
            self._conn().executemany("DELETE FROM units WHERE hash=?", [(h,) for h in hashes])

    def states(self, version: str) -> dict[str, str]:
        """{hash: state} of the units built with ``version`` (cached until the manifest changes,
        here or in another process). Treat the result as read-only."""
        conn = self._conn()
        key = (version, self._gen, conn.execute("PRAGMA data_version").fetchone()[0], id(conn))
        cached = self._states_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        rows = conn.execute("SELECT hash, state FROM units WHERE version=?", (version,))
        out = dict(rows.fetchall())
        self._states_cache = (key, out)
        return out

    def stamp(self, version: str) -> tuple:
        """A value that moves whenever the rows of ``version`` may have changed (a local write,
        another connection's or process's commit, a reset): equal stamps, equal ``states``.
        Comparable only with stamps taken on the same thread (its connection)."""
        conn = self._conn()
        return (version, self._gen, conn.execute("PRAGMA data_version").fetchone()[0], id(conn))

    def entry(self, h: str) -> dict[str, Any] | None:
        row = self._conn().execute(
            "SELECT version, state, reason, info FROM units WHERE hash=?", (h,)).fetchone()
        if row is None:
            return None
        return {"version": row[0], "state": row[1], "reason": row[2], "info": json.loads(row[3])}

    def has_any(self, version: str) -> bool:
        return self._conn().execute(
            "SELECT 1 FROM units WHERE version=? LIMIT 1", (version,)).fetchone() is not None

    def all_hashes(self) -> set[str]:
        return {r[0] for r in self._conn().execute("SELECT hash FROM units")}

    def skipped(self, version: str) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._conn().execute(
            "SELECT hash, state, reason FROM units WHERE version=? AND state != 'ok'", (version,))]


class BuildingLayer(BaseLayer):
    always_current = False
    chunker_version = "1"
    cost = "built lazily per unit"

    def __init__(self, ctx: LayerContext):
        super().__init__(ctx)
        self.dir = ctx.layer_dir(self.name)
        self.manifest = Manifest(self.dir / "manifest.sqlite")
        self.state_files: list[SqliteFile] = [self.manifest.db]  # what ``recover`` checks
        self._other_repairs: list[Repair] = []  # stores set aside whole (``note_repair``)
        self._build_lock = threading.Lock()

    # -- damaged state files (lar.core.sqlite_repair) ---------------------------------------
    def sqlite_state(self, path: Path, setup, label: str, extra_check=None) -> SqliteFile:
        """An SQLite file of this layer's artefacts, opened (set aside and started afresh
        when damaged); when it is replaced, every unit is rebuilt lazily."""
        db = SqliteFile(path, label=f"the {self.name} layer's {label}", setup=setup,
                        extra_check=extra_check, on_reset=self.manifest.clear,
                        todo="The layer rebuilds it lazily: run `lar build` (or let the "
                             "background build catch up); until then it covers less.")
        db.open()
        return self.adopt_sqlite(db)

    def adopt_sqlite(self, db: SqliteFile) -> SqliteFile:
        """Check ``db`` (an artefact file made elsewhere) with the layer's own files; when it
        is replaced, every unit is rebuilt lazily."""
        db.on_reset = self.manifest.clear
        if db not in self.state_files:
            self.state_files.append(db)
        return db

    def recover(self, exc: BaseException) -> bool:
        """After ``exc``: set aside whichever of the layer's SQLite files it proves damaged
        (or follow a replacement made elsewhere). True when something was replaced."""
        if not isinstance(exc, sqlite3.DatabaseError):
            return False
        return any([bool(db.repair(exc)) for db in self.state_files])

    def repairs(self) -> list[Repair]:
        """The :class:`lar.core.sqlite_repair.Repair` records of this layer's files."""
        return sorted([r for db in self.state_files for r in db.repairs] + self._other_repairs,
                      key=lambda r: r.at)

    def note_repair(self, rep: Repair) -> None:
        """A store of the layer was set aside whole: every unit is rebuilt lazily."""
        self._other_repairs.append(rep)
        self.manifest.clear()

    def recovering(self, fn):
        """``fn()``, once more after an error that damaged state explains (and repaired)."""
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if not self.recover(exc):
                raise
        return fn()

    # -- what subclasses provide ------------------------------------------------------------
    def accepts(self, unit: Unit) -> bool:
        """Whether this layer indexes ``unit`` at all (by extension, size, ...)."""
        return True

    def skip_reason(self, unit: Unit) -> str | None:
        """A reason to skip ``unit`` without reading it (e.g. no grammar for its extension)."""
        return None

    def index_unit(self, unit: Unit, doc) -> dict[str, Any] | None:  # pragma: no cover
        raise NotImplementedError

    def drop(self, hashes: set[str]) -> None:
        """Forget the artefacts of units that are no longer live (default: nothing to do)."""

    # -- building in other processes (lar.distributed.ray_build) -----------------------------
    def remote_pass(self):
        """A picklable object whose ``run(unit, doc)`` computes in another process what
        ``index_unit`` computes for a unit (its model pass), or None (the default): the layer
        builds in this process only. ``index_payload`` then writes what it returned."""
        return None

    def needs_pass(self, unit: Unit) -> bool:
        """Whether ``unit`` needs the remote pass (False: building it here is cheap, e.g. its
        encoding is already stored by a layer sharing the pass)."""
        return True

    def index_payload(self, unit: Unit, doc, payload) -> dict[str, Any] | None:  # pragma: no cover
        """Write ``payload`` (the remote pass's result for ``unit``) as ``index_unit`` would."""
        raise NotImplementedError

    # -- versions, coverage, status ---------------------------------------------------------
    @property
    def build_version(self) -> str:
        """Layer version + chunker version + extractor versions: any change rebuilds lazily."""
        import hashlib

        x = hashlib.blake2b(self.ctx.extractor_versions.encode(), digest_size=3).hexdigest()
        return f"{self.version}+c{self.chunker_version}+x{x}"

    def applicable(self, scope: ScopeView) -> list[Unit]:
        return [u for u in scope.units() if self.accepts(u)]

    def built(self) -> dict[str, str]:
        """{hash: 'ok' | 'skipped' | 'failed'} for units built with the current version."""
        return self.recovering(lambda: self.manifest.states(self.build_version))

    def has_built(self) -> bool:
        """Cheap: has anything been built with the current version?"""
        return self.recovering(lambda: self.manifest.has_any(self.build_version))

    def build_stamp(self) -> tuple:
        """Cheap: equal stamps (on one thread) mean equal ``built()``, hence, for the same units,
        the same ``pending`` (what spare time checks before looking for work, lar.engine.spare)."""
        return self.recovering(lambda: (id(self.manifest), self.manifest.stamp(self.build_version)))

    def pending(self, units: Sequence[Unit]) -> list[Unit]:
        done = self.built()
        seen, out = set(), []
        for u in units:
            if u.hash not in done and u.hash not in seen and self.accepts(u):
                seen.add(u.hash)
                out.append(u)
        return out

    def coverage(self, scope: ScopeView) -> float:
        units = {u.hash for u in self.applicable(scope)}
        if not units:
            return 1.0
        done = self.built()
        return sum(1 for h in units if h in done) / len(units)

    def searchable(self, scope: ScopeView) -> set[str]:
        """Live, in-scope, built ('ok') hashes: what a search may return."""
        done = self.built()
        return {u.hash for u in self.applicable(scope) if done.get(u.hash) == "ok"}

    def status(self, scope: ScopeView) -> LayerStatus:
        return self.recovering(lambda: self._status(scope))

    def _status(self, scope: ScopeView) -> LayerStatus:
        units = {u.hash for u in self.applicable(scope)}
        done = self.built()
        built = sum(1 for h in units if h in done)
        notes = []
        bad = [r for r in self.manifest.skipped(self.build_version) if r[0] in units]
        for state in ("failed", "skipped"):
            rows = [r for r in bad if r[1] == state]
            if rows:
                reasons: dict[str, int] = {}
                for r in rows:
                    reasons[r[2]] = reasons.get(r[2], 0) + 1
                top = ", ".join(f"{why} ({n})" for why, n in
                                sorted(reasons.items(), key=lambda t: -t[1])[:3])
                notes.append(f"{len(rows)} units {state}: {top}")
        notes += [r.message() for r in self.repairs()[-2:]]
        notes = "; ".join(notes)
        return LayerStatus(
            name=self.name, version=self.build_version, roles=self.roles, origin=self.origin,
            granularity=self.granularity, coverage=(built / len(units)) if units else 1.0,
            query_format=self.query_format, cost=self.cost, units=len(units), built_units=built,
            notes=notes)

    # -- building ---------------------------------------------------------------------------
    def build_one(self, unit: Unit, payload: Any = None) -> str:
        """Index one unit now (idempotent per hash). Returns the manifest state. ``payload``:
        what the layer's remote pass computed for it (written by ``index_payload``), or the
        ``SkipUnit``/``RemoteUnitError`` the pass raised. An error that a damaged SQLite file
        explains repairs the file and builds the unit once more."""
        with self._build_lock:
            try:
                return self._build_unit(unit, False, payload)
            except sqlite3.DatabaseError as exc:
                if not self.recover(exc):
                    return self._failed(unit, exc)
            return self._build_unit(unit, True, payload)

    def _build_unit(self, unit: Unit, damage_fails: bool, payload: Any = None) -> str:
        try:
            why = self.skip_reason(unit)
            if why:
                raise SkipUnit(why)
            doc = self.ctx.reader.document(unit.hash, unit.path)
            if doc.skipped:
                raise SkipUnit(doc.skipped)
            if isinstance(payload, Exception):
                raise payload
            info = (self.index_unit(unit, doc) if payload is None
                    else self.index_payload(unit, doc, payload)) or {}
            self.manifest.mark(unit.hash, self.build_version, "ok", "", info)
            return "ok"
        except DeadlineExceeded:  # abandoned at the caller's deadline: still pending
            raise
        except SkipUnit as exc:
            self.manifest.mark(unit.hash, self.build_version, "skipped", str(exc))
            return "skipped"
        except RemoteUnitError as exc:
            self.manifest.mark(unit.hash, self.build_version, "failed", str(exc))
            return "failed"
        except sqlite3.DatabaseError as exc:
            if not damage_fails:
                raise
            return self._failed(unit, exc)
        except Exception as exc:  # one bad unit never fails the build
            return self._failed(unit, exc)

    def _failed(self, unit: Unit, exc: Exception) -> str:
        self.manifest.mark(unit.hash, self.build_version, "failed", f"{type(exc).__name__}: {exc}")
        return "failed"

    async def build(self, units: Sequence[Unit], cancel: threading.Event) -> None:
        for u in units:
            if cancel.is_set():
                return
            await asyncio.to_thread(self.build_one, u)

    def collect_garbage(self, live_hashes: set[str]) -> int:
        """Drop artefacts and manifest rows of units that are no longer live. ``live_hashes``
        may be stale (read before a build pass): a unit another process indexed since then and
        built into this shared state is live, so every candidate is checked against the file
        index now, after the manifest was read (its row exists, so its file was recorded
        before this check: it is seen live and kept)."""
        def collect() -> int:
            dead = self.manifest.all_hashes() - live_hashes
            if dead:
                dead -= {h for h, paths in self.ctx.index.paths_for_hashes(dead).items() if paths}
            if dead:
                self.drop(dead)
                self.manifest.forget(dead)
            return len(dead)

        return self.recovering(collect)


def damage_report(layer: Any, exc: BaseException) -> str | None:
    """When ``exc`` (raised by ``layer`` in a search) came from a damaged SQLite file of the
    layer: the file is set aside now, and this says what happened and what to do (the run's
    reason, instead of a crash report). None otherwise."""
    recover = getattr(layer, "recover", None)
    if recover is None or not recover(exc):
        return None
    done = layer.repairs()
    what = done[-1].message() if done else f"a damaged file of the layer was replaced ({exc})"
    return f"layer {layer.name!r}: {what} This search ran without it."
