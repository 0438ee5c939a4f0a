"""The engine's configuration, read and checked once, at ``lar.open``.

``config`` is one flat mapping. Keys of the engine itself are :data:`ENGINE_KEYS`; a layer's own
options are ``<layer>_<option>`` keys, which the layer declares (``Layer.config_keys()``; a layer
that declares none owns every key with its name as prefix). Any other key is refused with the
list of known ones, so a typo (``late_modle``) is an error at open, not a silently ignored
setting. A layer still checks its own values when it is built.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from lar.core.errors import ConfigError

#: the engine's own keys and what each does
ENGINE_KEYS: Mapping[str, str] = MappingProxyType({
    "fusion": "the default fusion policy of searches that name none",
    "fusion_model": "the adaptive policy's fitted model: a JSON path or a mapping",
    "fusion_partial": "'guard' (a run over part of the scope weighs by how much of the complete "
                      "lists it scored) or 'keep'",
    "fusion_units": "'unit' (adaptive fuses each layer's evidence per unit) or 'span' (per place)",
    "layer_variants": "separately named layers from a registered one: {name: {'base': layer, ...}}",
    "freshness": "seconds a stat pass stays fresh for building layers (0: every search)",
    "session": "the session name calls are logged under",
    "call_log": "keep the call log (<state>/calls.sqlite): True or False",
    "call_log_follow_up_s": "seconds within which a call counts as a follow-up of the previous",
    "ray_address": "the Ray cluster of sharded scans and Ray builds: 'auto', 'host:port' or "
                   "'ray://host:port' (default: the running one, else a local one; docs/ray.md)",
})


@dataclass(frozen=True)
class EngineConfig:
    """The checked configuration: the engine's settings as attributes, and every key as given
    (``raw``, what layers read their options from)."""

    raw: Mapping[str, Any] = field(default_factory=dict)
    fusion: str | None = None
    fusion_model: Any = None
    partial_guard: bool = True
    by_unit: bool = True
    freshness: float = 0.0
    session: str | None = None
    call_log: bool = True
    call_log_follow_up_s: float | None = None
    layer_variants: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, config: Mapping[str, Any] | None, layer_keys: Mapping[str, Iterable[str] | None]
             = MappingProxyType({})) -> "EngineConfig":
        """Check ``config`` against :data:`ENGINE_KEYS` and ``layer_keys`` (``{layer name: its
        declared keys, or None for "every key with my prefix"}``)."""
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of settings, got {type(config).__name__}")
        declared: set[str] = set(ENGINE_KEYS)
        prefixes = []
        for name, keys in layer_keys.items():
            if keys is None:
                prefixes.append(f"{name}_")
            else:
                declared.update(keys)
        unknown = sorted(str(k) for k in config
                         if not isinstance(k, str) or (k not in declared and not k.startswith(tuple(prefixes))))
        if unknown:
            known = sorted(declared) + [p + "*" for p in sorted(prefixes)]
            raise ConfigError(f"unknown config key(s) {', '.join(repr(k) for k in unknown)}; known: "
                              f"{', '.join(known)}")
        c = dict(config)
        fusion = c.get("fusion")
        if fusion is not None and (not isinstance(fusion, str) or not fusion):
            raise ConfigError(f"config 'fusion' must be a policy name, got {fusion!r}")
        model = c.get("fusion_model")
        if model is not None and not isinstance(model, (str, os.PathLike, Mapping)) and not hasattr(model, "weights_for"):
            raise ConfigError(f"config 'fusion_model' must be a path, a mapping or a FusionModel, got {model!r}")
        partial = c.get("fusion_partial", "guard")
        if partial not in ("guard", "keep"):
            raise ConfigError(f"config 'fusion_partial' must be 'guard' or 'keep', got {partial!r}")
        units = c.get("fusion_units", "unit")
        if units not in ("unit", "span"):
            raise ConfigError(f"config 'fusion_units' must be 'unit' or 'span', got {units!r}")
        freshness = _seconds(c, "freshness", 0.0)
        follow = c.get("call_log_follow_up_s")
        if follow is not None:
            follow = _seconds(c, "call_log_follow_up_s", 0.0)
        session = c.get("session")
        if session is not None and (not isinstance(session, str) or not session):
            raise ConfigError(f"config 'session' must be a non-empty string, got {session!r}")
        call_log = c.get("call_log", True)
        if not isinstance(call_log, bool):
            raise ConfigError(f"config 'call_log' must be True or False, got {call_log!r}")
        ray_address = c.get("ray_address")
        if ray_address is not None and (not isinstance(ray_address, str) or not ray_address.strip()):
            raise ConfigError(f"config 'ray_address' must be 'auto', 'host:port' or "
                              f"'ray://host:port', got {ray_address!r}")
        variants = c.get("layer_variants") or {}
        if not isinstance(variants, Mapping):
            raise ConfigError("config 'layer_variants' must map layer names to {'base': ..., options}")
        return cls(MappingProxyType(c), fusion, model, partial == "guard", units == "unit", freshness,
                   session, call_log, follow, MappingProxyType(dict(variants)))

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)


def _seconds(c: Mapping[str, Any], key: str, default: float) -> float:
    v = c.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ConfigError(f"config {key!r} must be a number of seconds >= 0, got {v!r}")
    return float(v)


__all__ = ["ENGINE_KEYS", "EngineConfig"]
