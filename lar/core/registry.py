"""The layer registry. Built-in layers register through the ``lar.layers`` entry-point group
exactly as third-party plugins do; ``register_layer`` adds one at run time (same validation).

A registered factory is a class (or callable) taking a ``LayerContext`` and returning a layer.
Validation happens at registration and names the plugin and what is wrong with it.
"""
from __future__ import annotations

import inspect
import threading
from importlib.metadata import entry_points
from typing import Any, Callable

from lar.core.errors import RegistrationError
from lar.core.types import ROLES

ENTRY_POINT_GROUP = "lar.layers"
_REQUIRED_METHODS = ("applies", "status", "search", "build")

_lock = threading.Lock()
_registry: dict[str, Callable[..., Any]] = {}
_sources: dict[str, str] = {}
_loaded = False


def validate_layer(obj: Any, *, plugin: str) -> None:
    """Check a layer class or instance against the protocol; raise RegistrationError if not."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name or not name.replace("-", "_").replace("_", "a").isalnum():
        raise RegistrationError(
            f"layer plugin {plugin!r}: attribute 'name' must be a non-empty identifier-like "
            f"string, got {name!r}")
    version = getattr(obj, "version", None)
    if not isinstance(version, str) or not version:
        raise RegistrationError(f"layer plugin {plugin!r} ({name}): 'version' must be a non-empty string")
    roles = getattr(obj, "roles", None)
    try:
        roles = frozenset(roles)
    except TypeError:
        roles = None
    if not roles or not roles <= ROLES:
        raise RegistrationError(
            f"layer plugin {plugin!r} ({name}): 'roles' must be a non-empty subset of "
            f"{sorted(ROLES)}, got {getattr(obj, 'roles', None)!r}")
    for meth in _REQUIRED_METHODS:
        fn = getattr(obj, meth, None)
        if not callable(fn):
            raise RegistrationError(f"layer plugin {plugin!r} ({name}): missing method {meth!r}")
    for meth in ("search", "build"):
        if not inspect.iscoroutinefunction(getattr(obj, meth)):
            raise RegistrationError(
                f"layer plugin {plugin!r} ({name}): {meth!r} must be an async def (coroutine function)")
    params = list(inspect.signature(getattr(obj, "search")).parameters)
    if inspect.isclass(obj) and params and params[0] == "self":
        params = params[1:]
    if params[:3] != ["query", "scope", "budget"] or "candidates" not in params:
        raise RegistrationError(
            f"layer plugin {plugin!r} ({name}): search must take (query, scope, budget, "
            f"candidates=None), got {params}")


def register_layer(factory: Callable[..., Any], *, replace: bool = False, source: str = "runtime") -> str:
    """Register a layer factory (a class with the protocol's attributes). Returns its name."""
    _ensure_loaded()
    plugin = getattr(factory, "__qualname__", repr(factory))
    validate_layer(factory, plugin=f"{source}:{plugin}")
    name = factory.name
    with _lock:
        if name in _registry and not replace and _registry[name] is not factory:
            raise RegistrationError(
                f"layer name {name!r} is already registered by {_sources[name]}; layer names are "
                "unique and stable: choose another name")
        _registry[name] = factory
        _sources[name] = f"{source}:{plugin}"
    return name


def unregister_layer(name: str) -> None:
    with _lock:
        _registry.pop(name, None)
        _sources.pop(name, None)


def _ensure_loaded() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        _loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            factory = ep.load()
        except Exception as exc:  # a broken plugin must not break the engine
            raise RegistrationError(
                f"layer plugin {ep.name!r} ({ep.value}) failed to import: {exc}") from exc
        if getattr(factory, "name", None) != ep.name:
            raise RegistrationError(
                f"layer plugin entry point {ep.name!r} ({ep.value}) has name "
                f"{getattr(factory, 'name', None)!r}; the entry-point name must equal the layer name")
        register_layer(factory, source=f"entry-point {ep.value}")


def registered_layers() -> dict[str, Callable[..., Any]]:
    _ensure_loaded()
    with _lock:
        return dict(_registry)
