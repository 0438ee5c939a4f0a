"""The anytime behaviour: deadlines, aborts, failures and refine phases, with fake layers
registered at run time exactly as third-party plugins are."""
import asyncio
import time

import pytest

import lar
from lar.core.background import ScoreBackground
from lar.core.layer import BaseLayer
from lar.core.registry import register_layer, unregister_layer
from lar.core.types import Hit, Span


class SlowLayer(BaseLayer):
    """Returns one hit after 5 s unless cancelled: never finishes inside a short timebox."""
    name = "slowpoke"
    roles = frozenset({"generate"})
    cost_rank = 90

    async def search(self, query, scope, budget, candidates=None):
        await asyncio.sleep(5.0)
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


class HalfBuiltLayer(BaseLayer):
    """Finishes in time, but as a building layer that has indexed half the scope: its list is
    drawn from the first units only."""
    name = "halfbuilt"
    roles = frozenset({"generate"})

    async def search(self, query, scope, budget, candidates=None):
        units = scope.units()
        half = units[: max(1, len(units) // 2)]
        budget.set_coverage(len(half) / len(units))
        return [Hit.single(self.name, Span(u.hash, 0, 1), rank=i + 1, score=1.0 / (i + 1),
                           score_kind="x") for i, u in enumerate(half)]


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
    # returns at the deadline, not after the slow layer's 5 s (the slack is for a loaded CI box)
    assert wall < 0.3 + 1.5
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
    # finished lists' leading units (lar.fusion.adaptive.partial_factors); finished runs get no factor
    assert 0.0 <= runs["partial"].probe["partial_factor"] <= 1.0
    assert "partial_factor" not in (runs["grep"].probe or {})


def test_fusion_partial_mode_is_checked_and_keep_leaves_cut_runs_alone(fakes, corpus, tmp_path):
    with pytest.raises(lar.ConfigError, match="'guard' or 'keep'"):  # refused at open
        lar.open(corpus, state=tmp_path / "s", config={"fusion_partial": "maybe"})
    with lar.open(corpus, state=tmp_path / "s", config={"fusion_partial": "keep"}) as eng:
        res = eng.search("parse_deadline", timebox=0.3)
    runs = {r.name: r for r in res.runs}
    assert runs["partial"].state.value == "aborted" and runs["partial"].contributions >= 2
    assert "partial_factor" not in (runs["partial"].probe or {})


def test_a_finished_run_over_part_of_the_scope_is_guarded_like_a_cut_one(tmp_path):
    from lar.fusion.pipeline import covers_part

    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(40):  # the needle in every fourth file: 5 of its 10 in the first half
        (corpus / f"f{i:02d}.txt").write_text(f"file {i}\n" + ("the needle is here\n" if i % 4 == 0 else ""))
    register_layer(HalfBuiltLayer)
    try:
        with lar.open(corpus, state=tmp_path / "s") as eng:
            res = eng.search("needle", timebox=5, layers=["grep", "halfbuilt"], k=100)
    finally:
        unregister_layer(HalfBuiltLayer.name)
    runs = {r.name: r for r in res.runs}
    half = runs["halfbuilt"]
    assert half.state.value == "ran" and half.coverage == 0.5 and covers_part(half)
    assert half.probe["usable"] and half.probe["n"] == 20
    assert runs["grep"].coverage == 1.0 and not covers_part(runs["grep"])
    # of grep's 10 files the half-built layer lists 5: its weight is halved, and the run
    # report shows the factor that was applied (the fusion runs by unit)
    assert len({h.span.hash for h in res.hits if "grep" in h.signals}) == 10
    assert half.probe["partial_factor"] == 0.5
    assert "partial_factor" not in (runs["grep"].probe or {})


def test_null_result_is_distinguishable_from_not_running(fakes, engine):
    res = engine.search("zzz_no_such_text_zzz", timebox=0.2, layers=["grep", "fuzzy"])
    runs = {r.name: r for r in res.runs}
    assert runs["grep"].state.value == "ran" and runs["grep"].contributions == 0
    assert runs["fuzzy"].state.value == "skipped" and "no candidates" in runs["fuzzy"].reason
    assert runs["names"].state.value == "skipped" and "not selected" in runs["names"].reason


def test_registration_validates_plugins():
    from lar.core.errors import RegistrationError

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


class _Scanner(BaseLayer):
    """Scores 25 spans of the longest unit on a straight line and reports a fixed background."""
    roles = frozenset({"generate"})
    top, step, background, reverse = 1.0, 0.01, None, False

    async def search(self, query, scope, budget, candidates=None):
        u = max(scope.units(), key=lambda u: u.size)
        order = range(24, -1, -1) if self.reverse else range(25)
        hits = [Hit.single(self.name, Span(u.hash, 4 * i, 4 * i + 2), rank=r + 1, score=self.top - self.step * r,
                           score_kind="x") for r, i in enumerate(order)]
        budget.set_background(ScoreBackground(**self.background))
        return hits


class ScanA(_Scanner):
    name = "scan-a"
    background = {"n": 5000, "mean": 0.5, "std": 0.02}  # its 25 scores span 12 background sds


class ScanB(_Scanner):
    name = "scan-b"
    top, step, reverse = 30.0, 0.5, True
    background = {"n": 5000, "mean": 10.0, "std": 8.0}  # its 25 scores span 1.5 sds


@pytest.fixture
def scanners():
    for cls in (ScanA, ScanB):
        register_layer(cls)
    yield
    for cls in (ScanA, ScanB):
        unregister_layer(cls.name)


def test_layer_backgrounds_reach_the_probe_and_bgz_fusion(scanners, corpus, tmp_path):
    model = {"kind": "lar-adaptive-fusion", "norm": "bgz",
             "routes": {"scan-a": {"base": 1.0}, "scan-b": {"base": 1.0}}}
    with lar.open(corpus, state=tmp_path / "s", config={"fusion_model": model}) as eng:
        res = eng.search("anything", timebox=5, layers=["scan-a", "scan-b"], k=3)
        runs = {r.name: r for r in res.runs}
        assert runs["scan-a"].probe["background"] == ScanA.background
        assert runs["scan-a"].probe["top_z"] == pytest.approx((1.0 - 0.5) / 0.02)
        assert runs["scan-b"].probe["top_z"] == pytest.approx((30.0 - 10.0) / 8.0)
        # scan-a's list stands out far more against its background: its order wins
        assert [h.span.start for h in res.hits] == [0, 4, 8]
        # the same lists, scan-b against a tight background (its scores now span 120 sds): b wins
        ScanB.background = {"n": 5000, "mean": 10.0, "std": 0.1}
        try:
            res = eng.search("anything else", timebox=5, layers=["scan-a", "scan-b"], k=3)
        finally:
            ScanB.background = {"n": 5000, "mean": 10.0, "std": 8.0}
        assert [h.span.start for h in res.hits] == [96, 92, 88]


def test_fusion_units_mode_is_checked_and_decides_what_adaptive_fuses_by(corpus, tmp_path, monkeypatch):
    import lar.fusion.pipeline as pipeline

    seen = []
    real = pipeline.adaptive_fusion

    def spy(runs, *args, units=None, **kw):
        seen.append(units)
        return real(runs, *args, units=units, **kw)

    monkeypatch.setattr(pipeline, "adaptive_fusion", spy)
    with pytest.raises(lar.ConfigError, match="'unit' or 'span'"):  # refused at open
        lar.open(corpus, state=tmp_path / "s", config={"fusion_units": "file"})
    with lar.open(corpus, state=tmp_path / "s") as eng:  # default: by unit
        res = eng.search("parse", timebox=5, layers=["grep"])
    assert res.hits and seen[-1] is not None
    assert all(seen[-1][h.span.id] == h.span.hash for h in res.hits)  # each place -> its unit
    with lar.open(corpus, state=tmp_path / "s", config={"fusion_units": "span"}) as eng:
        eng.search("parse", timebox=5, layers=["grep"])
    assert seen[-1] is None


class DeadlineSpy(BaseLayer):
    """Records the deadline its budget carries and returns one hit at once."""
    name = "deadlinespy"
    roles = frozenset({"generate"})
    seen: list = []

    async def search(self, query, scope, budget, candidates=None):
        DeadlineSpy.seen.append((time.monotonic(), budget.deadline))
        u = scope.units()[0]
        return [Hit.single(self.name, Span(u.hash, 0, 1), rank=1, score=1.0, score_kind="x")]


def test_deadline_reserve_is_measured_and_bounded():
    from lar.core.timebox import DeadlineReserve

    r = DeadlineReserve(initial=0.01, floor=0.002, cap=0.25, quantile=1.0, headroom=1.0)
    assert r.reserve(1.0) == 0.01  # nothing measured yet: the initial guess
    for x in (0.001, 0.03, 0.004, -1.0, float("nan")):
        r.observe(x)
    assert r.estimate() == 0.03  # the worst of what was measured (quantile 1), bad values ignored
    assert r.reserve(1.0) == 0.03
    assert r.reserve(0.04) == 0.01  # at most a quarter of the timebox
    r2 = DeadlineReserve(floor=0.002, quantile=0.0, headroom=1.0)
    r2.observe(0.0)
    assert r2.reserve(1.0) == 0.002  # at least the floor
    r3 = DeadlineReserve(window=2, quantile=1.0, headroom=1.0)
    for x in (0.5, 0.01, 0.02):
        r3.observe(x)
    assert r3.estimate() == 0.02  # only the last ``window`` calls count
    with pytest.raises(lar.LarError):
        DeadlineReserve(cap=0.0)


def test_layers_run_to_the_deadline_minus_the_post_layer_reserve(corpus, tmp_path):
    """The orchestrator hands its layers ``timebox - reserve`` (less the cancel margin), so the
    fusion and enrichment after them fit in the caller's timebox; the engine measures the
    reserve from its own calls."""
    from lar.engine.orchestrator import LAYER_MARGIN

    register_layer(DeadlineSpy)
    try:
        with lar.open(corpus, state=tmp_path / "s") as eng:
            eng.post_reserve.observe(0.05)  # as if a past call spent 50 ms after its layers
            reserve = eng.post_reserve.reserve(2.0)
            assert 0.05 <= reserve <= 0.5
            DeadlineSpy.seen.clear()
            before = time.monotonic()
            res = eng.search("parse_deadline", timebox=2.0, layers=["deadlinespy"])
            started, layer_deadline = DeadlineSpy.seen[-1]
            # the call started between ``before`` and the layer's start: its deadline is that
            # start + 2 s; the layer's is earlier by the reserve and the margin
            assert before + 2.0 - reserve - LAYER_MARGIN <= layer_deadline + 1e-6
            assert layer_deadline <= started + 2.0 - reserve - LAYER_MARGIN + 1e-6
            assert [h.signals for h in res.hits] == [("deadlinespy",)]
            # and the call measured its own post-layer cost into the reserve
            assert len(eng.post_reserve) == 2
    finally:
        unregister_layer(DeadlineSpy.name)


def test_the_reserve_measures_all_the_work_after_the_layers_but_the_spare_build(corpus, tmp_path):
    """Everything a call does after its layers (fusion, noting the request for the builder,
    coverage notes, enrichment) is what the next call keeps back from its layers; the spare
    build, which stops by itself before that reserve, is not."""
    with lar.open(corpus, state=tmp_path / "s") as eng:
        real_note, real_spare = eng.builder.note_request, eng.spare.run

        def slow_note(*a, **kw):
            time.sleep(0.08)
            return real_note(*a, **kw)

        async def slow_spare(*a, **kw):
            await asyncio.sleep(0.3)
            return await real_spare(*a, **kw)

        eng.builder.note_request = slow_note
        eng.spare.run = slow_spare
        eng.spare_build = True
        eng.search("parse_deadline", timebox=3.0, layers=["names"])
        seen = eng.post_reserve.estimate() / eng.post_reserve.headroom
        assert 0.08 <= seen < 0.3
