"""Offline fusion (the harness re-fusing each route's recorded list) and online fusion (the engine's
own search) go through one pipeline, ``lar.fusion.pipeline.fuse_hits``: on the same lists they give
the same ranking, for every policy."""
from __future__ import annotations

import pytest

import lar
from lar.core.request import SearchRequest
from lar.fusion.pipeline import fuse_hits
from lar.fusion.policies import POLICIES
from lar_evals.query import docs_of_hits, run_query

# deterministic generate layers: a layer's list does not depend on what else runs
ROUTES = ["grep", "names", "bm25", "trigram"]
QUERIES = ["parse the timebox", "fusion of ranked lists", "route unique candidates", "tokenize words"]
WORDS = ("timebox parse ranked lists fusion route unique candidates tokenize words layer search "
         "score background deadline").split()
FILES = {
    "src/timebox.py": "def parse_timebox(value):\n    \"\"\"Parse a timebox such as 200ms.\"\"\"\n"
                      "    return float(value)\n",
    "src/fusion.py": "def fuse(lists):\n    # reciprocal rank fusion of ranked lists\n    return lists\n",
    "src/tokens.py": "def tokenize(text):\n    return text.split()  # words of the text\n",
    "docs/fusion.md": "# Fusion\n\nRanked lists are fused; route unique candidates keep a slot.\n",
    "docs/timebox.md": "# Timebox\n\nEvery search stops at its timebox and returns what it has.\n",
    "notes/words.txt": "Words, tokens and ranked candidates: a tokenize step splits words.\n",
    # enough units for whole-scan score backgrounds and lists longer than the pool
    **{f"gen/n{i:02d}.txt": " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 9 + i % 7)) + "\n"
       for i in range(60)},
}
# a fitted model on the scale that reads each layer's reported background (as a user's own may be)
BGZ_MODEL = {"kind": "lar-adaptive-fusion", "norm": "bgz", "default": {"base": 1.0},
             "routes": {"bm25": {"base": 1.5, "signal": -0.5}, "grep": {"base": 0.5, "agree": 0.5}}}


@pytest.fixture(scope="module", params=["packaged", "bgz"])
def engine(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    config = {"fusion_model": BGZ_MODEL} if request.param == "bgz" else {}
    eng = lar.open(root, state=tmp_path_factory.mktemp("state"), config=config)
    eng.build(timebox=120, layers=["bm25", "trigram"])
    yield eng
    eng.close()


@pytest.mark.parametrize("policy", POLICIES)
def test_the_harness_offline_fusion_equals_the_engines_search(engine, policy):
    path_to_doc = {p: p for p in FILES}
    order = engine.layer_order(ROUTES)
    for q in QUERIES:
        got = run_query(engine, q, routes=ROUTES, order=order, fusion=[policy], k=5, attribution_k=5,
                        rrf_c=60.0, timebox=30.0, scope=None, path_to_doc=path_to_doc)
        online = engine.search(q, layers=ROUTES, fusion=policy, k=5, timebox=30.0)
        assert all(r.state.value in ("ran", "skipped") for r in online.runs)  # no run cut short
        assert got["rankings"][f"fusion:{policy}"] == docs_of_hits([h.paths for h in online.hits], path_to_doc)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_engine_fuses_its_layer_lists_through_the_pipeline(engine, policy):
    for q in QUERIES:
        online = engine.search(q, layers=ROUTES, fusion=policy, k=10, timebox=30.0)
        assert online.layer_hits, "the layers found something"
        settings = engine.fusion_settings(SearchRequest(q, fusion=policy, k=10))
        offline = fuse_hits(online.layer_hits, settings, {r.name: r for r in online.runs})
        assert [h.id for h in engine.enrich(offline.hits)] == [h.id for h in online.hits]
        assert [h.signals for h in engine.enrich(offline.hits)] == [h.signals for h in online.hits]
