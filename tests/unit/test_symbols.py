"""The ``symbols`` layer: tree-sitter definitions and call sites in eight languages, its query
forms, the enclosing-symbol context it adds to every hit, skips, and the layer contract."""
import asyncio

import pytest

import lar
from lar.layers.kits.code.treesitter import extract
from lar.core.errors import QueryError
from lar.core.layer import Budget
from lar.layers.structural import StructuralLayer
from lar.layers.symbols import SymbolsLayer, parse_query
from lar.core.registry import unregister_layer

PY = '''import os


@decorator
def top(a, b=1):
    """Top docstring."""
    return os.path.join(a, b)


class Engine(Base):
    """The engine."""

    def search(self, q):
        # comment
        return self.run(q)

    async def run(self, q):
        def inner():
            pass
        return top(q)
'''
JS = '''// Adds numbers.
function add(a, b) {
  return a + b;
}

/** A shape. */
class Shape {
  area() {
    return compute(this.w);
  }
}

const mul = (a, b) => a * b;
export function exported() { return add(1, 2); }
'''
TS = '''interface Point { x: number; y: number; }
type Id = string;
enum Color { Red, Green }
export abstract class Repo<T> implements Base {
  abstract find(id: Id): T;
  save(item: T): void { this.store.put(item); }
}
namespace NS { export function f(): void {} }
'''
TSX = '''export function App(props: Props) {
  return <div onClick={() => handle(props)}>hi</div>;
}
'''
GO = '''package main

// Server serves.
type Server struct {
	addr string
}

type Handler interface {
	Serve() error
}

// Start starts the server.
func (s *Server) Start(port int) error {
	return listen(s.addr, port)
}
'''
RUST = '''/// A point.
struct Point { x: i32 }

trait Area { fn area(&self) -> f64; }

impl Area for Point {
    /// Computes area.
    fn area(&self) -> f64 {
        compute(self.x)
    }
}

fn main() {
    let p = Point::new(1);
}
'''
JAVA = '''package x;

/** A widget. */
public class Widget extends Base {
    // Renders it.
    @Override
    public void render(int x) {
        helper.draw(x);
    }
    enum Mode { ON, OFF }
}
'''
C = '''#include <stdio.h>

/* A point. */
struct point { int x; };

// Entry point.
int main(int argc, char **argv) {
    printf("hi %d\\n", argc);
    return helper(argv);
}
'''
CPP = '''namespace geo {
// A shape.
class Shape {
public:
    virtual double area() const { return compute(w); }
};
struct Point { int x; };
}

double geo::Shape::perimeter() { return 2.0 * area(); }

int main() { geo::Shape s; s.area(); return 0; }
'''
SOURCES = {"a.py": PY, "a.js": JS, "a.ts": TS, "a.tsx": TSX, "a.go": GO, "a.rs": RUST,
           "A.java": JAVA, "a.c": C, "a.cpp": CPP}
LANG = {"a.py": "python", "a.js": "javascript", "a.ts": "typescript", "a.tsx": "tsx", "a.go": "go",
        "a.rs": "rust", "A.java": "java", "a.c": "c", "a.cpp": "cpp"}
# qualified name -> (kind, lines)
EXPECTED = {
    "a.py": {"top": ("function", (4, 7)), "Engine": ("class", (10, 20)),
             "Engine.search": ("method", (13, 15)), "Engine.run": ("method", (17, 20)),
             "Engine.run.inner": ("function", (18, 19))},
    "a.js": {"add": ("function", (2, 4)), "Shape": ("class", (7, 11)),
             "Shape.area": ("method", (8, 10)), "mul": ("function", (13, 13)),
             "exported": ("function", (14, 14))},
    "a.ts": {"Point": ("interface", (1, 1)), "Id": ("type", (2, 2)), "Color": ("enum", (3, 3)),
             "Repo": ("class", (4, 7)), "Repo.find": ("method", (5, 5)),
             "Repo.save": ("method", (6, 6)), "NS": ("namespace", (8, 8)),
             "NS.f": ("function", (8, 8))},
    "a.tsx": {"App": ("function", (1, 3))},
    "a.go": {"Server": ("struct", (4, 6)), "Handler": ("interface", (8, 10)),
             "Handler.Serve": ("method", (9, 9)), "Server.Start": ("method", (13, 15))},
    "a.rs": {"Point": ("struct", (2, 2)), "Area": ("trait", (4, 4)), "Area.area": ("method", (4, 4)),
             "Point.area": ("method", (8, 10)), "main": ("function", (13, 15))},
    "A.java": {"Widget": ("class", (4, 11)), "Widget.render": ("method", (6, 9)),
               "Widget.Mode": ("enum", (10, 10))},
    "a.c": {"point": ("struct", (4, 4)), "main": ("function", (7, 10))},
    "a.cpp": {"geo": ("namespace", (1, 8)), "geo.Shape": ("class", (3, 6)),
              "geo.Shape.area": ("method", (5, 5)), "geo.Point": ("struct", (7, 7)),
              "geo.Shape.perimeter": ("method", (10, 10)), "main": ("function", (12, 12))},
}
SIGNATURES = {
    ("a.py", "top"): "def top(a, b=1):", ("a.py", "Engine.run"): "async def run(self, q):",
    ("a.py", "Engine"): "class Engine(Base):", ("a.js", "add"): "function add(a, b)",
    ("a.js", "mul"): "const mul = (a, b) =>", ("a.ts", "Repo"): "export abstract class Repo<T> implements Base",
    ("a.ts", "Repo.save"): "save(item: T): void", ("a.go", "Server.Start"): "func (s *Server) Start(port int) error",
    ("a.go", "Server"): "type Server struct", ("a.rs", "Point.area"): "fn area(&self) -> f64",
    ("A.java", "Widget.render"): "@Override public void render(int x)",
    ("a.c", "main"): "int main(int argc, char **argv)", ("a.cpp", "geo.Shape.area"): "virtual double area() const",
}
DOCS = {
    ("a.py", "top"): "Top docstring.", ("a.py", "Engine"): "The engine.", ("a.py", "Engine.search"): "",
    ("a.js", "add"): "Adds numbers.", ("a.js", "Shape"): "A shape.", ("a.go", "Server"): "Server serves.",
    ("a.go", "Server.Start"): "Start starts the server.", ("a.rs", "Point"): "A point.",
    ("a.rs", "Point.area"): "Computes area.", ("A.java", "Widget"): "A widget.",
    ("A.java", "Widget.render"): "Renders it.", ("a.c", "point"): "A point.", ("a.c", "main"): "Entry point.",
    ("a.cpp", "geo.Shape"): "A shape.",
}


def _line_of(text: str, start: int) -> int:
    return text.encode()[:start].count(b"\n") + 1


@pytest.mark.parametrize("fname", sorted(SOURCES))
def test_definitions_per_language(fname):
    src = SOURCES[fname]
    ex = extract(src.encode(), LANG[fname])
    got = {d.qualified: (d.kind, d.lines) for d in ex.defs}
    assert got == EXPECTED[fname]
    for d in ex.defs:  # byte spans agree with the lines
        assert _line_of(src, d.start) == d.lines[0]
        assert src.encode()[d.start:d.end].strip() and d.end <= len(src.encode())
        if (fname, d.qualified) in SIGNATURES:
            assert d.signature == SIGNATURES[(fname, d.qualified)]
        if (fname, d.qualified) in DOCS:
            assert d.doc == DOCS[(fname, d.qualified)]
    assert not ex.errors


def test_call_sites_and_their_enclosing_definition():
    ex = extract(PY.encode(), "python")
    calls = {(c.name, c.callee, ex.defs[c.enclosing].qualified) for c in ex.calls}
    assert calls == {("join", "os.path.join", "top"), ("run", "self.run", "Engine.search"),
                     ("top", "top", "Engine.run")}
    c = next(c for c in ex.calls if c.name == "join")
    assert PY.encode()[c.start:c.end] == b"os.path.join(a, b)"
    ex = extract(JAVA.encode(), "java")
    assert [(c.name, c.callee) for c in ex.calls] == [("draw", "helper.draw")]
    ex = extract(RUST.encode(), "rust")
    assert {c.callee for c in ex.calls} == {"compute", "Point::new"}


def test_a_parse_with_errors_still_yields_what_parsed():
    src = b"def good(x):\n    return x\n\ndef broken(:\n    pass\n\nclass Fine:\n    pass\n"
    ex = extract(src, "python")
    names = {d.name for d in ex.defs}
    assert ex.errors and {"good", "Fine"} <= names


def test_header_falls_back_to_cpp():
    ex = extract(b"class Foo { public: int bar() { return 1; } };\n", "c", "cpp")
    assert ex.lang == "cpp" and {d.qualified for d in ex.defs} == {"Foo", "Foo.bar"}


# -- the layer in an engine ----------------------------------------------------------------
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
    for name, src in SOURCES.items():
        (root / name).write_text(src)
    (root / "notes.xyz").write_text("no grammar here\n")
    (root / "latin.py").write_bytes(b"# caf\xe9\ndef after_latin1():\n    return 1\n")
    return root


@pytest.fixture
def eng(registered, code, tmp_path):
    e = lar.open(code, state=tmp_path / "state")
    yield e
    e.close()


def _sym(eng, query, **kw):
    return eng.search({"symbols": query}, timebox=10, k=kw.pop("k", 20), **kw)


def test_name_queries_exact_case_insensitive_fuzzy_and_qualified(eng, code):
    eng.build(timebox=30, layers=["symbols"])
    res = _sym(eng, "search")
    top = res.hits[0]
    ev = top.evidence["symbols"]
    assert top.path == "a.py" and top.lines == (13, 15) and ev.score == 100.0
    assert eng.read(top.hash, (top.span.start, top.span.end)).startswith("def search(self, q):")
    assert dict(ev.details) == {"kind": "method", "name": "search", "qualified": "Engine.search",
                                "signature": "def search(self, q):", "docstring": "",
                                "lines": [13, 15]}
    folded = _sym(eng, "engine").hits[0]
    assert folded.evidence["symbols"].details["qualified"] == "Engine"
    assert folded.evidence["symbols"].score == 95.0
    fuzzy = _sym(eng, "Engin").hits
    assert fuzzy and fuzzy[0].evidence["symbols"].details["name"] == "Engine"
    assert 85 <= fuzzy[0].evidence["symbols"].score < 95
    quals = {h.evidence["symbols"].details["qualified"] for h in _sym(eng, "Shape.area").hits}
    assert {"Shape.area", "geo.Shape.area"} <= quals  # exact, and the tail of a longer name
    assert _sym(eng, "Engine.search").hits[0].lines == (13, 15)


def test_kind_filter_and_definition_form(eng):
    eng.build(timebox=30, layers=["symbols"])
    hits = _sym(eng, {"kind": "struct", "name": "Point"}).hits
    got = [(h.path, h.evidence["symbols"].details["qualified"], h.evidence["symbols"].score)
           for h in hits]
    assert sorted(got[:2]) == [("a.cpp", "geo.Point", 100.0), ("a.rs", "Point", 100.0)]
    assert got[2:] == [("a.c", "point", 95.0)]  # case-insensitive matches rank after exact ones
    assert [h.path for h in _sym(eng, {"definition": "Point", "kind": "interface"}).hits] == ["a.ts"]
    classes = {h.evidence["symbols"].details["qualified"] for h in _sym(eng, {"kind": "class"}).hits}
    assert {"Engine", "Shape", "Repo", "Widget", "geo.Shape"} <= classes


def test_callers(eng, code):
    eng.build(timebox=30, layers=["symbols"])
    hits = _sym(eng, {"callers": "area"}).hits
    raw = (code / "a.cpp").read_bytes()
    got = {(h.span.start, h.span.end): h.evidence["symbols"].details for h in hits}
    s1, s2 = raw.index(b"area()", raw.index(b"perimeter")), raw.index(b"s.area()")
    assert set(got) == {(s1, s1 + 6), (s2, s2 + 8)}
    assert got[(s1, s1 + 6)]["enclosing"]["qualified"] == "geo.Shape.perimeter"
    assert got[(s2, s2 + 8)]["enclosing"]["qualified"] == "main"
    assert got[(s2, s2 + 8)]["callee"] == "s.area"
    join = _sym(eng, {"callers": "os.path.join"}).hits
    assert len(join) == 1 and join[0].path == "a.py" and join[0].lines == (7, 7)
    assert _sym(eng, {"callers": "shutil.join"}).hits == ()


def test_enclosing_symbol_context_on_hits_of_other_layers(eng, code):
    res = eng.search("self.run", timebox=10, layers=["grep"])
    assert res.hits and "symbol" not in res.hits[0].context  # not built yet: no context
    eng.build(timebox=30, layers=["symbols"])
    hit = eng.search("self.run", timebox=10, layers=["grep"]).hits[0]
    assert hit.path == "a.py" and hit.lines == (15, 15)
    assert dict(hit.context["symbol"]) == {"name": "search", "qualified": "Engine.search",
                                           "kind": "method", "signature": "def search(self, q):",
                                           "lines": [13, 15]}
    hit = eng.search("helper.draw", timebox=10, layers=["grep"]).hits[0]
    assert hit.context["symbol"]["qualified"] == "Widget.render"
    assert "symbol" not in eng.search("no grammar here", timebox=10, layers=["grep"]).hits[0].context


def test_no_grammar_skip_is_visible_and_bytes_stay_exact(eng, code):
    eng.build(timebox=30, layers=["symbols"])
    layer = eng.layers["symbols"]
    st = layer.status(eng.scope_view())
    assert st.coverage == 1.0 and "no grammar for .xyz" in st.notes
    h = next(u.hash for u in eng.scope_view().units() if u.path == "notes.xyz")
    assert layer.manifest.entry(h)["reason"] == "no grammar for .xyz"
    hit = _sym(eng, "after_latin1").hits[0]  # a Latin-1 byte before the definition
    raw = (code / "latin.py").read_bytes()
    assert (hit.span.start, hit.span.end) == (raw.index(b"def after"), len(raw) - 1)


def test_unbuilt_units_are_not_searched_and_coverage_says_so(eng):
    layer = eng.layers["symbols"]
    budget = Budget.seconds(5)
    hits = asyncio.run(layer.search("search", eng.scope_view(), budget))
    assert hits == [] and budget.coverage == 0.0


def test_query_errors():
    for bad in ["", {"callers": ""}, {"kind": "gizmo"}, {"definition": "a", "callers": "b"},
                {"nam": "x"}, {"callers": "f", "kind": "class"}, {"name": "x", "min_score": 101}, 3]:
        with pytest.raises(QueryError):
            parse_query(bad)
    assert parse_query("  Engine.search ").name == "Engine.search"

# The layer is registered through pyproject's entry points, so tests/contract runs the
# contract suite against it with every other registered layer.
