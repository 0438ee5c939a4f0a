"""What the embedding layers (``static``, ``dense``, ``late``) share: settings read from the
engine config (flat ``<layer>_<key>`` keys, or the options of a named variant), a model that is
resolved lazily (a missing extra or a bad checkpoint path is reported, never fatal for the other
layers), and named variants (``config["layer_variants"] = {"late-colbert": {"base": "late",
"model": "/path/to/ckpt"}}``) that run side by side as separately named layers.
"""
from __future__ import annotations

import importlib.util
from typing import Any

from lar.core.building import BuildingLayer, SkipUnit
from lar.core.errors import ConfigError, LarError, MissingExtraError
from lar.core.layer import LayerContext, Unit
from lar.layers.kits.device import layer_device, torch_device

__all__ = ["EmbeddingLayer", "ModelProblem"]

# units larger than this (extracted text bytes) are skipped by the model layers: encoding a
# 16 MB log at ~5k tokens/s would hold the builder for minutes
DEFAULT_MAX_UNIT_BYTES = 2 * 1024 * 1024


class ModelProblem(LarError):
    """Why the layer's model cannot be used (the message says what to do)."""


class EmbeddingLayer(BuildingLayer):
    roles = frozenset({"generate"})
    origin = "text"
    granularity = "chunk"
    base: str = ""  # the registered layer a variant derives from
    preset: dict[str, Any] | None = None  # a variant's options
    defaults: dict[str, Any] = {}
    extra_modules: tuple[str, ...] = ("torch", "sentence_transformers", "transformers")

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        """``<name>_<option>`` for each of its options (a variant takes its options from its preset)."""
        return frozenset() if cls.preset is not None else frozenset(f"{cls.name}_{k}" for k in cls.defaults)

    def __init__(self, ctx: LayerContext):
        self.options = self.read_options(dict(ctx.config or {}))
        self._problem: LarError | None = None
        super().__init__(ctx)

    # -- settings ---------------------------------------------------------------------------
    @classmethod
    def read_options(cls, config: dict[str, Any]) -> dict[str, Any]:
        if cls.preset is not None:
            given = {k: v for k, v in cls.preset.items() if k != "base"}
        else:
            prefix = f"{cls.name}_"
            given = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        unknown = sorted(set(given) - set(cls.defaults))
        if unknown:
            raise ConfigError(f"layer {cls.name!r}: unknown option(s) {unknown}; valid: "
                              f"{sorted(cls.defaults)}")
        opts = {**cls.defaults, **given}
        cls.check_options(opts)
        return opts

    @classmethod
    def check_options(cls, opts: dict[str, Any]) -> None:
        mub = opts.get("max_unit_bytes", DEFAULT_MAX_UNIT_BYTES)
        if isinstance(mub, bool) or not isinstance(mub, int) or mub < 1:
            raise ConfigError(f"layer {cls.name!r}: max_unit_bytes must be a positive integer")

    @classmethod
    def variant(cls, name: str, options: dict[str, Any]) -> type:
        """A separately named layer class with its own options (model, levers, device)."""
        if not isinstance(options, dict):
            raise ConfigError(f"layer variant {name!r}: options must be a mapping")
        sub = type(f"{cls.__name__}_{name.replace('-', '_')}", (cls,),
                   {"name": name, "preset": dict(options), "base": cls.name})
        sub.read_options({})  # validate now: a bad variant is a clear error at open
        return sub

    # -- the model, resolved lazily ---------------------------------------------------------
    def missing_extra(self) -> MissingExtraError | None:
        for mod in self.extra_modules:
            if importlib.util.find_spec(mod) is None:
                return MissingExtraError(mod, "models")
        return None

    def problem(self) -> LarError | None:
        """Why the model cannot be used now (missing extra, bad path), else None."""
        return self._problem or self.missing_extra()

    def warm(self) -> None:
        """Load the model now (seconds), so the first search's timebox is not spent on it."""
        self.fail_if_unusable()
        self.dim()

    def fail_if_unusable(self) -> None:
        p = self.problem()
        if p is not None:
            raise p

    def skip_reason(self, unit: Unit) -> str | None:
        p = self.problem()
        if p is not None:
            return str(p)
        if unit.size > self.options.get("max_unit_bytes", DEFAULT_MAX_UNIT_BYTES):
            return (f"larger than {self.name}_max_unit_bytes="
                    f"{self.options.get('max_unit_bytes', DEFAULT_MAX_UNIT_BYTES)}")
        return None

    def compute_device(self) -> str:
        """Where the layer's model work runs, for ``status``: the encoder on the layer's
        ``device`` option, else the CPU (the encoders' default); the chunk scan is numpy, here
        or on the layer's ``shards`` Ray actors."""
        shards = self.options.get("shards") or 0
        return layer_device(encoder=torch_device(self.options.get("device"), default_cpu=True),
                            scan=f"cpu on {shards} Ray actors" if shards else "cpu")

    def resident_status(self):
        """What the layer keeps on its scan device (``LayerStatus.resident``), or None."""
        return None

    def status(self, scope):
        from dataclasses import replace

        st = super().status(scope)
        p = self.problem()
        if p is None:  # a layer that cannot run reports no device
            return replace(st, device=self.compute_device(), resident=self.resident_status())
        return replace(st, notes="; ".join(x for x in [st.notes, f"unusable: {p}"] if x))

    def scope_state(self, scope) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """``(paths, built, ok)``: {hash: path} of the applicable units in scope, their
        manifest states, and the hashes built 'ok' (what a search may score)."""
        paths = {u.hash: u.path for u in self.applicable(scope)}
        done = self.built()
        return paths, done, {h for h in paths if done.get(h) == "ok"}

    @staticmethod
    def text_of(doc) -> bytes:
        if not doc.text or not doc.text.strip():
            raise SkipUnit("no text")
        return doc.text
