"""ast-grep matches of one text as plain data, in this process or in a worker process.

``raw_matches`` parses ``text`` with ast-grep and returns each matched node's character range
and its captured metavariables (text and range): plain tuples and dicts, so the same result can
come back as JSON from a worker process (``lar.layers.kits.code.sgproc``), which the structural
layer uses for large files: ast-grep holds the GIL while it parses (22 s for a 10 MB file), and
a process can be killed at the deadline, a thread cannot.

Run as a script (``python sgmatch.py``), it reads one JSON line ``{"lang", "pattern", "single",
"multi", "limit"}`` and then the text (UTF-8) from stdin, and writes ``{"matches": [...]}`` or
``{"error": "..."}`` as JSON to stdout. It imports nothing of lar, so it starts quickly.
"""
from __future__ import annotations

import json
import sys
from typing import Any


def _rng(node) -> list[int]:
    r = node.range()
    return [r.start.index, r.end.index]


def raw_matches(sg, text: str, lang: str, pattern: Any, single: list[str], multi: list[str],
                limit: int | None = None) -> list[dict[str, Any]]:
    """``[{"r": [start, end], "caps": {"$A": {"t": text, "r": [s, e]}, "$$$B": [...]}}]`` for
    the nodes of ``text`` that match ``pattern`` (at most ``limit``); character offsets. Errors
    of ast-grep propagate."""
    nodes = sg.SgRoot(text, lang).root().find_all(pattern=pattern)
    out = []
    for n in nodes[: limit if limit is not None else len(nodes)]:
        caps: dict[str, Any] = {}
        for name in single:
            m = n.get_match(name)
            if m is not None:
                caps["$" + name] = {"t": m.text(), "r": _rng(m)}
        for name in multi:
            caps["$$$" + name] = [{"t": m.text(), "r": _rng(m)}
                                  for m in n.get_multiple_matches(name) if m.is_named()]
        out.append({"r": _rng(n), "caps": caps})
    return out


def main() -> int:
    """The worker: one request on stdin, its answer on stdout."""
    head = json.loads(sys.stdin.buffer.readline())
    text = sys.stdin.buffer.read().decode("utf-8")
    try:
        import ast_grep_py as sg

        found = raw_matches(sg, text, head["lang"], head["pattern"], head["single"], head["multi"],
                            head.get("limit"))
        reply: dict[str, Any] = {"matches": found}
    except BaseException as exc:  # ast-grep's errors (a Rust panic too) go back to the caller
        reply = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(reply, ensure_ascii=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
