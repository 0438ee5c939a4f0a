"""The MCP server over stdio, driven by the MCP SDK's own client (a real subprocess), plus the
SDK-free tool layer in-process."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from lar.apps.mcp import SPECS, LarTools

REPO = Path(__file__).resolve().parents[2]
LAYERS = ["names", "grep", "bm25", "trigram"]
CODE = '''"""Timebox helpers."""


def parse_deadline(value):
    """Turn a timebox such as '200ms' into seconds."""
    return float(value)


class AnytimeScheduler:
    def run(self, layers):
        return [layer for layer in layers]
'''


def make_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "timebox.py").write_text(CODE)
    (root / "docs" / "fusion.md").write_text("# Fusion\n\nReciprocal rank fusion of routes.\n")
    (root / "docs" / "notes.txt").write_text("the deadline is near\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP SECRET\n")
    (root / "escape").symlink_to(tmp_path / "outside")
    return root


def test_specs_match_the_python_api_names():
    by = {s.name: s for s in SPECS}
    assert list(by) == ["status", "search", "fetch", "inventory", "run_tool", "build"]
    search = by["search"].input_schema()
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    assert list(search["properties"]) == ["query", "timebox", "k", "layers", "fusion", "source", "scope"]
    assert by["fetch"].input_schema()["required"] == ["id"]
    assert by["run_tool"].input_schema()["properties"]["timeout"]["default"] == 30


def test_tool_layer_in_process(tmp_path):
    root = make_root(tmp_path)
    tools = LarTools(root, state=tmp_path / "state", layers=LAYERS)
    try:
        r = tools.call("search", {"query": "parse_deadline", "timebox": "5s", "k": 3})
        hit = json.loads(r.text)["hits"][0]
        assert r.ok and hit["path"] == "src/timebox.py" and set(hit) == {
            "id", "path", "lines", "excerpt", "signals", "rank", "score"}
        assert hit["rank"] == 1 and isinstance(hit["score"], float)
        assert json.loads(r.text)["score_scale"]
        bad = tools.call("inventory", {"limit": 0})
        assert not bad.ok and json.loads(bad.text) == {
            "error": "inventory: argument 'limit' must be an integer from 1 to 2000, got 0 (int)",
            "type": "ToolArgumentError"}
        assert json.loads(tools.call("inventory", {"limit": 2}).text)["next_offset"] == 2
    finally:
        tools.close()


async def _session(root: Path, state: Path) -> list[tuple[str, bool, dict]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, cwd=str(REPO),
        args=["-m", "lar.apps.cli", "mcp", "--root", str(root), "--state", str(state),
              "--layers", ",".join(LAYERS), "--allow", "grep", "--allow", "ls",
              "--allow", "cat", "--allow", "find", "--allow", "sleep"])
    log: list[tuple[str, bool, dict]] = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            log.append(("list", True, {"names": [t.name for t in listed.tools],
                                       "outputs": {t.name: t.output_schema for t in listed.tools},
                                       "inputs": {t.name: t.input_schema for t in listed.tools},
                                       "search": next(t.description for t in listed.tools
                                                      if t.name == "search")}))

            async def call(name: str, args: dict) -> dict:
                res = await session.call_tool(name, args)  # checks structuredContent's schema
                body = json.loads(res.content[0].text)
                if not res.is_error and listed_schema(listed, name) is not None:
                    assert res.structured_content == body
                log.append((name, not res.is_error, body))
                return body

            await call("build", {"timebox": 20})
            await call("status", {})
            found = await call("search", {"query": "parse_deadline", "timebox": 5, "k": 5})
            await call("fetch", {"id": found["hits"][0]["id"]})
            await call("inventory", {"limit": 2, "glob": "docs/**"})
            view = await call("run_tool", {"command": ["grep", "-rn", "deadline", "."]})
            await call("fetch", {"id": view["id"] + ":1"})
            await call("fetch", {"id": view["id"]})
            await call("search", {"query": {"grep": "parse_deadline"}, "source": "tools",
                                  "timebox": 6})
            for name, args in [
                ("run_tool", {"command": ["cat", "../outside/secret.txt"]}),
                ("run_tool", {"command": ["cat", str(root.parent / "outside" / "secret.txt")]}),
                ("run_tool", {"command": ["cat", "escape/secret.txt"]}),
                ("run_tool", {"command": ["rg", "secret"]}),
                ("run_tool", {"command": ["find", ".", "-exec", "cat", "{}", ";"]}),
                ("run_tool", {"command": ["sleep", "20"], "timeout": 0.5}),
                ("run_tool", {"command": "cat docs/notes.txt"}),
                ("no_such_tool", {}),
                ("search", {"query": 42}),
                ("search", {"qurey": "deadline"}),
                ("fetch", {"id": "t000000000000:1"}),
                ("search", {"query": "deadline", "fusion": "borda"}),
                ("fetch", {"id": "3fa9c1d2e4b5:" + "1" * 300}),
            ]:
                await call(name, args)
                await call("inventory", {"limit": 1})  # the server keeps serving
    return log


def test_mcp_server_over_stdio_with_the_sdk_client(tmp_path):
    root = make_root(tmp_path)
    log = anyio.run(_session, root, tmp_path / "state")
    names = log[0][2]["names"]
    assert names == ["status", "search", "fetch", "inventory", "run_tool", "build"]
    outputs = log[0][2]["outputs"]
    assert {n for n, sch in outputs.items() if sch} == {"status", "search", "inventory", "build"}
    assert outputs["search"]["properties"]["hits"]["type"] == "array"
    inputs = log[0][2]["inputs"]  # the input schemas the client got are the models' own
    assert inputs == {s.name: s.model.model_json_schema() for s in SPECS}
    assert inputs["search"]["properties"]["k"]["maximum"] == 200
    assert "grep: literal text" in log[0][2]["search"] and "{'regex': ...}" in log[0][2]["search"]
    (_, ok_b, build), (_, ok_s, status), (_, ok_q, found), (_, ok_f, fetched) = log[1:5]
    assert ok_b and build["layers"]["bm25"]["coverage"] == 1.0
    assert ok_s and status["units"] == 3 and status["tools"]["allowed"] == ["grep", "ls", "cat",
                                                                            "find", "sleep"]
    assert ok_q and found["hits"][0]["path"] == "src/timebox.py" and found["hits"][0]["rank"] == 1
    assert {r["layer"] for r in found["runs"]} == set(LAYERS)
    assert ok_f and fetched["text"] == "def parse_deadline(value):"
    _, ok_i, inv = log[5]
    assert ok_i and inv["total"] == 2 and [u["path"] for u in inv["units"]] == ["docs/fusion.md",
                                                                                 "docs/notes.txt"]
    (_, ok_v, view), (_, ok_it, item), (_, ok_all, whole) = log[6:9]
    assert ok_v and view["id"].startswith("t") and view["exit"] == 0 and view["lines"] == 2
    assert ok_it and item["text"] == fetched_item(whole["text"], item["lines"])
    assert view["text"] == whole["text"] and "items" not in view  # small: the text passes through
    assert ok_all and sorted(whole["text"].splitlines()) == [
        "./docs/notes.txt:1:the deadline is near", "./src/timebox.py:4:def parse_deadline(value):"]
    _, ok_t, tool_hits = log[9]
    assert ok_t and tool_hits["hits"][0]["id"].startswith(view["id"] + ":L")
    assert "parse_deadline" in tool_hits["hits"][0]["excerpt"]
    errors = log[10::2]
    alive = log[11::2]
    assert all(ok and body["total"] == 3 for _, ok, body in alive) and len(alive) == 13
    assert [ok for _, ok, _ in errors] == [False] * 13
    messages = [body["error"] for _, _, body in errors]
    expected = ["outside the root", "outside the root", "symlink that leaves the root",
                "command 'rg' is not on the allow-list", "'-exec' of find is refused",
                "did not finish within 0.5 s", "must be a list of strings",
                "unknown tool 'no_such_tool'", "must be text or an object",
                "unknown argument 'qurey'", "no cached tool output",
                "search: argument 'fusion' must be one of route-unique, rrf,",
                "fetch: argument 'id' must be a hit id or a tool id of at most 256 characters"]
    assert len(messages) == len(expected)
    for msg, want in zip(messages, expected):
        assert want in msg, (msg, want)


def listed_schema(listed, name: str):
    return next((t.output_schema for t in listed.tools if t.name == name), None)


def fetched_item(whole: str, lines: list[int]) -> str:
    return "".join(whole.splitlines(keepends=True)[lines[0] - 1:lines[1]])
