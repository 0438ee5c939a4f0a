"""lar's notebook workbench: ``%load_ext lar`` (or ``%load_ext lar_magics``) adds the ``%lar``
and ``%%lar`` magics; the widgets work on any engine.

    %lar open --demo                      # or %lar open PATH [--state DIR] [--config JSON]
    %lar search "save the raw data" --timebox 200ms --k 10 --layers grep,bm25
    _lar.to_polars()                      # the result is bound to _lar (--as NAME)

Widgets: ``ResultsView`` (``Results.widget()``), ``StatusView(engine)``, ``AnytimeView(engine,
query)``, ``grid(frame)`` (a sortable, filterable table); the explain and trace replay views live
in ``explain_view`` and ``replay_view``. ``ensure_built(engine, layer)`` builds a layer before a
cell relies on it; ``require_hits(engine, result, layer)`` says why a layer found nothing. See
docs/notebooks.md.
"""
from __future__ import annotations

from lar_magics.errors import MagicError, MagicUsageError, NoEngineError, ViewUnavailableError
from lar_magics.readiness import NoLayerHitsError, empty_reason, ensure_built, require_hits
from lar_magics.results import Results, ResultsList, search
from lar_magics.session import SESSION, current_engine, open_demo, use

__all__ = ["AnytimeView", "MagicError", "MagicUsageError", "NoEngineError", "NoLayerHitsError",
           "Results", "ResultsList", "ResultsView", "SESSION", "StatusView", "ViewUnavailableError",
           "current_engine", "empty_reason", "ensure_built", "grid", "load_ipython_extension",
           "offline_charts", "open_demo", "require_hits", "search", "use"]


def load_ipython_extension(ipython) -> None:
    """``%load_ext lar``: register ``%lar`` / ``%%lar``."""
    from lar_magics.magics import LarMagics

    ipython.register_magics(LarMagics)
    offline_charts()


def offline_charts() -> str | None:
    """Draw altair charts as inline SVG (vl-convert), which needs no network and no frontend
    extension: altair's default renderer loads Vega from a CDN, so its charts stay blank in an
    offline JupyterLab. Only switches from altair's ``default`` renderer; returns the active one."""
    try:
        import altair as alt
        import vl_convert  # noqa: F401
    except ImportError:
        return None
    if alt.renderers.active == "default":
        alt.renderers.enable("svg")
    return alt.renderers.active


_LAZY = {"ResultsView": "results_view", "StatusView": "status_view", "AnytimeView": "anytime_view",
         "grid": "results_table"}
_MODULES = ("anytime_view", "charts", "explain_view", "labels", "magics", "parsing", "readiness",
            "render", "replay_view", "results_table", "results_view", "status_view", "views")


def __getattr__(name: str):  # the widgets import ipywidgets: load them on first use
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'lar_magics' has no attribute {name!r}")
