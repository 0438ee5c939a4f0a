"""Typed errors. Every error lar raises on bad input is a ``LarError`` whose message says
what was wrong and what to do about it."""
from __future__ import annotations


class LarError(Exception):
    """Base class of every error lar raises on purpose."""


class ConfigError(LarError, ValueError):
    """An argument or setting is invalid (unknown fusion policy, bad timebox, ...)."""


class ScopeError(LarError, PermissionError):
    """A path lies outside the engine's root, or a scope pattern is invalid."""


class UnknownLayerError(LarError, KeyError):
    """A layer name was given that is not registered."""

    def __init__(self, name: str, known: list[str] | tuple[str, ...]):
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(
            f"unknown layer {name!r}; known layers: {', '.join(self.known) or '(none)'}"
        )

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class RegistrationError(LarError, TypeError):
    """A layer plugin failed validation at registration."""


class QueryError(LarError, ValueError):
    """A layer could not understand its query (invalid regex, bad pattern, wrong form)."""

    def __init__(self, layer: str, message: str):
        self.layer = layer
        super().__init__(f"layer {layer!r}: {message}")


class LayerFailedError(LarError, RuntimeError):
    """Raised by ``search(..., strict=True)`` when a layer failed."""


class HitNotFoundError(LarError, KeyError):
    """A hit id does not name any known unit."""

    def __str__(self) -> str:
        return self.args[0]


class UnreadablePathError(HitNotFoundError):
    """A path inside the root names something that cannot be read as a file: a symlink loop,
    a file without read permission, a path longer than the system allows."""


class StaleSpanError(LarError):
    """The file behind a hit changed and the span's text no longer exists in it."""


class StateLockedError(LarError, TimeoutError):
    """Another process holds the state directory's writer lock."""


class DeadlineExceeded(LarError, TimeoutError):
    """Work done for a call (a unit's encoding, a build step) passed the call's deadline and was
    abandoned (``lar.core.deadline``): nothing of it was stored; a later call redoes it."""


class CorruptStateError(LarError):
    """A state file (index database, sidecar, manifest) failed its integrity check."""


class MissingExtraError(LarError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, module: str, extra: str):
        self.module = module
        self.extra = extra
        super().__init__(
            f"this feature needs the optional package {module!r}; "
            f"install it with: pip install 'lar[{extra}]'"
        )


def require(module: str, extra: str):
    """Import an optional dependency lazily, or raise ``MissingExtraError`` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(module, extra) from exc


class RepairedStateWarning(UserWarning):
    """A damaged state file (an SQLite database lar derives from the folder) was set aside as
    ``<name>.corrupt-<time>`` and started afresh; what it held is rebuilt lazily. The message
    names the file, the damage and what to do."""
