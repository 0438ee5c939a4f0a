"""lar: Layered Anytime Retrieval. ``lar.open(folder).search("query", timebox=0.5)``."""
from __future__ import annotations

from lar.engine import Engine, open  # noqa: A004
from lar.errors import (ConfigError, HitNotFoundError, LarError, LayerFailedError, MissingExtraError,
                     QueryError, RegistrationError, ScopeError, StaleSpanError, StateLockedError,
                     UnknownLayerError)
from lar.layer import BaseLayer, Budget, Candidate, Layer, LayerContext, ScopeView, Unit
from lar.registry import register_layer, registered_layers
from lar.result import Fetched, InventoryItem, Result, Status
from lar.scope import Scope
from lar.types import Evidence, Hit, LayerRun, LayerStatus, RunState, Span
from lar.calllog import CallLog, count_tokens
from lar.trace import ReplayReport, StepDiff, TraceError, TraceRecorder, load_trace  # replay: lar.trace.replay

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # `%load_ext lar`
    try:
        from lar_magics import load_ipython_extension as _load
    except ImportError as exc:
        raise MissingExtraError("lar_magics", "notebook") from exc
    _load(ipython)


__all__ = [
    "BaseLayer", "Budget", "CallLog", "Candidate", "ConfigError", "Engine", "Evidence", "Fetched",
    "Hit",
    "HitNotFoundError", "InventoryItem", "LarError", "Layer", "LayerContext", "LayerFailedError",
    "LayerRun", "LayerStatus", "MissingExtraError", "QueryError", "RegistrationError", "Result",
    "ReplayReport", "RunState", "Scope", "ScopeError", "ScopeView", "Span", "StaleSpanError",
    "StateLockedError", "Status", "StepDiff", "TraceError", "TraceRecorder", "Unit",
    "UnknownLayerError", "count_tokens", "load_trace", "open", "register_layer",
    "registered_layers",
]
