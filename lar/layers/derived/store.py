"""Per-unit derived texts and their terms for a layer that indexes them (SQLite, WAL).

One row per content hash: the unit's derived texts and, per text, its term list (zlib JSON),
written in one statement. ``get_many`` yields ``(hash, pseudo-spans, terms)`` where the i-th
pseudo-span is ``(i, i + 1)``: the text's index, not a byte range. That is the shape
``lar.layers.kits.lexical.index.SegmentedIndex`` builds BM25 segments from, so a segment doc names one
derived text; its real source spans are looked up here.
"""
from __future__ import annotations

import json
import zlib
from typing import Iterable, Iterator, Sequence

from lar.layers.kits.lexical.chunks import UnitStore
from lar.layers.derived.types import DerivedText, GeneratorError


class DerivedStore(UnitStore):
    """The bm25 layer's unit store (one zlib JSON row per hash), holding derived texts."""

    label = "derived-text store"

    def put(self, h: str, version: str, texts: Sequence[DerivedText],
            terms: Sequence[Sequence[str]]) -> None:
        raw = json.dumps({"texts": [t.to_json() for t in texts], "terms": [list(t) for t in terms]},
                         ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.put_blob(h, version, zlib.compress(raw, 1))

    def _rows(self, hashes: Iterable[str], version: str) -> Iterator[tuple[str, dict]]:
        for h, blob in self.blobs(hashes, version):
            try:
                yield h, json.loads(zlib.decompress(blob).decode("utf-8"))
            except (zlib.error, ValueError, TypeError):
                continue  # a corrupt row counts as not built

    def get_many(self, hashes: Iterable[str], version: str
                 ) -> Iterator[tuple[str, list[tuple[int, int]], list[list[str]]]]:
        """``(hash, [(i, i + 1), ...], terms)`` per stored unit (see the module docstring)."""
        for h, d in self._rows(hashes, version):
            terms = d.get("terms")
            if isinstance(terms, list):
                yield h, [(i, i + 1) for i in range(len(terms))], terms

    def texts(self, h: str, version: str) -> list[DerivedText] | None:
        """The derived texts of unit ``h`` (None when not stored or unreadable)."""
        for _, d in self._rows([h], version):
            try:
                return [DerivedText.from_json(t) for t in d["texts"]]
            except (KeyError, TypeError, GeneratorError):
                return None
        return None
