"""The ``structural`` layer: ast-grep patterns at query time, byte-exact spans after non-ASCII
text, captures, errors, language inference and override, budget, and the layer contract."""
import asyncio

import pytest

import lar
from lar.core.errors import LayerFailedError, QueryError
from lar.core.layer import Budget
from lar.layers.structural import StructuralLayer, byte_offsets, parse_query
from lar.layers.symbols import SymbolsLayer
from lar.core.registry import unregister_layer

# non-ASCII characters (2-, 3- and 4-byte UTF-8) before the match, and one after
PY = 'greeting = "Grüße aus Köln, 東京 😀"\nfh = open(path, "r", encoding="utf-8")  # naïve\nprint(greeting, fh)\nok = not names\n'
JS = 'const s = "é";\nopen(file, 1);\nconsole.log(s, 2, 3);\n'


@pytest.fixture
def registered():
    before = set(lar.registered_layers())
    for cls in (SymbolsLayer, StructuralLayer):
        lar.register_layer(cls)
    yield
    for cls in (SymbolsLayer, StructuralLayer):
        if cls.name not in before:
            unregister_layer(cls.name)


@pytest.fixture
def code(tmp_path):
    root = tmp_path / "code"
    root.mkdir()
    (root / "a.py").write_text(PY, encoding="utf-8")
    (root / "b.js").write_text(JS, encoding="utf-8")
    # a Latin-1 byte (not UTF-8) before the match
    (root / "latin.py").write_bytes(b"# caf\xe9 \xff\xfe\nopen(x)\n")
    (root / "tool").write_text("#!/usr/bin/env python\nopen(script_arg)\n")  # no extension
    (root / "notes.md").write_text("open(in_prose)\n")
    return root


@pytest.fixture
def eng(registered, code, tmp_path):
    e = lar.open(code, state=tmp_path / "state")
    yield e
    e.close()


def _run(eng, query, seconds=10.0, scope=None, pool=100):
    layer = eng.layers["structural"]
    budget = Budget.seconds(seconds, pool=pool)
    return asyncio.run(layer.search(query, eng.scope_view(scope), budget)), budget


def test_byte_exact_spans_and_captures_after_non_ascii_text(eng, code):
    res = eng.search({"structural": "open($A, $$$REST)"}, timebox=10)
    assert sorted(h.path for h in res.hits) == ["a.py", "b.js"]
    hit = next(h for h in res.hits if h.path == "a.py")
    raw = (code / "a.py").read_bytes()
    start = raw.index(b"open(")
    end = raw.index(b'"utf-8")') + len(b'"utf-8")')
    assert (hit.span.start, hit.span.end) == (start, end)
    assert eng.read(hit.hash, (hit.span.start, hit.span.end)) == 'open(path, "r", encoding="utf-8")'
    ev = hit.evidence["structural"]
    caps = ev.details["captures"]
    assert ev.details["lang"] == "python"
    assert caps["$A"] == {"text": "path", "span": [raw.index(b"path"), raw.index(b"path") + 4]}
    assert [c["text"] for c in caps["$$$REST"]] == ['"r"', 'encoding="utf-8"']
    for c in caps["$$$REST"]:
        s, e = c["span"]
        assert raw[s:e].decode() == c["text"]
    assert list(ev.sub_spans)[0] == (raw.index(b"path"), raw.index(b"path") + 4)
    assert hit.lines == (2, 2)


def test_spans_after_bytes_that_are_not_utf8(eng, code):
    hits, _ = _run(eng, {"pattern": "open($A)", "lang": "python"}, scope=lar.Scope(include=("latin.py",)))
    raw = (code / "latin.py").read_bytes()
    assert [(h.span.start, h.span.end) for h in hits] == [(raw.index(b"open"), raw.index(b"open") + 7)]
    assert hits[0].evidence["structural"].details["captures"]["$A"]["span"] == [raw.index(b"x)"), raw.index(b"x)") + 1]


def test_language_is_inferred_per_file(eng, code):
    hits, budget = _run(eng, "open($A, $B)")
    assert {eng.index.paths_for_hash(h.hash)[0] for h in hits} == {"b.js"}
    assert budget.coverage == 1.0
    hits, _ = _run(eng, "console.log($$$ARGS)")
    assert [c["text"] for c in hits[0].evidence["structural"].details["captures"]["$$$ARGS"]] == ["s", "2", "3"]


def test_language_override(eng, code):
    hits, _ = _run(eng, "open($A)")
    assert {eng.index.paths_for_hash(h.hash)[0] for h in hits} == {"latin.py"}  # tool, notes.md: no language
    hits, _ = _run(eng, {"pattern": "open($A)", "lang": "py"})
    paths = {eng.index.paths_for_hash(h.hash)[0] for h in hits}
    assert paths == {"latin.py", "tool", "notes.md"}  # files without a language of their own too
    assert all(h.evidence["structural"].details["lang"] == "python" for h in hits)
    hits, _ = _run(eng, {"pattern": "open($A, $B)", "lang": "javascript"})
    assert {eng.index.paths_for_hash(h.hash)[0] for h in hits} == {"b.js"}


def test_invalid_pattern_and_unknown_language_are_query_errors(eng):
    with pytest.raises(QueryError, match=r"def \("):
        _run(eng, "def (")
    with pytest.raises(QueryError, match="a b c"):
        _run(eng, {"pattern": "a b c", "lang": "python"})
    with pytest.raises(QueryError, match="klingon"):
        _run(eng, {"pattern": "open($A)", "lang": "klingon"})
    with pytest.raises(QueryError):
        parse_query({"pattern": ""})
    with pytest.raises(QueryError):
        parse_query({"regex": "x"})
    res = eng.search({"structural": "def (", "grep": "open"}, timebox=10)
    runs = {r.name: r for r in res.runs}
    assert runs["structural"].state.value == "failed" and "def (" in runs["structural"].reason
    assert runs["grep"].state.value == "ran" and res.hits  # the other layer is unaffected
    with pytest.raises(LayerFailedError):
        eng.search({"structural": "def ("}, timebox=10, strict=True)


def test_pattern_valid_in_some_languages_only(eng):
    hits, budget = _run(eng, "not $A")  # one Python node; two JavaScript ones
    assert [h.evidence["structural"].details["captures"]["$A"]["text"] for h in hits] == ["names"]
    assert budget.report().details["pattern_skipped_languages"] == ["javascript"]


def test_patterns_that_parse_with_errors_still_match_what_they_can(eng, code):
    # tree-sitter-javascript reads this pattern as an ERROR node, yet ast-grep matches with it
    (code / "m.js").write_text("import x from 'y';\n")
    (code / "s.cpp").write_text("int main() { geo::Shape s; s.area(); return 0; }\n")
    eng.index_now()
    hits, _ = _run(eng, {"pattern": "import $X from $M", "lang": "javascript"})
    assert [h.evidence["structural"].details["captures"]["$X"]["text"] for h in hits] == ["x"]
    hits, _ = _run(eng, "$O.area()")  # an ERROR wrapper around a complete call in C++
    assert [h.evidence["structural"].details["captures"]["$O"]["text"] for h in hits] == ["s"]
    with pytest.raises(QueryError, match="does not parse as cpp"):
        _run(eng, {"pattern": "class $C { $$$ }", "lang": "cpp"})  # matched nothing


def test_context_and_selector(eng, code):
    (code / "main.go").write_text('package main\n\nfunc main() {\n\tfmt.Println("hé", 2)\n}\n')
    eng.index_now()
    # tree-sitter-go reads a bare `fmt.Println(...)` as a type conversion: give it a context
    assert _run(eng, "fmt.Println($$$A)")[0] == []
    hits, _ = _run(eng, {"pattern": "fmt.Println($$$A)", "context": "func t() { fmt.Println($$$A) }",
                         "selector": "call_expression", "lang": "go"})
    raw = (code / "main.go").read_bytes()
    assert [(h.span.start, h.span.end) for h in hits] == [
        (raw.index(b"fmt"), raw.index(b"2)") + 2)]
    assert [c["text"] for c in hits[0].evidence["structural"].details["captures"]["$$$A"]] == ['"hé"', "2"]
    with pytest.raises(QueryError, match="selector"):
        parse_query({"pattern": "x", "context": "x"})


def test_plain_text_is_not_a_pattern(eng):
    layer = eng.layers["structural"]
    assert layer.default_query("open file") is None
    hits, budget = _run(eng, None)
    assert hits == [] and budget.coverage == 1.0
    res = eng.search("open", timebox=10)
    run = next(r for r in res.runs if r.name == "structural")
    assert run.state.value == "skipped" and "mapping form" in run.reason


def test_budget_and_pool(eng):
    hits, budget = _run(eng, "open($$$)", seconds=0.0)
    assert hits == [] and budget.coverage == 0.0 and budget.report().partial
    hits, budget = _run(eng, "open($$$)", pool=1)
    assert len(hits) == 1 and budget.report().truncated and budget.coverage < 1.0


def test_byte_offsets():
    text = "aé東😀b"
    assert byte_offsets(text, [0, 1, 2, 3, 4, 5]) == {0: 0, 1: 1, 2: 3, 3: 6, 4: 10, 5: 11}
    text = b"\xe9x".decode("utf-8", errors="surrogateescape")
    assert byte_offsets(text, [1, 2]) == {1: 1, 2: 2}

# The layer is registered through pyproject's entry points, so tests/contract runs the
# contract suite against it with every other registered layer.
