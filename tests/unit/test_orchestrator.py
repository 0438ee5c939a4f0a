"""The anytime behaviour: deadlines, aborts, failures and refine phases, with fake layers
registered at run time exactly as third-party plugins are."""
import asyncio
import time

import pytest

import lar
from lar.layer import BaseLayer
from lar.registry import register_layer, unregister_layer
from lar.types import Hit, Span


class SlowLayer(BaseLayer):
    """Returns one hit after 2 s unless cancelled: never finishes inside a short timebox."""
    name = "slowpoke"
    roles = frozenset({"generate"})
    cost_rank = 90

    async def search(self, query, scope, budget, candidates=None):
        await asyncio.sleep(2.0)
        u = scope.units()[0]
        return [Hit.single(self.name, Span(u.hash, 0, 1), rank=1, score=1.0, score_kind="x")]


class PartialLayer(BaseLayer):
    """Scans units until its budget runs out and reports how far it got."""
    name = "partial"
    roles = frozenset({"generate"})

    async def search(self, query, scope, budget, candidates=None):
        units = scope.units()
        hits = []
        for i, u in enumerate(units):
            if budget.expired():
                budget.notes["partial"] = True
                break
            hits.append(Hit.single(self.name, Span(u.hash, 0, 1), rank=len(hits) + 1, score=1.0,
                                   score_kind="x"))
            budget.set_coverage((i + 1) / len(units))
            budget.offer(hits)
            await asyncio.sleep(0.1)
        return hits


class CrashLayer(BaseLayer):
    name = "crashy"
    roles = frozenset({"generate"})

    async def search(self, query, scope, budget, candidates=None):
        raise ZeroDivisionError("boom")


@pytest.fixture
def fakes():
    for cls in (SlowLayer, PartialLayer, CrashLayer):
        register_layer(cls)
    yield
    for cls in (SlowLayer, PartialLayer, CrashLayer):
        unregister_layer(cls.name)


def test_call_returns_at_the_deadline_with_what_is_done(fakes, corpus, tmp_path):
    with lar.open(corpus, state=tmp_path / "s") as eng:
        t0 = time.monotonic()
        res = eng.search("parse_deadline", timebox=0.3)
        wall = time.monotonic() - t0
    assert wall < 0.3 + 0.25  # returns at the deadline, not after the slow layer's 2 s
    runs = {r.name: r for r in res.runs}
    assert runs["slowpoke"].state.value == "aborted"
    assert runs["slowpoke"].reason == "timebox ended before it finished"
    assert runs["slowpoke"].contributions == 0
    assert runs["grep"].state.value == "ran" and runs["grep"].contributions > 0
    assert runs["crashy"].state.value == "failed" and "ZeroDivisionError: boom" in runs["crashy"].reason
    assert runs["partial"].state.value == "aborted" and 0 < runs["partial"].coverage < 1
    assert runs["partial"].contributions >= 2  # what it had offered before the deadline
    assert "offered" in runs["partial"].reason
    assert any("grep" in h.signals for h in res.hits)
    # the cut-short run's weight in the default fusion is scaled by how much it scored of the
    # finished lists' leading units (lar.fusion.partial_factors); finished runs get no factor
    assert 0.0 <= runs["partial"].probe["partial_factor"] <= 1.0
    assert "partial_factor" not in (runs["grep"].probe or {})


def test_fusion_partial_mode_is_checked_and_keep_leaves_cut_runs_alone(fakes, corpus, tmp_path):
    with lar.open(corpus, state=tmp_path / "s", config={"fusion_partial": "maybe"}) as eng:
        with pytest.raises(lar.ConfigError, match="'guard' or 'keep'"):
            eng.search("parse_deadline", timebox=2)
    with lar.open(corpus, state=tmp_path / "s", config={"fusion_partial": "keep"}) as eng:
        res = eng.search("parse_deadline", timebox=0.3)
    runs = {r.name: r for r in res.runs}
    assert runs["partial"].state.value == "aborted" and runs["partial"].contributions >= 2
    assert "partial_factor" not in (runs["partial"].probe or {})


def test_null_result_is_distinguishable_from_not_running(fakes, engine):
    res = engine.search("zzz_no_such_text_zzz", timebox=0.2, layers=["grep", "fuzzy"])
    runs = {r.name: r for r in res.runs}
    assert runs["grep"].state.value == "ran" and runs["grep"].contributions == 0
    assert runs["fuzzy"].state.value == "skipped" and "no candidates" in runs["fuzzy"].reason
    assert runs["names"].state.value == "skipped" and "not selected" in runs["names"].reason


def test_registration_validates_plugins():
    from lar.errors import RegistrationError

    class NoName(BaseLayer):
        name = ""

        async def search(self, query, scope, budget, candidates=None):
            return []

    class SyncSearch(BaseLayer):
        name = "syncsearch"

        def search(self, query, scope, budget, candidates=None):  # not async
            return []

    class BadRoles(BaseLayer):
        name = "badroles"
        roles = frozenset({"rerank"})

        async def search(self, query, scope, budget, candidates=None):
            return []

    with pytest.raises(RegistrationError, match="'name'"):
        register_layer(NoName)
    with pytest.raises(RegistrationError, match="async def"):
        register_layer(SyncSearch)
    with pytest.raises(RegistrationError, match="roles"):
        register_layer(BadRoles)

    class DupGrep(BaseLayer):
        name = "grep"

        async def search(self, query, scope, budget, candidates=None):
            return []

    with pytest.raises(RegistrationError, match="already registered"):
        register_layer(DupGrep)


def test_builtin_layers_come_from_entry_points():
    from importlib.metadata import entry_points

    eps = {ep.name for ep in entry_points(group="lar.layers")}
    assert {"names", "grep", "fuzzy"} <= eps
    assert {"names", "grep", "fuzzy"} <= set(lar.registered_layers())
