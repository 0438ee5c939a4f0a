"""The central cache of derived texts: produced once per (unit hash, generator key).

Layout: ``<state>/derived/<gen-key>/<hash[:2]>/<hash>.json``, where ``<gen-key>`` is the
generator's name plus a digest of (name, model, prompt_version) (``GeneratorKey.slug``) and
``<gen-key>/generator.json`` records that key in full. Each unit file holds::

    {"format": 1, "hash": ..., "doc_kind": ..., "length": <bytes of the unit's text>,
     "generator": {"name", "model", "prompt_version", "extractive"},
     "texts": [{"text", "kind", "source_spans": [[start, end], ...]}, ...], "created": ...}

Files are written atomically (``lar.store.cas.atomic_write``). A file that cannot be read back
(bad JSON, a wrong field, a span outside the unit) is reported in ``events``, removed and
regenerated; it never fails the caller. A file written for another document kind or text length
of the same hash (the same bytes read as another format) is regenerated too. Within a process a
lock per (key, hash) makes concurrent callers wait for one generation instead of repeating it.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from lar.store.cas import atomic_write
from lar.layers.derived.types import DerivedText, Generator, GeneratorError, GeneratorKey

CACHE_FORMAT = 1
MAX_EVENTS = 20


class DerivedCache:
    """Derived texts per (unit hash, generator key) under ``directory`` (``<state>/derived``)."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.events: list[str] = []
        self.counts = {"reused": 0, "generated": 0, "corrupt": 0}
        self._lock = threading.Lock()
        self._unit_locks: dict[tuple[str, str], threading.Lock] = {}

    def path(self, key: GeneratorKey, h: str) -> Path:
        return self.dir / key.slug / h[:2] / f"{h}.json"

    def note(self, msg: str) -> None:
        with self._lock:
            self.events = (self.events + [msg])[-MAX_EVENTS:]

    def _unit_lock(self, key: GeneratorKey, h: str) -> threading.Lock:
        with self._lock:
            lk = self._unit_locks.get((key.slug, h))
            if lk is None:
                if len(self._unit_locks) > 10000:
                    self._unit_locks.clear()
                lk = self._unit_locks[(key.slug, h)] = threading.Lock()
            return lk

    def read(self, key: GeneratorKey, h: str, *, doc_kind: str, length: int) -> list[DerivedText] | None:
        """The cached texts, or None when there are none (or they are corrupt or stale)."""
        p = self.path(key, h)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.note(f"cache file {p} unreadable ({exc}); regenerating")
            return None
        try:
            d = json.loads(raw.decode("utf-8"))
            if not isinstance(d, dict) or d.get("format") != CACHE_FORMAT or d.get("hash") != h \
                    or d.get("generator") != key.to_json() or not isinstance(d.get("texts"), list):
                raise GeneratorError("header does not match the file's key")
            if d.get("doc_kind") != doc_kind or d.get("length") != length:
                return None  # the same bytes read as another format: not corrupt, just other
            texts = [DerivedText.from_json(t) for t in d["texts"]]
            for t in texts:
                t.check_bounds(length)
            return texts
        except (ValueError, TypeError, GeneratorError) as exc:  # JSON, UTF-8, validation
            with self._lock:
                self.counts["corrupt"] += 1
            self.note(f"corrupt cache file {p.name} ({type(exc).__name__}: {exc}); regenerated")
            try:
                p.unlink()
            except OSError:
                pass
            return None

    def write(self, key: GeneratorKey, h: str, texts: list[DerivedText], *, doc_kind: str,
              length: int) -> None:
        head = self.dir / key.slug / "generator.json"
        if not head.exists():
            atomic_write(head, json.dumps(key.to_json(), indent=1).encode(), durable=False)
        body = {"format": CACHE_FORMAT, "hash": h, "doc_kind": doc_kind, "length": length,
                "generator": key.to_json(), "texts": [t.to_json() for t in texts],
                "created": time.time()}
        atomic_write(self.path(key, h), json.dumps(body, ensure_ascii=False).encode("utf-8"),
                     durable=False)

    def get_or_create(self, h: str, document: Any, path: str, generator: Generator,
                      key: GeneratorKey | None = None) -> tuple[list[DerivedText], bool]:
        """The derived texts of unit ``h`` (``document`` is its ``lar.store.extract.Document``):
        from the cache, else generated once and stored. Returns ``(texts, generated)``.
        Raises ``GeneratorError`` when the generator returns something invalid (nothing is
        cached then)."""
        key = key or GeneratorKey.of(generator)
        text = document.text or b""
        kind = getattr(document, "kind", "text")
        with self._unit_lock(key, h):
            cached = self.read(key, h, doc_kind=kind, length=len(text))
            if cached is not None:
                with self._lock:
                    self.counts["reused"] += 1
                return cached, False
            out = generator.generate(text, path=path, document=document)
            if not isinstance(out, (list, tuple)):
                raise GeneratorError(f"generator {key.name!r} returned {type(out).__name__}; "
                                     "it must return a list of DerivedText")
            texts = []
            for t in out:
                if not isinstance(t, DerivedText):
                    raise GeneratorError(f"generator {key.name!r} returned a {type(t).__name__} "
                                         "item; it must return DerivedText objects")
                t.check_bounds(len(text))
                texts.append(t)
            self.write(key, h, texts, doc_kind=kind, length=len(text))
            with self._lock:
                self.counts["generated"] += 1
            return texts, True

    def describe(self) -> str:
        c = self.counts
        out = f"cache {self.dir}: {c['reused']} reused, {c['generated']} generated this session"
        if c["corrupt"]:
            out += f", {c['corrupt']} corrupt entries regenerated"
        return out
