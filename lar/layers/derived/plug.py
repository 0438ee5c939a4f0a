"""Pluggable generators: any Python callable (an LLM call, a rule set) and MCP sampling.

``CallableGenerator(fn, name, model, prompt_version)`` calls ``fn(text, path)`` once per unit
(or per chunk with ``chunk_bytes``) and reads what it returns, a list whose items are:

* a string: a derived text (kind ``default_kind``) that points to the whole unit or chunk;
* a dict ``{"text": ..., "kind": ..., "source_spans": [[start, end], ...]}`` with ``kind`` and
  ``source_spans`` optional; spans are *character* offsets into the ``text`` the callable was
  given; or ``{"text": ..., "quote": "words copied from the text"}`` (or ``"quotes": [...]``):
  lar finds each quote (whitespace and then case are forgiven) and points there; a quote that
  is not found falls back to the whole unit or chunk.

``SamplingGenerator(sample_fn)`` is the hook for a model the caller already has, such as the
MCP client's model when the client offers sampling: ``sample_fn(prompt: str) -> str`` sends
``SAMPLING_PROMPT`` (one chunk of a unit per call) and returns the reply, from which ``SUMMARY:``
and ``QUESTION:`` lines are read. ``resolve_generator`` turns the ``derived_generator`` setting
into a generator.
"""
from __future__ import annotations

import importlib
import inspect
import re
from typing import Any, Callable

from lar.layers.derived.spans import char_to_byte, for_reader, locate_quote, trim
from lar.layers.derived.types import DerivedText, GeneratorError

SAMPLING_PROMPT_VERSION = "sampling-v1"
SAMPLING_PROMPT = """You are helping to index a file for search. Read the excerpt of {path} below \
and reply with plain lines only, nothing else:
SUMMARY: one sentence saying what the excerpt is about
QUESTION: a question a reader could ask that the excerpt answers (up to {questions} such lines)
Use the words a person would search with, not only the excerpt's own terms.

<excerpt>
{text}
</excerpt>"""
_LINE = re.compile(r"^\s*(?:[-*]\s*|\d{1,3}[.)]\s*)?(summary|question|q|description)\s*[:：]\s*(.+?)\s*$",
                   re.IGNORECASE)
_KINDS = {"summary": "summary", "question": "question", "q": "question", "description": "description"}
_ITEM_KEYS = frozenset({"text", "kind", "source_spans", "quote", "quotes"})


class CallableGenerator:
    """Wraps ``fn(text: str, path: str) -> list[str | dict]`` (see the module docstring)."""

    def __init__(self, fn: Callable[[str, str], Any], name: str, model: str, prompt_version: str,
                 *, default_kind: str = "summary", chunk_bytes: int | None = None,
                 extractive: bool = False):
        if not callable(fn):
            raise GeneratorError(f"CallableGenerator needs a callable, got {fn!r}")
        for label, val in (("name", name), ("model", model), ("prompt_version", prompt_version)):
            if not isinstance(val, str) or not val.strip():
                raise GeneratorError(f"CallableGenerator {label} must be a non-empty string, got {val!r}")
        if chunk_bytes is not None and (isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int)
                                        or chunk_bytes < 64):
            raise GeneratorError(f"chunk_bytes must be None or an integer >= 64, got {chunk_bytes!r}")
        DerivedText("x", default_kind, ((0, 1),))  # validates the kind
        self.fn = fn
        self.name, self.model, self.prompt_version = name, model, prompt_version
        self.default_kind = default_kind
        self.chunk_bytes = chunk_bytes
        self.extractive = bool(extractive)

    def __repr__(self) -> str:
        return (f"CallableGenerator({getattr(self.fn, '__qualname__', self.fn)!r}, name={self.name!r}, "
                f"model={self.model!r}, prompt_version={self.prompt_version!r})")

    def _pieces(self, data: bytes, document: Any) -> list[tuple[int, int]]:
        if not data.strip():
            return []
        if self.chunk_bytes is None:
            return [trim(data, 0, len(data))]
        from lar.layers.kits.chunking import chunk
        from lar.store.extract import plain

        doc = document if document is not None and getattr(document, "text", None) == data else plain(data)
        spans = (trim(data, s, e) for s, e in chunk(doc, self.chunk_bytes, max(8000, self.chunk_bytes)))
        return [(s, e) for s, e in spans if e > s]

    def generate(self, unit_text: str | bytes, *, path: str, document: Any = None) -> list[DerivedText]:
        data = unit_text.encode("utf-8", errors="surrogateescape") if isinstance(unit_text, str) \
            else bytes(unit_text)
        out: list[DerivedText] = []
        for cs, ce in self._pieces(data, document):
            exact, shown = for_reader(data[cs:ce])
            result = self.fn(shown, path)
            if not isinstance(result, (list, tuple)):
                raise GeneratorError(f"generator {self.name!r}: the callable returned "
                                     f"{type(result).__name__}; it must return a list of str or dict")
            for item in result:
                out.append(self._item(item, exact, shown, cs, ce))
        return out

    def _item(self, item: Any, exact: str, shown: str, cs: int, ce: int) -> DerivedText:
        whole = ((cs, ce),)
        if isinstance(item, str):
            return DerivedText(item, self.default_kind, whole)
        if not isinstance(item, dict):
            raise GeneratorError(f"generator {self.name!r}: items must be str or dict, got "
                                 f"{type(item).__name__}")
        extra = set(item) - _ITEM_KEYS
        if extra or "text" not in item:
            raise GeneratorError(f"generator {self.name!r}: a dict item needs 'text' and may have "
                                 f"{sorted(_ITEM_KEYS - {'text'})}; got keys {sorted(item)}")
        kind = item.get("kind", self.default_kind)
        chars: list[tuple[int, int]] = []
        if "source_spans" in item:
            try:
                chars = [(int(s), int(e)) for s, e in item["source_spans"]]
            except (TypeError, ValueError):
                raise GeneratorError(f"generator {self.name!r}: source_spans must be [[start, end], "
                                     f"...] character offsets, got {item['source_spans']!r}") from None
            for s, e in chars:
                if not 0 <= s < e <= len(shown):
                    raise GeneratorError(
                        f"generator {self.name!r}: source span [{s}, {e}) is outside the text it "
                        f"was given ({len(shown)} characters)")
        quotes = item.get("quotes", [item["quote"]] if "quote" in item else [])
        if isinstance(quotes, str) or not all(isinstance(q, str) for q in quotes):
            raise GeneratorError(f"generator {self.name!r}: 'quote' takes a string and 'quotes' a "
                                 f"list of strings, got {quotes!r}")
        for q in quotes:
            found = locate_quote(shown, q)
            if found is not None:
                chars.append(found)
        if not chars:
            return DerivedText(item["text"], kind, whole)
        flat = char_to_byte(exact, [x for sp in chars for x in sp])
        spans = tuple((cs + flat[i], cs + flat[i + 1]) for i in range(0, len(flat), 2))
        return DerivedText(item["text"], kind, spans)


class SamplingGenerator(CallableGenerator):
    """Derived texts from a model reached through ``sample_fn(prompt) -> reply`` (e.g. MCP
    sampling: the server asks the client's model). One call per chunk of ``chunk_bytes``; each
    ``SUMMARY:``/``QUESTION:`` line of the reply becomes a derived text pointing to its chunk.
    Give ``model`` the name the client reports, so that the cache keys by it."""

    def __init__(self, sample_fn: Callable[[str], str], *, model: str = "mcp-client-model",
                 name: str = "sampling", prompt_version: str = SAMPLING_PROMPT_VERSION,
                 chunk_bytes: int = 4000, questions: int = 3, prompt: str = SAMPLING_PROMPT):
        if not callable(sample_fn):
            raise GeneratorError(f"SamplingGenerator needs a callable sample_fn, got {sample_fn!r}")
        if isinstance(questions, bool) or not isinstance(questions, int) or questions < 0:
            raise GeneratorError(f"questions must be an integer >= 0, got {questions!r}")
        if "{text}" not in prompt:
            raise GeneratorError("a sampling prompt must contain the {text} placeholder")
        self.sample_fn = sample_fn
        self.questions = questions
        self.prompt = prompt
        super().__init__(self._ask, name, model, prompt_version, chunk_bytes=chunk_bytes)

    def build_prompt(self, text: str, path: str) -> str:
        return self.prompt.replace("{path}", path).replace("{questions}", str(self.questions)) \
            .replace("{text}", text)

    def _ask(self, text: str, path: str) -> list[dict]:
        reply = self.sample_fn(self.build_prompt(text, path))
        if not isinstance(reply, str):
            raise GeneratorError(f"sample_fn must return the model's reply as a string, got "
                                 f"{type(reply).__name__}")
        return parse_reply(reply, self.questions)


def parse_reply(reply: str, questions: int = 3) -> list[dict]:
    """``SUMMARY:``/``QUESTION:``/``DESCRIPTION:`` lines of a model reply as items (at most
    ``questions`` questions); other lines are ignored."""
    out, n_q = [], 0
    for line in reply.splitlines():
        m = _LINE.match(line)
        if not m or not m.group(2).strip():
            continue
        kind = _KINDS[m.group(1).lower()]
        if kind == "question":
            if n_q >= questions:
                continue
            n_q += 1
        out.append({"text": m.group(2).strip(), "kind": kind})
    return out


def resolve_generator(spec: Any = None, prompt_version: str | None = None):
    """The generator named by the ``derived_generator`` setting: None or "extractive" (the
    built-in), a "module:attribute" string, or an object: a generator (has ``generate``,
    ``name``, ``model``, ``prompt_version``, ``extractive``), a class of one (called without
    arguments), or a plain callable ``fn(text, path)``, wrapped in ``CallableGenerator`` with
    its ``generator_name``/``__qualname__``, ``model`` (default "unspecified") and the
    ``prompt_version`` setting (else the callable's ``prompt_version``, else "1")."""
    from lar.layers.derived.extractive import ExtractiveGenerator

    if spec is None or spec == "extractive":
        return ExtractiveGenerator()
    if isinstance(spec, str):
        mod, _, attr = spec.partition(":")
        if not mod or not attr:
            raise GeneratorError(f"derived_generator must be 'extractive', 'module:attribute' or a "
                                 f"callable, got {spec!r}")
        try:
            obj: Any = importlib.import_module(mod)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise GeneratorError(f"derived_generator {spec!r} could not be loaded: {exc}") from None
        spec = obj
    if inspect.isclass(spec):
        spec = spec()
    if all(hasattr(spec, a) for a in ("generate", "name", "model", "prompt_version", "extractive")):
        return spec
    if callable(spec):
        name = getattr(spec, "generator_name", None) or getattr(spec, "__qualname__", None) \
            or type(spec).__name__
        return CallableGenerator(spec, str(name), str(getattr(spec, "model", "unspecified")),
                                 str(prompt_version or getattr(spec, "prompt_version", "1")))
    raise GeneratorError(f"derived_generator must be a generator, a callable or 'module:attribute', "
                         f"got {spec!r}")
