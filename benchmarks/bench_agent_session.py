"""A scripted agent session on the Python stdlib through lar's MCP tools: raw tokens (what a
tool without the two-stage filter would put into the context) against view tokens (what the
agent reads: the compact reply) per call and in total, plus the tokens fetched on request.

Run: .venv/bin/python benchmarks/bench_agent_session.py [--out benchmarks/results/DATE-agent-session]

The corpus is this interpreter's stdlib without site-packages, test folders, caches and binary
modules, copied to a temp folder. The session runs in-process through ``lar.apps.mcp.LarTools`` (the
code the MCP server runs, without the stdio transport) with cheap layers only (names, grep,
bm25, trigram), so it needs no model. Per call:

* run_tool: raw = the full output; view = the compact JSON view the tool returns.
* search: raw = the full text of every returned hit's span (what a one-stage search that
  returns matches in full would send); view = the compact JSON reply.
* fetch / inventory / status: raw = view = the reply (second-stage detail or listing).

Context cost over a session (spec section 13): what enters the context is re-read on every
later turn, so ``carried`` = sum over calls of tokens x (turns left in the session, this one
included). The one-stage session carries every raw output; the two-stage session carries the
views plus the details it fetched.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sysconfig
import tempfile
import time
from pathlib import Path

from lar.record.calllog import token_counter
from lar.apps.mcp import LarTools

LAYERS = ["names", "grep", "bm25", "trigram"]
IGNORE = shutil.ignore_patterns("site-packages", "__pycache__", "test", "tests", "idle_test",
                                "lib-dynload", "config-3*", "*.pyc", "*.so", "*.a", "*.exe")


def copy_stdlib(dst: Path) -> Path:
    shutil.copytree(Path(sysconfig.get_paths()["stdlib"]), dst, ignore=IGNORE, symlinks=True)
    return dst


# (call, arguments, note). "$n" in an id argument: take an id from the reply of step n.
SESSION: list[tuple[str, dict, str]] = [
    ("status", {}, "what can this server do"),
    ("inventory", {"limit": 50, "glob": "json/**"}, "list a package"),
    ("search", {"query": "parse an ISO 8601 date string", "k": 10}, "concept search"),
    ("fetch", {"id": "$3.hits.0"}, "read the best hit"),
    ("run_tool", {"command": ["rg", "-n", "def fromisoformat", "."]}, "where is it defined"),
    ("fetch", {"id": "$5.id:1"}, "full item"),
    ("run_tool", {"command": ["ls", "-la"]}, "top-level listing"),
    ("run_tool", {"command": ["find", "asyncio", "-name", "*.py"]}, "package files"),
    ("run_tool", {"command": ["rg", "-n", "^import |^from ", "asyncio/tasks.py"]}, "imports"),
    ("run_tool", {"command": ["wc", "-l", "json/__init__.py", "json/decoder.py",
                              "json/encoder.py", "json/scanner.py"]}, "sizes"),
    ("run_tool", {"command": ["cat", "json/__init__.py"]}, "read a whole module"),
    ("fetch", {"id": "$11.id:L100-140"}, "one part of it in full"),
    ("run_tool", {"command": ["rg", "-n", "def ", "http/client.py"]}, "an outline"),
    ("search", {"query": {"grep": "def urlsplit", "bm25": "urlsplit url parsing"}, "k": 5},
     "per-layer query"),
    ("fetch", {"id": "$14.hits.0", "context": 5}, "hit with context"),
    ("run_tool", {"command": ["rg", "-n", "-w", "deprecated", "-g", "*.py"]}, "a broad sweep"),
    ("fetch", {"id": "$16.id:2"}, "one file's matches in full"),
    ("search", {"query": "DeprecationWarning", "source": "tools", "k": 5},
     "search the cached outputs"),
    ("run_tool", {"command": ["grep", "-rn", "lru_cache", "functools.py"]}, "a focused grep"),
    ("run_tool", {"command": ["rg", "-n", "def fromisoformat", "."]}, "repeat: cache hit"),
    ("run_tool", {"command": ["head", "-n", "60", "typing.py"]}, "a file head"),
]


def resolve(arg: str, replies: dict[int, dict]) -> str:
    """'$3.hits.0' -> id of hit 0 of step 3; '$11.id:L100-140' -> step 11's id + ':L100-140'."""
    ref, _, suffix = arg[1:].partition(":")
    step, *path = ref.split(".")
    node: object = replies[int(step)]
    for p in path:
        node = node[int(p)] if isinstance(node, list) else node[p]  # type: ignore[index]
    if isinstance(node, dict):
        node = node["id"]
    return f"{node}:{suffix}" if suffix else str(node)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=f"benchmarks/results/{dt.date.today()}-agent-session")
    ap.add_argument("--build", type=float, default=120.0, help="seconds to build bm25/trigram")
    args = ap.parse_args(argv)
    count, tokenizer = token_counter()
    tmp = Path(tempfile.mkdtemp(prefix="lar-bench-agent-"))
    try:
        root = copy_stdlib(tmp / "Lib")
        t0 = time.monotonic()
        tools = LarTools(root, state=tmp / "state", layers=LAYERS)
        files = json.loads(tools.call("inventory", {"limit": 1}).text)["total"]
        opened = time.monotonic() - t0
        t0 = time.monotonic()
        built = json.loads(tools.call("build", {"timebox": args.build}).text)
        build_s = time.monotonic() - t0
        rows, replies = [], {}
        for n, (call, arguments, note) in enumerate(SESSION, 1):
            arguments = {k: resolve(v, replies) if isinstance(v, str) and v.startswith("$") else v
                         for k, v in arguments.items()}
            t0 = time.monotonic()
            reply = tools.call(call, arguments)
            elapsed = time.monotonic() - t0
            body = json.loads(reply.text)
            if not reply.ok:
                raise SystemExit(f"step {n} {call} {arguments} failed: {body['error']}")
            replies[n] = body
            view = count(reply.text)
            if call == "run_tool":
                raw = tools.tools.view(body["id"]).raw_tokens  # the full output
            elif call == "search":
                raw = sum(count(_full_text(tools, h["id"])) for h in body["hits"])
            else:
                raw = view
            rows.append({"step": n, "call": call, "arguments": arguments, "note": note,
                         "raw_tokens": raw, "view_tokens": view, "elapsed_s": round(elapsed, 3),
                         "cached": bool(body.get("cached")), "hits": len(body.get("hits", [])),
                         "lines": body.get("lines"), "omitted": body.get("omitted")})
        log = _call_log(tools)
        tools.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = summarise(rows)
    report.update(date=str(dt.date.today()), tokenizer=tokenizer, files=files,
                  open_s=round(opened, 2), build_s=round(build_s, 2),
                  build=built.get("layers"), layers=LAYERS, cpus=os.cpu_count(),
                  python=platform.python_version(), call_log=log, rows=rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


def _full_text(tools: LarTools, hit_id: str) -> str:
    """A hit's full text, read past the tools (so the call log sees only the session's calls)."""
    from lar.store.reader import decode_span
    from lar.apps.toolcache import is_tool_id
    from lar.core.types import parse_hit_id

    if is_tool_id(hit_id):
        return tools.tools.fetch(hit_id).text
    prefix, start, end = parse_hit_id(hit_id)
    eng = tools.engine
    return decode_span(eng.reader.unit_text(eng._resolve_hash(prefix)), start, end)


def _call_log(tools: LarTools) -> dict:
    """The engine's call log for the session's calls (source "mcp"): its own raw/view sums
    (for search it counts the full result with evidence and span texts as raw)."""
    log = tools.engine.call_log
    if log is None:
        return {}
    log.flush()
    s = log.summary(tools.engine.session)
    keep = ("calls", "errors", "raw_tokens", "view_tokens", "ratio", "returned_ids",
            "fetched_ids", "fetched_share")
    return {k: s.get(k) for k in keep} | {"by_call": {c: {k: a.get(k) for k in keep}
                                                    for c, a in s.get("by_call", {}).items()}}


def summarise(rows: list[dict]) -> dict:
    first = [r for r in rows if r["call"] in ("run_tool", "search")]
    second = [r for r in rows if r["call"] == "fetch"]
    other = [r for r in rows if r["call"] not in ("run_tool", "search", "fetch")]
    n = len(rows)
    # one-stage: every raw output, no fetches needed; two-stage: views, fetched details
    one_stage = sum(r["raw_tokens"] for r in first + other)
    two_stage = sum(r["view_tokens"] for r in rows)
    carried_one = sum(r["raw_tokens"] * (n - i) for i, r in enumerate(rows) if r["call"] != "fetch")
    carried_two = sum(r["view_tokens"] * (n - i) for i, r in enumerate(rows))
    return {"calls": n, "first_stage_calls": len(first), "fetches": len(second),
            "raw_first_stage": sum(r["raw_tokens"] for r in first),
            "view_first_stage": sum(r["view_tokens"] for r in first),
            "fetched_tokens": sum(r["view_tokens"] for r in second),
            "session_one_stage": one_stage, "session_two_stage": two_stage,
            "ratio": round(two_stage / one_stage, 3) if one_stage else None,
            "carried_one_stage": carried_one, "carried_two_stage": carried_two,
            "carried_ratio": round(carried_two / carried_one, 3) if carried_one else None}


def markdown(r: dict) -> str:
    lines = [f"# Scripted agent session on the stdlib: raw vs view tokens — {r['date']}", "",
             f"{r['files']} files (stdlib without site-packages/tests), {r['cpus']} CPUs, Python "
             f"{r['python']}; layers {', '.join(r['layers'])}; open {r['open_s']} s, build "
             f"{r['build_s']} s; tokens counted with {r['tokenizer']}.", "",
             "| # | call | arguments | raw tokens | view tokens | view/raw |",
             "|---|---|---|---|---|---|"]
    for row in r["rows"]:
        arg = json.dumps(row["arguments"], ensure_ascii=False)
        arg = arg if len(arg) <= 70 else arg[:69] + "…"
        ratio = f"{row['view_tokens'] / row['raw_tokens']:.2f}" if row["raw_tokens"] else "-"
        tag = " (cached)" if row["cached"] else ""
        lines.append(f"| {row['step']} | {row['call']}{tag} | `{arg}` | {row['raw_tokens']} | "
                     f"{row['view_tokens']} | {ratio} |")
    lines += ["",
              f"First-stage calls (run_tool, search): {r['first_stage_calls']}; raw "
              f"{r['raw_first_stage']} tokens, views {r['view_first_stage']} tokens. "
              f"Fetches on request: {r['fetches']}, {r['fetched_tokens']} tokens.", "",
              f"Whole session: one-stage (raw outputs, no fetches) {r['session_one_stage']} tokens; "
              f"two-stage (views + fetched details + listings) {r['session_two_stage']} tokens "
              f"(ratio {r['ratio']}).", "",
              f"Carried through the session (each call's tokens x turns left): one-stage "
              f"{r['carried_one_stage']}, two-stage {r['carried_two_stage']} (ratio "
              f"{r['carried_ratio']}).", "",
              "rg prints files in the order its threads finish them, so the view sizes of the rg "
              "calls vary a little between runs; the view of a given output is deterministic. "
              "Small outputs cost more as a view than raw (ids and JSON); the filter pays off "
              "from a few hundred tokens up, and more the longer the session carries them.", ""]
    log = r.get("call_log") or {}
    if log:
        lines += ["Cross-check with the engine's call log (`lar calls`) for the same session. "
                  "Its run_tool rows are what the server logs and agree with the table; for "
                  "search, status, inventory and fetch the engine logs its own outputs (a "
                  "search's raw is the full result with evidence and span texts, an inventory "
                  "is the whole listing rather than the page the server sent), and it also "
                  "counts the opening inventory and build:", "",
                  "| call | calls | raw tokens | view tokens | view/raw | returned ids | fetched |",
                  "|---|---|---|---|---|---|---|"]
        for c, a in log.get("by_call", {}).items():
            lines.append(f"| {c} | {a['calls']} | {a['raw_tokens']} | {a['view_tokens']} | "
                         f"{a['ratio']} | {a['returned_ids']} | {a['fetched_ids']} |")
        lines += [f"| all | {log['calls']} | {log['raw_tokens']} | {log['view_tokens']} | "
                  f"{log['ratio']} | {log['returned_ids']} | {log['fetched_ids']} |", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
