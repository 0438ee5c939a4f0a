"""ripgrep's compact rows grouped into matching lines, column-wise (for ``lar.layers.grep``).

rg prints one row per match (``path NUL line:offset:match``), the rows of one line next to each
other. The rows are split into columns by one C-level regex per slice of the output, lines are
found where (path, line number) changes (``map(operator.ne, ...)``, no Python loop per row),
and a line's matches are built only for the lines asked for (``matches``): a ranking reads the
top few hundred lines of tens of thousands.
"""
from __future__ import annotations

import itertools
import operator
import re
import time
from dataclasses import dataclass
from typing import Callable

# one match per line of rg output: path NUL line ':' byte-offset ':' match; a path may hold a
# newline and (with --text) a match a NUL, never a newline
ROW_RE = re.compile(rb"([^\0]*)\0(\d+):(\d+):([^\n]*)\n")
STEP = 1 << 18  # bytes of output parsed between two looks at the deadline


@dataclass(frozen=True)
class Lines:
    """The matching lines: for line i, its file (raw path bytes), its signature (a key id, or a
    frozenset of the ids when its matches differ), and its rows ``starts[i]:starts[i+1]``."""

    files: list
    sigs: list
    starts: list
    offsets: list
    texts: list
    cut_short: bool

    def __len__(self) -> int:
        return len(self.files)

    def matches(self, i: int) -> list[tuple[int, bytes]]:
        """(byte offset, match) of each match on line i, in rg's order."""
        return [(int(self.offsets[r]), self.texts[r]) for r in range(self.starts[i], self.starts[i + 1])]


def row_end(out: bytes, at: int) -> int:
    """The index just past the first row end at or after ``at``: a newline with no newline
    between it and the NUL before it (a newline inside a path has its row's own end between)."""
    while True:
        c = out.find(b"\n", at)
        if c < 0:
            return len(out)
        z = out.rfind(b"\0", 0, c)
        if z >= 0 and out.find(b"\n", z, c) < 0:
            return c + 1
        at = c + 1


def group_lines(out: bytes, key_id: Callable[[bytes], int], stop: Callable[[int], bool]) -> Lines:
    """Group ``out`` into lines. ``key_id`` maps a match's bytes to its key id (called once per
    distinct match text); ``stop(rows so far)`` is asked between slices (True: stop there)."""
    paths: list = []
    linenos: list = []
    offsets: list = []
    texts: list = []
    cut_short = False
    pos = 0
    while pos < len(out):
        if pos and stop(len(paths)):
            cut_short = True
            break
        cut = row_end(out, min(len(out), pos + STEP) - 1)
        rows = ROW_RE.findall(out, pos, cut)
        pos = cut
        if rows:
            p, n, o, t = zip(*rows)
            paths += p
            linenos += n
            offsets += o
            texts += t
    n_rows = len(paths)
    ids = {m: key_id(m) for m in dict.fromkeys(texts)}
    kids = list(map(ids.__getitem__, texts))
    if n_rows == 0:
        return Lines([], [], [0], offsets, texts, cut_short)
    pl = list(zip(paths, linenos))
    starts = [0, *itertools.compress(range(1, n_rows), map(operator.ne, pl[1:], pl[:-1])), n_rows]
    if len(starts) == n_rows + 1:  # one match a line (the common case): the columns are the lines
        return Lines(paths, kids, starts, offsets, texts, cut_short)
    heads = starts[:-1]
    files = list(map(paths.__getitem__, heads))
    sigs = list(map(kids.__getitem__, heads))
    for i in itertools.compress(range(len(heads)), map(operator.gt, map(operator.sub, starts[1:], heads),
                                                       itertools.repeat(1))):
        ks = kids[starts[i]:starts[i + 1]]
        first = ks[0]
        if any(k != first for k in ks):
            sigs[i] = frozenset(ks)
    return Lines(files, sigs, starts, offsets, texts, cut_short)


def deadline_stop(deadline: float, per_row: float = 1e-6, reserve: float = 0.008) -> Callable[[int], bool]:
    """Stop when less than ``reserve`` + ``per_row`` a row is left before ``deadline`` (the time
    what follows the grouping needs: ~1 us a line, plus reading the top files)."""
    return lambda rows: time.monotonic() > deadline - (reserve + per_row * rows)


def file_runs(files: list, counts) -> dict | None:
    """{file: range of its line indices} when each file's lines are contiguous in ``files``
    (ripgrep writes one file's matches together), in first-appearance order; None otherwise.
    ``counts`` maps each file to its number of lines."""
    n = len(files)
    if n == 0:
        return {}
    heads = [0, *itertools.compress(range(1, n), map(operator.ne, files[1:], files[:-1]))]
    if len(heads) != len(counts):
        return None  # some file's lines are split: group them one by one
    ends = heads[1:] + [n]
    return {files[a]: range(a, b) for a, b in zip(heads, ends)}
