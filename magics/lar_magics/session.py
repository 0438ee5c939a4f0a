"""The notebook's current engine: ``%lar open`` sets it, every other magic and widget uses it.

``use(engine)`` attaches an engine made with ``lar.open`` (it is then not closed by
``%lar close``); ``current_engine()`` returns it or raises ``NoEngineError`` saying how to open
one. ``open_demo()`` assembles the embedded demo corpus (``lar.apps.demo``) as ``lar demo`` does and
opens it, so a notebook after ``make demo`` reuses the demo's built state.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

import lar

from lar_magics.errors import MagicError, NoEngineError

ENV_WORKDIR = "LAR_NOTEBOOK_WORKDIR"  # where the demo corpus lives (default: as `lar demo`)


class Session:
    """The engine the magics use, the last search result and default search flags."""

    def __init__(self) -> None:
        self.engine: lar.Engine | None = None
        self.owned = False  # opened by %lar open (so %lar close closes it)
        self.last = None  # the last Results (lar_magics.results.Results)
        self.defaults: list[str] = []  # flags put before every %lar search / anytime line

    def open(self, path: str | os.PathLike, state: str | os.PathLike | None = None,
             config: Mapping[str, Any] | None = None, scan: bool = True,
             background: bool = False) -> lar.Engine:
        eng = lar.open(path, state, config=config, scan=scan, background=background)
        self.close()
        self.engine, self.owned, self.last = eng, True, None
        return eng

    def use(self, engine: lar.Engine) -> lar.Engine:
        if not isinstance(engine, lar.Engine):
            raise MagicError(f"use() needs a lar.Engine (from lar.open(...)), got {type(engine).__name__}")
        if engine is not self.engine:
            self.close()
        self.engine, self.owned, self.last = engine, False, None
        return engine

    def require(self) -> lar.Engine:
        if self.engine is None:
            raise NoEngineError()
        return self.engine

    def close(self) -> None:
        eng, owned = self.engine, self.owned
        self.engine, self.owned, self.last = None, False, None
        if eng is not None and owned:
            eng.close()


SESSION = Session()


def current_engine() -> lar.Engine:
    """The engine ``%lar`` magics use (``NoEngineError`` when none is open)."""
    return SESSION.require()


def use(engine: lar.Engine) -> lar.Engine:
    """Make ``engine`` the one the magics and widgets use."""
    return SESSION.use(engine)


def demo_paths(workdir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(corpus, state) of the demo: ``<workdir>/.lar-demo/{corpus,state}``; ``workdir`` defaults
    to ``$LAR_NOTEBOOK_WORKDIR``, else where ``lar demo`` (``make demo``) puts it."""
    from lar.apps.demo import default_workdir

    base = Path(workdir or os.environ.get(ENV_WORKDIR) or default_workdir()).expanduser()
    return base / ".lar-demo" / "corpus", base / ".lar-demo" / "state"


def open_demo(workdir: str | os.PathLike | None = None, config: Mapping[str, Any] | None = None
              ) -> lar.Engine:
    """Assemble the demo corpus (only changed files are written) and open it."""
    from lar.apps.demo import assemble

    corpus, state = demo_paths(workdir)
    corpus.mkdir(parents=True, exist_ok=True)
    assemble(corpus)
    return SESSION.open(corpus, state, config=config)


def read_config(value: Any) -> dict[str, Any] | None:
    """An engine config from a mapping, JSON text (``'{"freshness": 60}'``) or a JSON file."""
    if value is None or isinstance(value, Mapping):
        return dict(value) if value is not None else None
    text = str(value).strip()
    if not text.startswith("{"):
        p = Path(text).expanduser()
        if not p.is_file():
            raise MagicError(f"--config {text!r}: give a JSON object such as '{{\"freshness\": 60}}' "
                             "or the path of a JSON file")
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise MagicError(f"--config: cannot read {str(p)!r}: {exc}") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MagicError(f"--config is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise MagicError("--config must be a JSON object, e.g. '{\"freshness\": 60}'")
    return cfg


@contextlib.contextmanager
def as_magic(engine: Any):
    """Calls inside are recorded with source "magic" (when the engine records traces)."""
    ctx = getattr(engine, "trace_source", None)
    if ctx is None:
        yield
        return
    with ctx("magic"):
        yield


@contextlib.contextmanager
def unrecorded():
    """Calls inside are not recorded: a widget's periodic polling is not the user's call."""
    try:
        from lar.record.trace import call_context
    except ImportError:
        yield
        return
    with call_context(record=False):
        yield


__all__ = ["ENV_WORKDIR", "SESSION", "Session", "as_magic", "current_engine", "demo_paths",
           "open_demo", "read_config", "unrecorded", "use"]
