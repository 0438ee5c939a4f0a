"""The values of derived views: ``DerivedText``, the ``Generator`` protocol and its cache key.

A *derived text* is model- or rule-produced text about a unit (a summary, a generated question,
a description, a docstring, a heading with its first sentence) that points back to the byte
spans of the unit's text it was produced from. Spans are ``(start, end)`` byte offsets, end
exclusive, into the unit's text (the extracted text for PDF, notebooks and HTML), the same
coordinates every lar hit uses.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, runtime_checkable

from lar.core.errors import LarError

MAX_TEXT_CHARS = 4000
_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


class GeneratorError(LarError, ValueError):
    """A generator produced something that is not a valid derived text (empty text, a span
    outside the unit, a wrong type), or could not be loaded from the configuration."""


@dataclass(frozen=True, slots=True)
class DerivedText:
    """One derived text and the source spans (byte offsets into the unit's text) it came from.

    ``source_spans`` is non-empty; the first span is the most specific one (a hit points there).
    ``kind`` is a short lower-case word: "summary", "question", "description", "docstring",
    "signature", "heading", "sentence", ... ``text`` is stripped and at most
    ``MAX_TEXT_CHARS`` characters (longer texts are cut)."""

    text: str
    kind: str
    source_spans: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise GeneratorError(f"a derived text must be a non-empty string, got {self.text!r}")
        text = self.text.strip()
        if len(text) > MAX_TEXT_CHARS:
            text = text[: MAX_TEXT_CHARS - 1] + "…"
        object.__setattr__(self, "text", text)
        if not isinstance(self.kind, str) or not _KIND.match(self.kind):
            raise GeneratorError(
                f"a derived text's kind must be a short lower-case word such as 'summary' or "
                f"'question', got {self.kind!r}")
        try:
            spans = tuple((s, e) for s, e in self.source_spans)
        except (TypeError, ValueError):
            raise GeneratorError(
                f"source_spans must be a sequence of (start, end) pairs, got {self.source_spans!r}"
            ) from None
        if not spans:
            raise GeneratorError(f"derived text {text[:60]!r} has no source span; every derived "
                                 "text must point to the bytes it came from")
        for s, e in spans:
            if isinstance(s, bool) or isinstance(e, bool) or not isinstance(s, int) \
                    or not isinstance(e, int) or s < 0 or e <= s:
                raise GeneratorError(f"invalid source span ({s!r}, {e!r}) of derived text "
                                     f"{text[:60]!r}: need integers 0 <= start < end")
        object.__setattr__(self, "source_spans", spans)

    @property
    def span(self) -> tuple[int, int]:
        """The most specific source span (the first)."""
        return self.source_spans[0]

    def check_bounds(self, length: int) -> None:
        """Raise ``GeneratorError`` unless every source span lies within ``length`` bytes."""
        for s, e in self.source_spans:
            if e > length:
                raise GeneratorError(
                    f"source span ({s}, {e}) of derived text {self.text[:60]!r} ends past the "
                    f"unit's text ({length} bytes)")

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind,
                "source_spans": [[s, e] for s, e in self.source_spans]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "DerivedText":
        if not isinstance(d, Mapping):
            raise GeneratorError(f"a stored derived text must be an object, got {type(d).__name__}")
        try:
            return cls(d["text"], d["kind"], tuple(tuple(x) for x in d["source_spans"]))
        except (KeyError, TypeError) as exc:
            raise GeneratorError(f"malformed stored derived text ({exc!r})") from None


@runtime_checkable
class Generator(Protocol):
    """Produces the derived texts of one unit.

    ``name``, ``model`` and ``prompt_version`` key the central cache: a generator is called once
    per (unit hash, name, model, prompt_version). ``extractive`` says whether the texts are
    copied from the unit (rules, no model) rather than written by a model."""

    name: str
    model: str
    prompt_version: str
    extractive: bool

    def generate(self, unit_text: str | bytes, *, path: str, document: Any) -> list[DerivedText]: ...


@dataclass(frozen=True, slots=True)
class GeneratorKey:
    """What the cache is keyed by, besides the unit hash."""

    name: str
    model: str
    prompt_version: str
    extractive: bool = False

    def __post_init__(self) -> None:
        for field_name in ("name", "model", "prompt_version"):
            val = getattr(self, field_name)
            if not isinstance(val, str) or not val.strip():
                raise GeneratorError(f"generator {field_name} must be a non-empty string, got {val!r}")

    @classmethod
    def of(cls, gen: Any, prompt_version: str | None = None) -> "GeneratorKey":
        """The key of generator ``gen`` (``prompt_version`` overrides the generator's own)."""
        missing = [a for a in ("name", "model", "prompt_version", "extractive", "generate")
                   if not hasattr(gen, a)]
        if missing:
            raise GeneratorError(f"{gen!r} is not a derived-text generator: it lacks {missing}")
        return cls(str(gen.name), str(gen.model), str(prompt_version or gen.prompt_version),
                   bool(gen.extractive))

    @property
    def slug(self) -> str:
        """A folder name: readable prefix + a digest of (name, model, prompt_version)."""
        digest = hashlib.blake2b("\0".join((self.name, self.model, self.prompt_version)).encode(),
                                 digest_size=6).hexdigest()
        return f"{_SLUG.sub('_', self.name)[:40]}--{digest}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "prompt_version": self.prompt_version,
                "extractive": self.extractive}

    def describe(self) -> str:
        how = "extractive: copied from the text, no model" if self.extractive else "model-written"
        return (f"generator {self.name} (model {self.model}, prompt {self.prompt_version}; "
                f"{how})")
