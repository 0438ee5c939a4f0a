"""Derived views (seed section 5.6): texts about a unit (summaries, generated questions,
descriptions, docstrings, headings) produced once per (unit hash, generator name, model,
prompt version) in a central cache under ``<state>/derived`` and indexed by layers of origin
``derived`` (``lar.layers.derived.layer``). Every derived text points to the source spans it came from.

* ``DerivedText``, ``Generator``, ``GeneratorKey``, ``GeneratorError``: the values (``types``).
* ``ExtractiveGenerator``: the built-in offline generator (no model; ``extractive``).
* ``CallableGenerator``, ``SamplingGenerator``, ``resolve_generator``: plug in a callable (an
  LLM) or a client's model through sampling (``plug``).
* ``DerivedCache``: the central cache (``cache``); ``DerivedStore``: a layer's per-unit rows.
"""
from __future__ import annotations

from lar.layers.derived.cache import DerivedCache
from lar.layers.derived.extractive import ExtractiveGenerator
from lar.layers.derived.plug import (SAMPLING_PROMPT, SAMPLING_PROMPT_VERSION, CallableGenerator, SamplingGenerator,
                   parse_reply, resolve_generator)
from lar.layers.derived.store import DerivedStore
from lar.layers.derived.types import DerivedText, Generator, GeneratorError, GeneratorKey

__all__ = ["CallableGenerator", "DerivedCache", "DerivedStore", "DerivedText",
           "ExtractiveGenerator", "Generator", "GeneratorError", "GeneratorKey",
           "SAMPLING_PROMPT", "SAMPLING_PROMPT_VERSION", "SamplingGenerator", "parse_reply",
           "resolve_generator"]
