"""One contract suite, run against every registered layer (built-in or plugin)."""
import asyncio
import time

import pytest

import lar
from lar.core.layer import Budget, Candidate
from lar.core.registry import registered_layers
from lar.core.scope import Scope
from lar.store import content_hash
from lar.core.types import LayerStatus, Span

LAYERS = sorted(registered_layers())
GRACE = 0.5  # seconds a layer may overrun its budget (process start-up, thread hand-off, a
# loaded 2-core CI machine); the point is that it stops, not how fast: speed is in benchmarks/


def _candidates(eng, view):
    return [Candidate(Span(u.hash, 0, u.size), u.path) for u in view.units()]


def _built(eng, name):
    """Building layers are built first (the contract is about searching a built layer)."""
    if not getattr(eng.layers[name], "always_current", True):
        eng.build(timebox=600, layers=[name])


def _search(eng, name, text, scope=None, seconds=2.0, build=True):
    if build:
        _built(eng, name)
    layer = eng.layers[name]
    view = eng.scope_view(scope)
    special = getattr(layer, "contract_queries", {})
    if text in special:  # layers whose query form is not free text say what to ask instead
        q = special[text]
    else:
        q = layer.default_query(text) if hasattr(layer, "default_query") else text
    cands = _candidates(eng, view) if "generate" not in layer.roles else None
    budget = Budget.seconds(seconds, pool=50)
    t0 = time.monotonic()
    hits = asyncio.run(layer.search(q, view, budget, cands))
    return hits, time.monotonic() - t0, budget


def _check_hits(eng, name, hits):
    live = {r.hash: r for r in eng.index.live()}
    ranks = []
    for h in hits:
        assert name in h.signals and name in h.evidence
        assert h.hash in live, f"{name} returned a hash that is not current"
        data = (eng.root / eng.index.paths_for_hash(h.hash)[0]).read_bytes()
        assert content_hash(data) == h.hash
        assert 0 <= h.span.start <= h.span.end <= len(data)
        for s, e in h.evidence[name].sub_spans:
            assert 0 <= s <= e <= len(data)
        ranks.append(h.evidence[name].rank)
    assert ranks == list(range(1, len(ranks) + 1))


def _query(eng, name, text):
    """The query each layer reads from plain text, or its own contract query if it has one."""
    layer = eng.layers[name]
    return getattr(layer, "contract_queries", {}).get(text, text)


@pytest.mark.parametrize("name", LAYERS)
def test_building_layers_report_coverage_before_and_after(engine, name):
    layer = engine.layers[name]
    if getattr(layer, "always_current", True):
        assert layer.status(engine.scope_view()).coverage == 1.0
        return
    before = layer.status(engine.scope_view()).coverage
    engine.build(timebox=600, layers=[name])
    after = layer.status(engine.scope_view())
    assert before < 1.0 and after.coverage == 1.0 and after.built_units == after.units


@pytest.mark.parametrize("name", LAYERS)
def test_status_is_valid(engine, name):
    st = engine.layers[name].status(engine.scope_view())
    assert isinstance(st, LayerStatus) and st.name == name
    assert st.query_format and st.granularity and 0 <= st.coverage <= 1


@pytest.mark.parametrize("name", LAYERS)
def test_finds_something_with_valid_spans(engine, name):
    hits, _, _ = _search(engine, name, "timebox")
    assert hits, f"{name} found nothing for 'timebox'"
    _check_hits(engine, name, hits)


@pytest.mark.parametrize("name", LAYERS)
def test_respects_its_budget(engine, corpus, name):
    for i in range(300):  # enough material that a careless layer would overrun
        (corpus / f"bulk_{i}.txt").write_text("timebox deadline scheduler\n" * 200)
    engine.index_now()
    hits, elapsed, _ = _search(engine, name, "timebox", seconds=0.05)
    assert elapsed < 0.05 + GRACE
    _check_hits(engine, name, hits)


@pytest.mark.parametrize("name", LAYERS)
def test_empty_scope(engine, name):
    hits, _, _ = _search(engine, name, "timebox", scope=Scope(include=("no/such/dir/**",)))
    assert hits == []
    hits, _, _ = _search(engine, name, "timebox", scope=Scope(hashes=frozenset()))
    assert hits == []


@pytest.mark.parametrize("name", LAYERS)
def test_deleted_file_is_never_returned(engine, corpus, name):
    (corpus / "docs" / "fusion.md").unlink()
    hits, _, _ = _search(engine, name, "Reciprocal rank fusion")
    paths = {p for h in hits for p in engine.index.paths_for_hash(h.hash)}
    assert "docs/fusion.md" not in paths
    _check_hits(engine, name, hits)


# What the non-UTF-8 and Unicode tests must find: the file, from every layer whose queries reach
# its prose. The layers that cannot, and why (any other layer, a plugin too, must find it):
CANNOT_FIND = {
    "formula": "matches LaTeX formulas, and these files hold none",
    "structural": "matches tree-sitter patterns in source code, and these files are prose",
    "symbols": "matches definitions in source code, and these files are prose",
}
CANNOT_FIND_TEXT = {
    ("names", "Straße"): "matches paths, and no path holds it",
    ("names", "東京"): "matches paths, and no path holds it",
    ("names", "naïve café"): "matches paths, and no path holds it",
    ("derived", "Straße"): "matches derived texts (first sentences, headings): it is on line 2",
}
OWN_QUERY = {("names", "broken_utf8_marker"): "latin1"}  # names matches the file's path


def _require_found(eng, name, text, hits, path):
    if name in CANNOT_FIND or (name, text) in CANNOT_FIND_TEXT:
        return
    found = {p for h in hits for p in eng.index.paths_for_hash(h.hash)}
    assert path in found, f"{name} did not find {path} for {text!r}: {sorted(found)}"


@pytest.mark.parametrize("name", LAYERS)
def test_non_utf8_file(engine, name):
    # docs/latin1.txt: a Latin-1 byte (not valid UTF-8) on line 1, the marker on line 2
    text = "broken_utf8_marker"
    hits, _, _ = _search(engine, name, OWN_QUERY.get((name, text), text))
    _check_hits(engine, name, hits)
    _require_found(engine, name, text, hits, "docs/latin1.txt")


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("text", ["Straße", "東京", "naïve café"])
def test_unicode_query(engine, name, text):
    hits, _, _ = _search(engine, name, text)
    _check_hits(engine, name, hits)
    _require_found(engine, name, text, hits, "docs/unicode.txt")
