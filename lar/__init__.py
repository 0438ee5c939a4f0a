"""lar: Layered Anytime Retrieval. ``lar.open(folder).search("query", timebox=0.5)``."""
from __future__ import annotations

from lar.engine.facade import Engine, open  # noqa: A004
from lar.core.errors import (ConfigError, HitNotFoundError, LarError, LayerFailedError, MissingExtraError,
                     QueryError, RegistrationError, ScopeError, StaleSpanError, StateLockedError,
                     UnknownLayerError)
from lar.core.building import BuildingLayer, SkipUnit
from lar.core.layer import BaseLayer, Budget, Candidate, Layer, LayerContext, ScopeView, Unit
from lar.core.registry import register_layer, registered_layers
from lar.core.result import Fetched, InventoryItem, Result, Status
from lar.core.scope import Scope
from lar.core.types import Evidence, Hit, LayerRun, LayerStatus, RunState, Span
from lar.record.calllog import CallLog, count_tokens
from lar.record.replay import ReplayReport, StepDiff, replay
from lar.record.trace import TraceError, TraceRecorder, load_trace
from lar.core.version import __version__
from lar.apps.screening import screen  # the independent original-text route: lar.screen(eng, screener)



def load_ipython_extension(ipython):  # `%load_ext lar`
    try:
        from lar_magics import load_ipython_extension as _load
    except ImportError as exc:
        raise MissingExtraError("lar_magics", "notebook") from exc
    _load(ipython)


__all__ = [
    "BaseLayer", "Budget", "BuildingLayer", "CallLog", "Candidate", "ConfigError", "Engine", "Evidence", "Fetched",
    "Hit",
    "HitNotFoundError", "InventoryItem", "LarError", "Layer", "LayerContext", "LayerFailedError",
    "LayerRun", "LayerStatus", "MissingExtraError", "QueryError", "RegistrationError", "Result",
    "ReplayReport", "RunState", "Scope", "ScopeError", "ScopeView", "SkipUnit", "Span", "StaleSpanError",
    "StateLockedError", "Status", "StepDiff", "TraceError", "TraceRecorder", "Unit",
    "UnknownLayerError", "__version__", "count_tokens", "load_trace", "open", "register_layer",
    "registered_layers", "replay", "screen",
]
