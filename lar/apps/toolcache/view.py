"""The deterministic filtered view of a cached output, and its ids.

Items. The output's lines (split on ``\\n``; a final newline ends the last line) are grouped
into items; every line belongs to exactly one item, so the items' full texts concatenate to the
output. A line's group is

* its file prefix, when it starts like grep/ripgrep/git-grep output: ``PATH:N:``, ``PATH-N-``
  (context lines) or ``PATH:``, where PATH has no spaces and looks like a path (it contains
  ``/`` or ends in an extension like ``.py``) -- consecutive lines of one file form one item;
* a path list, when the whole line is a path containing ``/`` (find, ``rg --files``): such an
  item is labelled with the folder its paths share;
* otherwise its block: a run of lines up to a blank line.

Blank lines and ``--`` separator lines join the item before them. An item never holds more
than ``ITEM_MAX_LINES`` (20) lines; a longer group continues in the next item. The grouping
depends on the text alone, so item numbers are stable across processes and versions of the view
settings.

View. Items are shown in order, each with its label (the file, or the folder its paths share).
Within an item blank and ``--`` lines are not shown, the label a line repeats is dropped
(``PATH:`` of a file item, ``FOLDER/`` of a path list), a run of identical consecutive lines is
shown once with ``  [×N]``, a line longer than ``max_line`` characters is cut and ends in
``…[+N chars]``, and at most ``item_lines`` lines are shown (``more`` counts the rest) -- unless
the whole output's collapsed lines fit in ``view_lines``; then nothing is held back per item.
An item whose non-blank lines equal an earlier item's is shown as one line ``(same as <id>)``. Once
``view_lines`` lines have been shown the remaining items are left out (``rest`` names them).
``omitted`` counts what was left out: whole items, non-blank lines not shown, lines cut.
Small outputs pass through: when nothing was left out or cut and the output's text costs fewer
tokens than its items, the compact view carries the text (``"text"``) instead of ``items``;
the item ids stay valid for fetch.

Ids. ``t<key12>`` names a whole output (``key12``: the first 12 hex digits of its key; 6 or
more digits are accepted); ``t<key12>:<n>`` item n (1-based); ``t<key12>:<a>-<b>`` items a to
b; ``t<key12>:L<a>`` and ``t<key12>:L<a>-<b>`` lines a to b (1-based, inclusive). Fetch returns
the full text of any of them, whether the view showed it or not.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from lar.apps.toolcache.errors import ToolIdError
from lar.apps.toolcache.ids import TOOL_ID_RE, ToolId

ITEM_MAX_LINES = 20
_NUMBERED = re.compile(r"^([^\s:]+):(\d+):")
_CONTEXT = re.compile(r"^([^\s:]+?)-(\d+)-")
_PLAIN = re.compile(r"^([^\s:]+):")
_EXT = re.compile(r"\.[A-Za-z0-9_]{1,10}$")


def count_tokens(text: str) -> int:
    """Tokens of ``text``: ``lar.record.calllog.count_tokens`` when that module exists, else about
    four characters per token."""
    try:
        from lar.record.calllog import count_tokens as _count  # type: ignore[attr-defined]
    except ImportError:
        return (len(text) + 3) // 4
    return int(_count(text))


def looks_like_path(p: str) -> bool:
    if not p or "://" in p or not any(c.isalpha() for c in p):
        return False
    return "/" in p or bool(_EXT.search(p))


def file_prefix(line: str) -> str | None:
    """The file a grep-style line names at its start, or None."""
    for rx in (_NUMBERED, _CONTEXT, _PLAIN):
        m = rx.match(line)
        if m and looks_like_path(m.group(1)):
            return m.group(1)
    return None


def bare_path(line: str) -> str | None:
    """The line itself when it is a single path containing '/' (find, rg --files), else None."""
    if line and len(line) < 4096 and "/" in line and not any(c.isspace() for c in line) \
            and "://" not in line and not line.endswith(":"):
        return line
    return None


def split_lines(text: str) -> tuple[list[str], bool]:
    """The lines of ``text`` and whether it ends in a newline."""
    if not text:
        return [], False
    lines = text.split("\n")
    final = lines[-1] == ""
    if final:
        lines.pop()
    return lines, final


def join_lines(lines: Sequence[str], a: int, b: int, final_newline: bool) -> str:
    """Lines ``a..b`` (0-based, end exclusive) as they stand in the text."""
    if a >= b:
        return ""
    tail = "\n" if (b < len(lines) or final_newline) else ""
    return "\n".join(lines[a:b]) + tail


def _key(line: str) -> tuple[str, str] | None:
    if not line.strip() or line == "--":
        return None
    p = file_prefix(line)
    if p is not None:
        return ("file", p)
    if bare_path(line) is not None:
        return ("paths", "")
    return ("block", "")


def _common_dir(lines: Sequence[str]) -> str | None:
    dirs = [x.rsplit("/", 1)[0] for x in lines if bare_path(x)]
    try:
        common = os.path.commonpath(dirs) if dirs else ""
    except ValueError:  # absolute and relative paths mixed
        return None
    if dirs[0].startswith("./") and common and not common.startswith((".", "/")):
        common = "./" + common
    return common or None


def group(lines: Sequence[str]) -> list[tuple[int, int, str | None]]:
    """Items as ``(start, end, label)``: 0-based line indexes, end exclusive."""
    items: list[tuple[int, int, str | None]] = []
    start, cur = 0, None
    block_no, prev_blank = 0, False
    for i, line in enumerate(lines):
        k = _key(line)
        if k is None:
            prev_blank = True
            continue
        if k[0] == "block":
            if prev_blank or cur is None or cur[0] != "block":
                block_no += 1
            k = ("block", str(block_no))
        prev_blank = False
        if cur is None:
            cur = k
        elif k != cur or i - start >= ITEM_MAX_LINES:
            items.append((start, i, _label(cur, lines[start:i])))
            start, cur = i, k
    if lines:
        items.append((start, len(lines), _label(cur, lines[start:])))
    return items


def _label(key: tuple[str, str] | None, lines: Sequence[str]) -> str | None:
    if key is None or key[0] == "block":
        return None
    return key[1] if key[0] == "file" else _common_dir(lines)


@dataclass(frozen=True)
class ViewItem:
    id: str
    index: int
    lines: tuple[int, int]  # 1-based, inclusive
    label: str | None
    shown: tuple[str, ...]
    more: int = 0
    same_as: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shown", tuple(self.shown))
        if self.index < 1 or self.lines[0] < 1 or self.lines[1] < self.lines[0] or self.more < 0:
            raise ToolIdError(f"view item {self.id!r} has an invalid index or line range")

    def to_compact(self) -> dict[str, Any]:
        """``{"id", "label"?, "text", "more"?}``: what an agent reads."""
        d: dict[str, Any] = {"id": self.id}
        if self.label:
            d["label"] = self.label
        d["text"] = f"(same as {self.same_as})" if self.same_as else "\n".join(self.shown)
        if self.more:
            d["more"] = self.more
        return d

    def to_dict(self) -> dict[str, Any]:
        """The compact form plus ``"L": [first, last]`` (its line range)."""
        return {"id": self.id, "L": list(self.lines),
                **{k: v for k, v in self.to_compact().items() if k != "id"}}


@dataclass(frozen=True)
class Omitted:
    items: int = 0
    lines: int = 0
    cut: int = 0

    def __post_init__(self) -> None:
        if min(self.items, self.lines, self.cut) < 0:
            raise ToolIdError("omitted counts must be >= 0")


@dataclass(frozen=True)
class ToolView:
    """What a caller sees of one output: items with ids, and counts of what was left out."""

    id: str
    command: str
    cwd: str
    returncode: int
    cached: bool
    time: str
    elapsed: float
    total_lines: int
    total_items: int
    items: tuple[ViewItem, ...]
    omitted: Omitted = field(default_factory=Omitted)
    rest: str | None = None  # id of the items left out, e.g. "t…:7-19"
    withheld: int = 0  # lines not served because they name a path outside the root
    raw_tokens: int = 0
    view_tokens: int = 0
    whole: str | None = None  # the complete (served) text, when it is cheaper than the items

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        if not TOOL_ID_RE.match(self.id) or ":" in self.id:
            raise ToolIdError(f"{self.id!r} is not an output id (t + hex digits)")
        if self.total_items < len(self.items) or self.total_lines < 0 or self.withheld < 0:
            raise ToolIdError(f"view of {self.id}: inconsistent item or line counts")

    def to_compact(self) -> dict[str, Any]:
        """What an agent reads (the MCP ``run_tool`` reply; ``view_tokens`` counts its compact
        JSON): the output id, ``cwd`` (unless "."), ``exit``, ``lines``, ``n_items``,
        ``cached`` (the time the stored output was made, only on a cache hit), the shown
        ``items`` ({id, label?, text, more?}), and ``omitted``, ``rest``, ``withheld`` when
        something was left out."""
        return self._payload(full=False)

    def _payload(self, full: bool) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id}
        if full:
            d["cmd"] = self.command
        if self.cwd != ".":
            d["cwd"] = self.cwd
        d.update(exit=self.returncode, lines=self.total_lines, n_items=self.total_items)
        if self.cached:
            d["cached"] = self.time  # when the stored output was produced
        if self.whole is not None:
            d["text"] = self.whole
        if full or self.whole is None:
            d["items"] = [it.to_dict() if full else it.to_compact() for it in self.items]
        if self.omitted != Omitted():
            d["omitted"] = {"items": self.omitted.items, "lines": self.omitted.lines,
                            "cut": self.omitted.cut}
        if self.rest:
            d["rest"] = self.rest
        if self.withheld:
            d["withheld"] = self.withheld
        return d

    def to_dict(self) -> dict[str, Any]:
        """The compact form plus ``cmd``, each item's line range ``L`` and the token counts."""
        d = self._payload(full=True)
        d["raw_tokens"] = self.raw_tokens
        d["view_tokens"] = self.view_tokens
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @property
    def text(self) -> str:
        """The view as plain text (what ``lar run`` prints)."""
        head = (f"{self.id} $ {self.command}  (exit {self.returncode}, {_n(self.total_lines, 'line')}, "
                f"{_n(self.total_items, 'item')}" + (f", cached {self.time}" if self.cached else "") + ")")
        out = [head]
        for it in self.items:
            label = f" {it.label}" if it.label else ""
            out.append(f"[{it.id} L{it.lines[0]}-{it.lines[1]}{label}]")
            out.extend([f"(same as {it.same_as})"] if it.same_as else it.shown)
            if it.more:
                out.append(f"  … {_n(it.more, 'more line')}")
        if self.rest:
            out.append(f"… {_n(self.omitted.items, 'more item')} ({self.rest}) not shown")
        if self.withheld:
            out.append(f"({_n(self.withheld, 'line')} withheld: they name paths outside the root)")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text


def _strip(line: str, label: str | None) -> str:
    """A line of a file or folder item without the label it repeats (``PATH:``, ``DIR/``)."""
    if label and line.startswith(label) and len(line) > len(label):
        if line[len(label)] == "/" and bare_path(line):
            return line[len(label) + 1:]
        if line[len(label)] in ":-" and file_prefix(line) == label:
            return line[len(label) + 1:]
    return line


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def cut(line: str, max_line: int) -> tuple[str, bool]:
    if len(line) <= max_line:
        return line, False
    return line[:max_line] + f"…[+{len(line) - max_line} chars]", True


def _runs(body: Sequence[str]) -> list[list[Any]]:
    """Runs of identical consecutive lines as [line, count]."""
    runs: list[list[Any]] = []
    for x in body:
        if runs and runs[-1][0] == x:
            runs[-1][1] += 1
        else:
            runs.append([x, 1])
    return runs


def build_view(*, out_id: str, lines: Sequence[str], shown_lines: Sequence[str], command: str,
               cwd: str, returncode: int, cached: bool, time: str, elapsed: float, raw_text: str,
               max_line: int, view_lines: int, item_lines: int, withheld: int = 0) -> ToolView:
    """Group ``lines`` into items and render ``shown_lines`` (the same lines, with any withheld
    line replaced by a notice) under the budgets. An output whose collapsed lines fit in
    ``view_lines`` is shown whole (no ``item_lines`` limit)."""
    groups = group(lines)
    bodies = [[_strip(x, label) for x in shown_lines[a:b] if x.strip() and x != "--"]
              for a, b, label in groups]
    runs_of = [_runs(body) for body in bodies]
    per_item = item_lines if sum(len(r) for r in runs_of) > view_lines else view_lines
    items: list[ViewItem] = []
    seen: dict[str, str] = {}
    used, om_items, om_lines, n_cut = 0, 0, 0, 0
    first_left_out = None
    for n, ((a, b, label), body, runs) in enumerate(zip(groups, bodies, runs_of), 1):
        iid = f"{out_id}:{n}"
        if used >= view_lines:
            om_items += 1
            om_lines += len(body)
            first_left_out = first_left_out or n
            continue
        full = "\n".join(x for x in shown_lines[a:b] if x.strip() and x != "--")
        if full in seen:
            items.append(ViewItem(iid, n, (a + 1, b), label, (), 0, seen[full]))
            used += 1
            continue
        seen[full] = iid
        take = max(1, min(per_item, view_lines - used)) if runs else 0
        shown = []
        for x, count in runs[:take]:
            text, was_cut = cut(x, max_line)
            n_cut += was_cut
            shown.append(text + (f"  [×{count}]" if count > 1 else ""))
        more = sum(c for _, c in runs[take:])
        om_lines += more
        items.append(ViewItem(iid, n, (a + 1, b), label, tuple(shown), more))
        used += max(1, len(shown))
    rest = None
    if first_left_out is not None:
        rest = f"{out_id}:{first_left_out}" + (f"-{len(groups)}" if len(groups) > first_left_out else "")
    view = ToolView(id=out_id, command=command, cwd=cwd, returncode=returncode, cached=cached,
                    time=time, elapsed=elapsed, total_lines=len(lines), total_items=len(groups),
                    items=tuple(items), omitted=Omitted(om_items, om_lines, n_cut), rest=rest,
                    withheld=withheld, raw_tokens=count_tokens(raw_text))
    tokens = count_tokens(_compact_json(view))
    if not (om_items or om_lines or n_cut):  # nothing left out: is the text itself cheaper?
        whole = replace(view, whole=join_lines(shown_lines, 0, len(shown_lines), raw_text.endswith("\n")))
        whole_tokens = count_tokens(_compact_json(whole))
        if whole_tokens < tokens:
            view, tokens = whole, whole_tokens
    object.__setattr__(view, "view_tokens", tokens)
    return view


def _compact_json(view: ToolView) -> str:
    return json.dumps(view.to_compact(), ensure_ascii=False, separators=(",", ":"))


def select(tid: ToolId, lines: Sequence[str]) -> tuple[int, int, tuple[int, int] | None]:
    """The 0-based line slice ``(a, b)`` an id selects, and the item range (if items)."""
    n = len(lines)
    if tid.kind == "all":
        return 0, n, None
    if tid.kind == "lines":
        if tid.a > n:
            raise ToolIdError(f"t{tid.prefix} has {n} lines; L{tid.a} is past the end")
        return tid.a - 1, min(tid.b, n), None
    groups = group(lines)
    if tid.a > len(groups):
        raise ToolIdError(f"t{tid.prefix} has {len(groups)} items; item {tid.a} does not exist")
    b = min(tid.b, len(groups))
    return groups[tid.a - 1][0], groups[b - 1][1], (tid.a, b)
