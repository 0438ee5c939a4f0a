"""Lazy doors to the explain and replay views (``explain_view.py``, ``replay_view.py``), so
that the magics load even where a view's module or its dependencies are missing."""
from __future__ import annotations

import importlib
from typing import Any

from lar_magics.errors import ViewUnavailableError


def _load(module: str, function: str, what: str):
    try:
        mod = importlib.import_module(f"lar_magics.{module}")
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise ViewUnavailableError(
            f"the {what} view is not available here (lar_magics.{module} could not be imported: "
            f"{missing}); install the notebook extra: pip install 'lar[notebook]'") from exc
    fn = getattr(mod, function, None)
    if fn is None:
        raise ViewUnavailableError(f"lar_magics.{module} has no {function}(); update lar")
    return fn


def explain(engine, result: Any, hit_id: str):
    """``explain_view(engine, result, hit_id)``: why a late-interaction hit ranked where it did.
    ``result`` may be a ``Results`` (its ``lar.Result`` is passed on) or a ``lar.Result``."""
    fn = _load("explain_view", "explain_view", "explain")
    return fn(engine, getattr(result, "result", result), hit_id)


def replay(engine, trace_path: str):
    """``replay_view(engine, trace_path)``: step through a recorded trace."""
    fn = _load("replay_view", "replay_view", "trace replay")
    return fn(engine, trace_path)


__all__ = ["explain", "replay"]
