"""The MCP tools' input models (lar/apps/mcp/inputs.py): the JSON Schema given to clients is
the models' own, the models bind and refuse with messages that name the argument, and the
schema never refuses a call the server accepts. In-process (no server): the real client is
driven in test_mcp_server.py and tests/security/test_mcp_attacks.py."""
from __future__ import annotations

import jsonschema
import pytest

from lar.apps.mcp import SPECS, ToolArgumentError
from lar.apps.mcp.inputs import SPEC_BY_NAME, SearchIn
from lar.apps.toolcache.security import MAX_ARG_CHARS, MAX_ARGS
from lar.fusion.policies import POLICIES


def bind(tool: str, args):
    return SPEC_BY_NAME[tool].bind(args)


def refused(tool: str, args) -> str:
    with pytest.raises(ToolArgumentError) as got:
        bind(tool, args)
    return str(got.value)


def test_every_tool_has_a_model_that_forbids_extra_arguments():
    assert [s.name for s in SPECS] == ["status", "search", "fetch", "inventory", "run_tool", "build"]
    for s in SPECS:
        assert s.model.model_config["extra"] == "forbid"
        schema = s.input_schema()
        assert schema == s.model.model_json_schema()
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert list(schema["properties"]) == list(s.params)
        assert all(p.get("description") for p in schema["properties"].values()), s.name


def test_the_schema_carries_the_constraints():
    search = SPEC_BY_NAME["search"].input_schema()["properties"]
    assert (search["k"]["minimum"], search["k"]["maximum"], search["k"]["type"]) == (1, 200, "integer")
    assert search["timebox"] == {"type": ["number", "string"], "exclusiveMinimum": 0, "maximum": 120,
                                 "default": 0.5, "description": "seconds the call may take",
                                 "title": "Timebox"}
    assert search["fusion"]["enum"] == list(POLICIES) and "default" not in search["fusion"]
    assert search["source"]["enum"] == ["files", "tools"] and search["source"]["default"] == "files"
    command = SPEC_BY_NAME["run_tool"].input_schema()["properties"]["command"]
    assert (command["minItems"], command["maxItems"]) == (1, MAX_ARGS)
    assert command["items"] == {"type": "string", "maxLength": MAX_ARG_CHARS}
    fetch = SPEC_BY_NAME["fetch"].input_schema()
    assert fetch["required"] == ["id"] and fetch["properties"]["id"]["maxLength"] == 256
    assert SPEC_BY_NAME["build"].input_schema()["properties"]["generator"]["enum"] == ["client", "extractive"]


def test_binding_fills_defaults_and_normalises():
    assert bind("search", {"query": "x"}) == {"query": "x", "timebox": 0.5, "k": 20, "layers": None,
                                              "fusion": None, "source": "files", "scope": None}
    got = bind("search", {"query": {"grep": "def main"}, "timebox": "200ms", "layers": "grep,bm25",
                          "scope": "src/**", "k": None, "fusion": "rrf"})
    assert got == {"query": {"grep": "def main"}, "timebox": 0.2, "k": 20, "layers": ["grep", "bm25"],
                   "fusion": "rrf", "source": "files", "scope": ["src/**"]}
    assert bind("run_tool", {"command": ["ls"], "timeout": None}) == {
        "command": ["ls"], "cwd": ".", "timeout": 30, "refresh": False}
    assert bind("build", {"timebox": "2m"})["timebox"] == 120.0
    assert bind("status", None) == {} and bind("inventory", {"offset": 10**9})["offset"] == 10**9
    assert isinstance(SearchIn.model_validate({"query": "x"}), SearchIn)


@pytest.mark.parametrize("tool,args,message", [
    ("search", {"qurey": "x"}, "search: unknown argument 'qurey'; its arguments are query, timebox, "
                               "k, layers, fusion, source, scope"),
    ("status", {"x": 1}, "status: unknown argument 'x'; its arguments are (none)"),
    ("search", {}, "search: missing argument 'query' (text, or an object {layer: query} to give "
                   "each layer its own query)"),
    ("search", [1], "search: arguments must be an object, got [1] (list)"),
    ("search", {"query": "  "}, "search: argument 'query' must be text or an object {layer: query} "
                                '(e.g. {"grep": "def main"}), got "  " (str)'),
    ("search", {"query": {}}, "search: argument 'query' must be text or an object {layer: query} "
                              '(e.g. {"grep": "def main"}), got {} (dict); Dictionary should have '
                              "at least 1 item after validation, not 0"),
    ("search", {"query": "x", "k": 0}, "search: argument 'k' must be an integer from 1 to 200, got 0 (int)"),
    ("search", {"query": "x", "k": True}, "search: argument 'k' must be an integer from 1 to 200, got true (bool)"),
    ("search", {"query": "x", "k": "3"}, "search: argument 'k' must be an integer from 1 to 200, got \"3\" (str)"),
    ("search", {"query": "x", "k": 2.0}, "search: argument 'k' must be an integer from 1 to 200, got 2.0 (float)"),
    ("search", {"query": "x", "timebox": "nan"},
     "search: argument 'timebox' must be seconds in (0, 120] (a number, or text such as '200ms'), "
     "got \"nan\" (str)"),
    ("search", {"query": "x", "timebox": 121}, "search: argument 'timebox' must be seconds in (0, 120] "
                                               "(a number, or text such as '200ms'), got 121 (int)"),
    ("search", {"query": "x", "timebox": False}, "search: argument 'timebox' must be seconds in "
                                                 "(0, 120] (a number, or text such as '200ms'), got false (bool)"),
    ("search", {"query": "x", "fusion": "borda"},
     "search: argument 'fusion' must be one of route-unique, rrf, combsum, combmnz, adaptive, pvalue, "
     "got \"borda\" (str)"),
    ("search", {"query": "x", "source": "web"}, "search: argument 'source' must be one of files, tools, "
                                                "got \"web\" (str)"),
    ("search", {"query": "x", "layers": []}, "search: argument 'layers' must be a list of 1 to 256 layer "
                                             "names (or one comma-separated string of them), got [] (list); "
                                             "Value should have at least 1 item after validation, not 0"),
    ("search", {"query": "x", "layers": ["grep", "a b"]},
     "search: argument 'layers' must be a list of 1 to 256 layer names (or one comma-separated string "
     "of them), got [\"grep\", \"a b\"] (list); layers[1]: String should match pattern '^[^\\s,]+$'"),
    ("search", {"query": "x", "scope": ["src/**", ""]},
     "search: argument 'scope' must be a glob or a list of at most 256 globs, got [\"src/**\", \"\"] "
     "(list); scope[1]: String should have at least 1 character"),
    ("fetch", {"id": "t" * 300}, "fetch: argument 'id' must be a hit id or a tool id of at most 256 "
                                 "characters, got \"" + "t" * 59 + " (str); String should have at most "
                                 "256 characters"),
    ("inventory", {"offset": -1}, "inventory: argument 'offset' must be an integer from 0 to "
                                  "1000000000, got -1 (int)"),
    ("run_tool", {"command": "ls -la"}, "run_tool: argument 'command' must be a list of strings such as "
                                        "[\"rg\", \"-n\", \"TODO\", \"src\"] (no shell line; 1 to 256 of "
                                        "them, each at most 4096 characters), got \"ls -la\" (str)"),
    ("run_tool", {"command": None}, "run_tool: argument 'command' must be a list of strings such as "
                                    "[\"rg\", \"-n\", \"TODO\", \"src\"] (no shell line; 1 to 256 of "
                                    "them, each at most 4096 characters), got null (NoneType)"),
    ("run_tool", {"command": ["ls"], "refresh": "yes"}, "run_tool: argument 'refresh' must be true or "
                                                        "false, got \"yes\" (str)"),
    ("run_tool", {"command": ["ls"], "cwd": ""}, "run_tool: argument 'cwd' must be a non-empty string "
                                                 "of at most 4096 characters, got \"\" (str)"),
    ("run_tool", {"command": ["ls"], "timeout": 601}, "run_tool: argument 'timeout' must be seconds in "
                                                      "(0, 600] (a number, or text such as '200ms'), got 601 (int)"),
    ("build", {"generator": "gpt"}, "build: argument 'generator' must be one of client, extractive, got "
                                    "\"gpt\" (str)"),
])
def test_refusals_name_the_argument(tool, args, message):
    assert refused(tool, args) == message


def test_size_limits_match_the_run_tool_guard():
    assert "not 257" in refused("run_tool", {"command": ["rg"] * (MAX_ARGS + 1)})
    assert bind("run_tool", {"command": ["rg"] * MAX_ARGS})["command"] == ["rg"] * MAX_ARGS
    msg = refused("run_tool", {"command": ["rg", "x" * (MAX_ARG_CHARS + 1)]})
    assert msg.endswith("command[1]: String should have at most 4096 characters")
    assert bind("run_tool", {"command": ["rg", "x" * MAX_ARG_CHARS]})["command"][1] == "x" * MAX_ARG_CHARS


ACCEPTED = [("search", {"query": "x", "timebox": 120, "k": 200, "layers": ["grep"], "fusion": "pvalue",
                        "source": "tools", "scope": ["a/**", "b"]}),
            ("search", {"query": {"grep": {"regex": "a.b"}}, "timebox": "1.5s", "layers": "grep,bm25"}),
            ("fetch", {"id": "3fa9c1d2e4b5:120-480", "context": 200}),
            ("inventory", {"limit": 2000, "offset": 0, "glob": "src/**"}),
            ("run_tool", {"command": ["rg", "", "-n"], "cwd": "src", "timeout": 0.5, "refresh": True}),
            ("build", {"timebox": 600, "layers": ["derived"], "generator": "client", "scope": "x"}),
            ("status", {})]
REFUSED = [("search", {"query": "x", "k": 201}), ("search", {"query": "x", "timebox": 0}),
           ("search", {"query": "x", "extra": 1}), ("search", {"query": ""}),
           ("search", {"query": "x", "fusion": "borda"}), ("search", {"query": "x", "scope": [""]}),
           ("fetch", {"id": "x" * 257}), ("fetch", {}), ("inventory", {"limit": 0}),
           ("inventory", {"offset": 10**9 + 1}), ("run_tool", {"command": []}),
           ("run_tool", {"command": ["ls"], "timeout": 600.5}), ("run_tool", {"command": [1]}),
           ("run_tool", {"command": ["ls"], "refresh": 1}), ("build", {"generator": "x"}),
           ("build", {"layers": []})]


@pytest.mark.parametrize("tool,args", ACCEPTED)
def test_the_schema_accepts_what_the_server_accepts(tool, args):
    bind(tool, args)
    jsonschema.validate(args, SPEC_BY_NAME[tool].input_schema())


@pytest.mark.parametrize("tool,args", REFUSED)
def test_what_the_schema_refuses_the_server_refuses(tool, args):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, SPEC_BY_NAME[tool].input_schema())
    refused(tool, args)
