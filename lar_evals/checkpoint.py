"""Per-query checkpoints for long harness runs: a killed or stopped ``beir`` run resumes where it
stopped instead of starting over.

The file is JSON lines: a header ``{"kind": "lar-beir-checkpoint", "dataset", "split",
"settings"}`` and then one line per finished query, ``{"qid": ..., "got": {...}}`` (what
:func:`lar_evals.query.run_query` returned). Each line is flushed when written, so a kill loses at
most the query in progress; a torn last line is ignored and that query runs again. A checkpoint
written with other settings (routes, fusion, k, timebox, ...) is refused: its lists would not
be comparable.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from lar_evals.errors import EvalConfigError

KIND = "lar-beir-checkpoint"


class Checkpoint:
    """``done`` maps each finished query id to its results; ``add`` appends one."""

    def __init__(self, path: str | os.PathLike, dataset: str, split: str, settings: Mapping[str, Any]):
        self.path = Path(path)
        self.settings = json.loads(json.dumps(dict(settings)))  # as it reads back from JSON
        self.done: dict[str, dict[str, Any]] = {}
        self.torn = 0
        header = {"kind": KIND, "dataset": dataset, "split": split, "settings": self.settings}
        if self.path.is_file() and self.path.stat().st_size > 0:
            self._load(header)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(header) + "\n")
        self.resumed = frozenset(self.done)  # the queries this run did not have to search again
        self._fh = open(self.path, "a", encoding="utf-8")

    def _load(self, header: dict[str, Any]) -> None:
        try:
            with open(self.path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            got = json.loads(lines[0])
        except (UnicodeDecodeError, json.JSONDecodeError):
            got = None
        if not isinstance(got, dict) or got.get("kind") != KIND:
            raise EvalConfigError(f"{str(self.path)!r} is not a lar beir checkpoint; give another "
                                  "--checkpoint path or move the file away")
        for key in ("dataset", "split", "settings"):
            if got.get(key) != header[key]:
                diff = header[key]
                if key == "settings":
                    before = got.get("settings") if isinstance(got.get("settings"), dict) else {}
                    diff = {k: v for k, v in header[key].items() if before.get(k) != v}
                raise EvalConfigError(
                    f"checkpoint {str(self.path)!r} was written with another {key} (now {diff}); "
                    "run with the settings it was written with, or start a new checkpoint file")
        good = len(lines[0]) + 1
        for line in lines[1:]:
            if not line.strip():
                good += len(line) + 1
                continue
            try:
                row = json.loads(line)
                self.done[str(row["qid"])] = row["got"]
                good += len(line) + 1
            except (json.JSONDecodeError, KeyError, TypeError):
                self.torn += 1  # a line cut by a kill: that query runs again
                break
        text = "\n".join(lines)
        if self.torn:  # drop the torn tail so that appended lines start on a line of their own
            with open(self.path, "r+b") as fh:
                fh.truncate(len(text[:good].encode("utf-8")))
        elif not text.endswith("\n"):  # killed between a line and its newline
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("\n")

    def add(self, qid: str, got: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps({"qid": qid, "got": got}) + "\n")
        self._fh.flush()
        self.done[qid] = dict(got)

    def close(self) -> None:
        self._fh.close()

