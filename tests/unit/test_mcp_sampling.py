"""The derived layer written by the MCP client's model (sampling): ``build(generator="client")``
over stdio with the SDK's own client and a deterministic fake model, the clear error for a
client without sampling, and the generator swap of the derived layer in-process."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio

from lar.layers.derived import ExtractiveGenerator, GeneratorError
from lar.apps.mcp import LarTools

REPO = Path(__file__).resolve().parents[2]
MODEL = "fake-client-model"
CODE = '''"""Timebox helpers."""


def parse_deadline(value):
    """Turn a timebox such as '200ms' into seconds."""
    return float(value)
'''
NOTES = "Reciprocal rank fusion of routes.\n"


def make_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "timebox.py").write_text(CODE)
    (root / "docs" / "fusion.md").write_text(NOTES)
    return root


def fake_reply(prompt: str) -> str:
    """The fake model: a reply built from the prompt only (no randomness)."""
    m = re.search(r"Read the excerpt of (\S+) below", prompt)
    if m is None:  # lar's probe for the model name
        return "OK"
    if "parse_deadline" in prompt:
        return ("SUMMARY: zorblaxian chronometry helpers for deadlines\n"
                "QUESTION: how does quibblification of a timebox work?\nnoise line")
    return f"SUMMARY: flumpish notes about {m.group(1)}"


async def _sampling_session(root: Path, state: Path, sampling: bool) -> list[tuple[str, bool, dict]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client, types

    prompts: list[str] = []

    async def sampling_callback(context, params):
        prompt = params.messages[0].content.text
        prompts.append(prompt)
        return types.CreateMessageResult(role="assistant", model=MODEL,
                                         content=types.TextContent(text=fake_reply(prompt)))

    params = StdioServerParameters(
        command=sys.executable, cwd=str(REPO),
        args=["-m", "lar.apps.cli", "mcp", "--root", str(root), "--state", str(state),
              "--layers", "derived,bm25", "--no-background"])  # builds only when asked
    log: list[tuple[str, bool, dict]] = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write,
                                 sampling_callback=sampling_callback if sampling else None) as session:
            await session.initialize()

            async def call(name: str, args: dict) -> dict:
                res = await session.call_tool(name, args)
                body = json.loads(res.content[0].text)
                log.append((name, not res.is_error, body))
                return body

            if sampling:
                await call("build", {"generator": "client", "timebox": 60})
                found = await call("search", {"query": "zorblaxian chronometry", "layers": ["derived"],
                                              "timebox": 10, "k": 5})
                await call("fetch", {"id": found["hits"][0]["id"]})
                await call("search", {"query": "quibblification", "layers": ["derived"],
                                      "timebox": 10, "k": 5})
                log.append(("prompts", True, {"prompts": prompts}))
            else:
                await call("build", {"generator": "client", "timebox": 60})
                await call("inventory", {"limit": 5})  # the server keeps serving
                await call("build", {"generator": "extractive", "timebox": 60})
                await call("search", {"query": "zorblaxian", "layers": ["derived"], "timebox": 10})
                await call("search", {"query": "turn a timebox into seconds", "layers": ["derived"],
                                      "timebox": 10, "k": 5})
    return log


def test_build_with_the_client_model_over_stdio(tmp_path):
    root = make_root(tmp_path)
    state = tmp_path / "state"
    log = anyio.run(_sampling_session, root, state, True)
    (_, ok_b, build), (_, ok_s, found), (_, ok_f, fetched), (_, ok_q, asked), (_, _, sent) = log
    assert ok_b and build["generator"] == {"name": "sampling", "model": MODEL,
                                           "prompt_version": "sampling-v1", "extractive": False}
    assert build["layers"]["derived"]["ok"] == 2 and build["layers"]["derived"]["coverage"] == 1.0
    # the probe, then one request per unit (each small file is one chunk), with path and text
    prompts = sent["prompts"]
    assert prompts[0] == "Reply with the single word OK." and len(prompts) == 3
    assert sorted(re.search(r"excerpt of (\S+) below", p).group(1) for p in prompts[1:]) == [
        "docs/fusion.md", "src/timebox.py"]
    assert ok_s and [h["path"] for h in found["hits"]] == ["src/timebox.py"]
    hit = found["hits"][0]
    assert hit["signals"] == ["derived"] and hit["lines"] == [1, 6]
    assert hit["derived"] == {"text": "zorblaxian chronometry helpers for deadlines",
                              "kind": "summary", "generator": "sampling", "model": MODEL}
    assert ok_f and fetched["path"] == "src/timebox.py" and fetched["text"] == CODE.rstrip("\n")
    assert ok_q and asked["hits"][0]["derived"] == {
        "text": "how does quibblification of a timebox work?", "kind": "question",
        "generator": "sampling", "model": MODEL}
    assert asked["hits"][0]["id"] == hit["id"]


def test_client_without_sampling_gets_a_clear_error(tmp_path):
    root = make_root(tmp_path)
    log = anyio.run(_sampling_session, root, tmp_path / "state", False)
    (_, ok_c, refused), (_, ok_i, inv), (_, ok_e, built), (_, ok_z, none), (_, ok_s, found) = log
    assert not ok_c and refused["type"] == "SamplingUnavailableError"
    assert "did not declare the sampling capability" in refused["error"]
    assert "generator='extractive'" in refused["error"]
    assert ok_i and inv["total"] == 2
    assert ok_e and built["generator"]["name"] == "extractive" and built["generator"]["extractive"]
    assert ok_z and none["hits"] == []
    assert ok_s and found["hits"][0]["path"] == "src/timebox.py"
    assert found["hits"][0]["derived"]["generator"] == "extractive"


class FakeClient:
    def __init__(self, model: str = MODEL, fail: bool = False):
        self.offers_sampling = True
        self.model, self.fail, self.prompts = model, fail, []

    def sample(self, prompt: str, max_tokens: int) -> tuple[str, str]:
        self.prompts.append(prompt)
        if self.fail and len(self.prompts) > 1:
            raise GeneratorError("declined by the user")
        return fake_reply(prompt), self.model


def test_generator_swap_keeps_each_keys_built_state_apart(tmp_path):
    root = make_root(tmp_path)
    tools = LarTools(root, state=tmp_path / "state", layers=["derived"])
    try:
        def call(name, args, client=None):
            r = tools.call(name, args, client=client)
            return r.ok, json.loads(r.text)

        ok, first = call("build", {"generator": "extractive", "timebox": 60})
        assert ok and first["layers"]["derived"]["ok"] == 2
        layer = tools.engine.layers["derived"]
        extractive_version = layer.build_version
        # a client whose model declines after the probe: units stay pending, none is failed
        ok, declined = call("build", {"generator": "client", "timebox": 60}, FakeClient(fail=True))
        assert ok and declined["layers"]["derived"]["ok"] == 0
        assert layer.built() == {} and layer.build_version != extractive_version
        assert layer.status(tools.engine.scope_view()).coverage == 0.0
        # between calls the client's model is unreachable: a plain build builds nothing
        ok, idle = call("build", {"timebox": 60})
        assert ok and idle["layers"]["derived"] == {"state": "ran", "ok": 0, "skipped": 0,
                                                     "failed": 0, "pending": 0, "coverage": 0.0}
        client = FakeClient()
        ok, built = call("build", {"generator": "client", "timebox": 60}, client)
        assert ok and built["layers"]["derived"]["ok"] == 2 and len(client.prompts) == 3
        assert (tmp_path / "state" / "derived").is_dir()
        ok, found = call("search", {"query": "flumpish", "timebox": 10})
        assert ok and [h["path"] for h in found["hits"]] == ["docs/fusion.md"]
        # back to extractive: its units were kept, nothing is rebuilt, the model's texts are gone
        ok, back = call("build", {"generator": "extractive", "timebox": 60})
        assert ok and back["layers"]["derived"]["ok"] == 0
        assert layer.build_version == extractive_version and set(layer.built().values()) == {"ok"}
        ok, gone = call("search", {"query": "flumpish", "timebox": 10})
        assert ok and gone["hits"] == []
        # the Python API: use_generator(None) is the configured generator; bad ones are refused
        assert layer.use_generator(None).name == "extractive"
        assert isinstance(layer.generator, ExtractiveGenerator)
        try:
            layer.use_generator(42)
        except GeneratorError as exc:
            assert "derived_generator must be a generator" in str(exc)
        else:
            raise AssertionError("use_generator(42) was accepted")
        assert layer.key.name == "extractive"
        ok, wrong = call("build", {"generator": "client", "layers": ["bm25"]}, client)
        assert not ok and "applies to the derived layer" in wrong["error"]
    finally:
        tools.close()
