"""Derived views: the extractive generator (exact texts and spans), pluggable generators, the
central cache (reuse, prompt versions, corruption) and the ``derived`` layer end to end."""
import json
import shutil

import pytest

import lar
from lar.layers.derived import (CallableGenerator, DerivedCache, DerivedText, ExtractiveGenerator,
                        GeneratorError, GeneratorKey, SamplingGenerator, parse_reply,
                        resolve_generator)
from lar.layers.derived.spans import char_to_byte, find_words, first_sentence
from lar.core.errors import ConfigError, LarError, QueryError
from lar.store.extract import extract
from lar.layers.derived.layer import DerivedLayer, parse_query
from lar.core.registry import register_layer, registered_layers, unregister_layer

PY = '''#!/usr/bin/env python
"""Duration parsing for timeboxes.

Longer description that is not part of the summary.
"""
import re


@cache
def parse_duration(text: str,
                   default: float = 0.0) -> float:
    """Convert '5m' or '200ms' into seconds — naïve but fast.

    Raises ValueError on garbage.
    """
    return 0.0


class Budget:
    """A share of the caller's timebox."""

    def remaining(self):
        # no docstring here
        return 1.0
'''

JS = '''// Adds two numbers.
// Returns their sum.
function add(a, b) {
  return a + b;
}
'''

MD = '''---
title: x
---
# Installation guide

Run `pip install lar` to get started. Then open a folder.

```python
import lar
```

Configuration
-------------

- Set e.g. the timebox to 200 ms. More text here.

| a | b |
|---|---|

A closing paragraph with enough words. Second sentence.
'''

TEX = r'''\documentclass{article}
\usepackage{amsmath}
\begin{document}
\section{Method}\label{sec:method}
We bound the cost by Eq.~1 and Fig. 2 in all cases. The rest follows.
\begin{equation}
  c \le T
\end{equation}
\begin{theorem}
Every call returns before its deadline.
\end{theorem}
\noindent Short tail sentence here! And more.
\end{document}
'''

RST = '''=====
Title
=====

Intro paragraph of the document. Next.

.. code-block:: python

   x = 1

Usage
-----

Call the engine.
'''


def _derive(path, src):
    data = src.encode()
    out = ExtractiveGenerator().generate(data, path=path, document=extract(path, data))
    return [(t.kind, t.text, [data[s:e].decode() for s, e in t.source_spans]) for t in out], out


# -- the extractive generator ---------------------------------------------------------------
def test_extractive_python_docstrings_signatures_and_module_summary():
    got, texts = _derive("pkg/durations.py", PY)
    sig = "def parse_duration(text: str,\n                   default: float = 0.0) -> float:"
    assert got == [
        ("summary", "Duration parsing for timeboxes.", ["Duration parsing for timeboxes."]),
        ("signature", "def parse_duration(text: str, default: float = 0.0) -> float:", [sig]),
        ("docstring", "parse_duration: Convert '5m' or '200ms' into seconds — naïve but fast.",
         ["Convert '5m' or '200ms' into seconds — naïve but fast.", sig]),
        ("signature", "class Budget:", ["class Budget:"]),
        ("docstring", "Budget: A share of the caller's timebox.",
         ["A share of the caller's timebox.", "class Budget:"]),
        ("signature", "Budget.remaining: def remaining(self):", ["def remaining(self):"]),
    ]
    # byte offsets (the docstring has multi-byte characters before its end)
    assert [t.source_spans for t in texts][:3] == [((25, 56),), ((133, 213),), ((221, 278), (133, 213))]


def test_extractive_leading_comment_block_is_a_docstring():
    got, texts = _derive("add.js", JS)
    assert got == [
        ("docstring", "add: Adds two numbers. Returns their sum.",
         ["Adds two numbers.\n// Returns their sum.", "function add(a, b)"]),
        ("signature", "function add(a, b)", ["function add(a, b)"]),
    ]
    assert texts[0].source_spans == ((3, 42), (43, 61))


def test_extractive_markdown_headings_and_first_sentences():
    got, texts = _derive("docs/guide.md", MD)
    assert got == [
        ("heading", "Installation guide: Run `pip install lar` to get started.",
         ["# Installation guide", "Run `pip install lar` to get started."]),
        ("heading", "Configuration: Set e.g. the timebox to 200 ms.",
         ["Configuration", "Set e.g. the timebox to 200 ms."]),
        ("sentence", "A closing paragraph with enough words.",
         ["A closing paragraph with enough words."]),
    ]  # front matter, the code fence, the setext underline and the table are not prose
    assert [t.source_spans for t in texts] == [((17, 37), (39, 76)), ((124, 137), (155, 186)),
                                               ((225, 263),)]


def test_extractive_latex_skips_preamble_math_and_markup():
    got, _ = _derive("paper/main.tex", TEX)
    assert got == [
        ("heading", "Method: We bound the cost by Eq.~1 and Fig. 2 in all cases.",
         ["\\section{Method}\\label{sec:method}",
          "We bound the cost by Eq.~1 and Fig. 2 in all cases."]),
        ("sentence", "Every call returns before its deadline.",
         ["Every call returns before its deadline."]),
        ("sentence", "Short tail sentence here!", ["Short tail sentence here!"]),
    ]


def test_extractive_rst_and_unstructured_code():
    got, _ = _derive("index.rst", RST)
    assert got == [
        ("heading", "Title: Intro paragraph of the document.",
         ["=====\nTitle", "Intro paragraph of the document."]),
        ("heading", "Usage: Call the engine.", ["Usage", "Call the engine."]),
    ]
    assert _derive("settings.toml", "# The settings file. It is code.\nkey = 1\n")[0] == []


def test_first_sentence_and_word_matching():
    data = b"  A value, i.e. a number. Next one."
    assert first_sentence(data, 0, len(data)) == (2, 25)
    long = b"word " * 100
    s, e = first_sentence(long, 0, len(long), limit=22)
    assert long[s:e] == b"word word word word"
    assert first_sentence(b"   \n ", 0, 5) is None
    assert find_words(b"x = f(a,\n   b)", "f(a, b)", 0, 14) == (4, 14)
    assert find_words(b"# one\n# two\n", "one two", 0, 12, separators=rb"\s#") == (2, 11)
    assert char_to_byte("naïve café", [0, 3, 10]) == [0, 4, 12]


# -- values and pluggable generators --------------------------------------------------------
def test_derived_text_validates():
    t = DerivedText("  a summary  ", "summary", [[0, 5], (7, 9)])
    assert t.text == "a summary" and t.source_spans == ((0, 5), (7, 9)) and t.span == (0, 5)
    assert DerivedText.from_json(t.to_json()) == t
    for bad in [("", "summary", ((0, 1),)), ("x", "Not A Kind", ((0, 1),)),
                ("x", "summary", ()), ("x", "summary", ((3, 3),)), ("x", "summary", ((-1, 2),)),
                ("x", "summary", ((0.5, 2),)), ("x", "summary", 5)]:
        with pytest.raises(GeneratorError):
            DerivedText(*bad)
    with pytest.raises(GeneratorError, match="ends past"):
        t.check_bounds(8)
    assert issubclass(GeneratorError, LarError)


def test_callable_generator_strings_quotes_and_character_spans():
    text = "Grüße: parse the deadline here.\n"
    seen = []

    def fn(t, path):
        seen.append((t, path))
        return ["whole unit summary",
                {"text": "How are deadlines read?", "kind": "question", "quote": "parse  the\ndeadline"},
                {"text": "Where is the greeting?", "source_spans": [[0, 5]]},
                {"text": "A missing quote points to the unit.", "quote": "not there"}]

    gen = CallableGenerator(fn, "fake-llm", "m1", "p1")
    out = gen.generate(text.encode(), path="a.txt")
    assert seen == [(text.strip(), "a.txt")]  # the unit without surrounding whitespace
    data = text.encode()
    assert [(t.kind, [data[s:e].decode() for s, e in t.source_spans]) for t in out] == [
        ("summary", [text.strip()]), ("question", ["parse the deadline"]),
        ("summary", ["Grüße"]), ("summary", [text.strip()])]
    assert out[2].source_spans == ((0, 7),)  # 5 characters, 7 bytes
    with pytest.raises(GeneratorError, match="outside"):
        CallableGenerator(lambda t, p: [{"text": "x", "source_spans": [[0, 99]]}], "g", "m", "1") \
            .generate(b"short", path="a.txt")
    with pytest.raises(GeneratorError, match="keys"):
        CallableGenerator(lambda t, p: [{"txt": "x"}], "g", "m", "1").generate(b"short", path="a")
    with pytest.raises(GeneratorError, match="list"):
        CallableGenerator(lambda t, p: "x", "g", "m", "1").generate(b"short", path="a")
    with pytest.raises(GeneratorError):
        CallableGenerator(lambda t, p: [], "", "m", "1")


def test_callable_generator_per_chunk_points_to_each_chunk():
    data = ("first paragraph words " * 8 + "\n\n" + "second paragraph words " * 8 + "\n").encode()
    gen = CallableGenerator(lambda t, p: [t.split()[0] + " part"], "g", "m", "1", chunk_bytes=100)
    out = gen.generate(data, path="a.txt")
    assert [t.text for t in out] == ["first part", "second part"]
    assert [data[s:e].split()[0] for t in out for s, e in t.source_spans] == [b"first", b"second"]


def test_sampling_generator_builds_its_prompt_and_reads_the_reply():
    prompts = []

    def sample(prompt):
        prompts.append(prompt)
        return ("Sure.\nSUMMARY: Parses timebox strings.\n1. QUESTION: How is '200ms' read?\n"
                "QUESTION: What unit is returned?\nQUESTION: Third?\nQUESTION: Fourth?\n")

    gen = SamplingGenerator(sample, model="client-model-x", questions=2)
    out = gen.generate(b"def parse(x):\n    return x\n", path="src/t.py")
    assert len(prompts) == 1 and "src/t.py" in prompts[0] and "def parse(x):" in prompts[0]
    assert [(t.kind, t.text) for t in out] == [("summary", "Parses timebox strings."),
                                               ("question", "How is '200ms' read?"),
                                               ("question", "What unit is returned?")]
    assert all(t.source_spans == ((0, 26),) for t in out)
    assert (gen.name, gen.model, gen.prompt_version, gen.extractive) == (
        "sampling", "client-model-x", "sampling-v1", False)
    assert parse_reply("description: Short.\nnoise") == [{"text": "Short.", "kind": "description"}]
    with pytest.raises(GeneratorError, match="string"):
        SamplingGenerator(lambda p: None).generate(b"text here", path="a.txt")


def _fake_gen(text, path):
    return ["fake"]


def test_resolve_generator():
    assert isinstance(resolve_generator(None), ExtractiveGenerator)
    assert isinstance(resolve_generator("extractive"), ExtractiveGenerator)
    g = resolve_generator("tests.unit.test_derived:_fake_gen", "v7")
    assert isinstance(g, CallableGenerator) and (g.name, g.model, g.prompt_version) == (
        "_fake_gen", "unspecified", "v7")
    assert resolve_generator(g) is g
    for bad in ("nomodule", "no.such.module:x", 42):
        with pytest.raises(GeneratorError):
            resolve_generator(bad)
    key = GeneratorKey.of(g, "v8")
    assert key.prompt_version == "v8" and key.slug.startswith("_fake_gen--")
    assert key.slug != GeneratorKey.of(g, "v9").slug


# -- the central cache ----------------------------------------------------------------------
class CountingGenerator:
    """A fake model: one question per unit, pointing to its first line; counts its calls."""

    name, model, prompt_version, extractive = "counting", "fake-1", "q1", False

    def __init__(self):
        self.calls = []

    def generate(self, unit_text, *, path, document=None):
        self.calls.append(path)
        end = unit_text.find(b"\n") if b"\n" in unit_text else len(unit_text)
        return [DerivedText(f"question about {path}", "question", ((0, max(end, 1)),))]


def test_cache_reuses_detects_corruption_and_other_formats(tmp_path):
    cache = DerivedCache(tmp_path / "derived")
    gen = CountingGenerator()
    doc = extract("a.md", b"# Title\n\nBody text here.\n")
    texts, made = cache.get_or_create("ab" * 16, doc, "a.md", gen)
    assert made and gen.calls == ["a.md"]
    assert cache.get_or_create("ab" * 16, doc, "a.md", gen) == (texts, False)
    key = GeneratorKey.of(gen)
    p = cache.path(key, "ab" * 16)
    assert p == tmp_path / "derived" / key.slug / "ab" / f"{'ab' * 16}.json"
    assert json.loads(p.read_text())["texts"] == [t.to_json() for t in texts]
    assert json.loads((p.parent.parent / "generator.json").read_text())["model"] == "fake-1"
    for garbage in (b"{not json", json.dumps({"format": 1}).encode()):
        p.write_bytes(garbage)
        assert cache.get_or_create("ab" * 16, doc, "a.md", gen)[1] is True
    body = json.loads(p.read_text())
    body["texts"][0]["source_spans"] = [[0, 9999]]  # outside the unit
    p.write_text(json.dumps(body))
    assert cache.get_or_create("ab" * 16, doc, "a.md", gen)[1] is True
    assert cache.counts["corrupt"] == 3 and "corrupt cache file" in cache.events[-1]
    assert len(gen.calls) == 4
    # the same bytes read as another format are generated for that format
    assert cache.get_or_create("ab" * 16, extract("a.txt", doc.text), "a.txt", gen)[1] is True
    with pytest.raises(GeneratorError, match="DerivedText"):
        bad = CountingGenerator()
        bad.generate = lambda text, path, document: ["not a DerivedText"]
        cache.get_or_create("cd" * 16, doc, "a.md", bad)


# -- the layer ------------------------------------------------------------------------------
@pytest.fixture
def registered():
    had = "derived" in registered_layers()
    if not had:
        register_layer(DerivedLayer)
    yield
    if not had:
        unregister_layer("derived")


def _open(corpus, state, **config):
    return lar.open(corpus, state=state, config=config)


def _units_with_text(eng):
    return {r.hash for r in eng.index.live() if not r.path.endswith(".bin")}


def test_layer_finds_a_paraphrase_question_and_points_to_its_source(registered, corpus, tmp_path):
    def ask(text, path):
        if "parse_deadline" not in text:
            return []
        return [{"text": "How do I convert a human readable duration into seconds?",
                 "kind": "question", "quote": "def parse_deadline(value):"}]

    eng = _open(corpus, tmp_path / "state",
                derived_generator=CallableGenerator(ask, "paraphraser", "fake-llm", "1"))
    try:
        eng.build(timebox=120, layers=["derived", "bm25"])
        res = eng.search("human readable duration", layers=["derived"], timebox=10)
        assert len(res.hits) == 1
        hit = res.hits[0]
        data = (corpus / "src" / "timebox.py").read_bytes()
        start = data.index(b"def parse_deadline")
        assert (hit.span.start, hit.span.end) == (start, start + len("def parse_deadline(value):"))
        assert eng.fetch(hit.id).text == "def parse_deadline(value):"
        d = dict(hit.evidence["derived"].details)
        assert d == {"derived_text": "How do I convert a human readable duration into seconds?",
                     "kind": "question", "generator": "paraphraser", "model": "fake-llm",
                     "prompt_version": "1", "extractive": False,
                     "source_spans": [[start, start + 26]]}
        assert hit.signals == ("derived",)
        # the words are not in the text: a text layer finds nothing
        assert not eng.search("human readable duration", layers=["bm25"], timebox=10).hits
        st = eng.layers["derived"].status(eng.scope_view())
        assert st.origin == "derived" and "model-written" in st.notes
    finally:
        eng.close()


def test_layer_extractive_hits_fetch_their_source_spans(registered, corpus, tmp_path):
    eng = _open(corpus, tmp_path / "state")
    try:
        layer = eng.layers["derived"]
        assert layer.status(eng.scope_view()).coverage < 1.0
        eng.build(timebox=120, layers=["derived"])
        st = layer.status(eng.scope_view())
        assert st.coverage == 1.0 and st.origin == "derived"
        assert "generator extractive" in st.notes and "extractive: copied from the text, no model" in st.notes
        res = eng.search("timebox", layers=["derived"], timebox=10)
        got = {}
        for h in res.hits:
            d = h.evidence["derived"].details
            assert [h.span.start, h.span.end] == d["source_spans"][0] and d["extractive"] is True
            got[d["derived_text"]] = eng.fetch(h.id).text
        assert got == {
            "Timebox helpers.": "Timebox helpers.",
            "Every timebox returns.": "Every timebox returns.",
            "parse_deadline: Turn a timebox such as '200ms' into seconds.":
                "Turn a timebox such as '200ms' into seconds.",
            "Timebox analysis: The anytime deadline $t \\le T$ bounds the call.":
                "\\section{Timebox analysis}",
        }
        for bad in ("  ", None, {"q": 1}):
            with pytest.raises(QueryError):
                parse_query(bad)
    finally:
        eng.close()


def test_layer_cache_is_reused_and_a_new_prompt_version_regenerates(registered, corpus, tmp_path):
    gen = CountingGenerator()
    state = tmp_path / "state"
    eng = _open(corpus, state, derived_generator=gen)
    try:
        eng.build(timebox=120, layers=["derived"])
        n = len(_units_with_text(eng))
        assert len(gen.calls) == n == 5  # copy_of_timebox.py shares timebox.py's hash
        shutil.rmtree(state / "layers" / "derived")  # the layer's own index is gone ...
    finally:
        eng.close()
    eng = _open(corpus, state, derived_generator=gen)
    try:
        eng.build(timebox=120, layers=["derived"])
        assert len(gen.calls) == 5  # ... the central cache is not: nothing generated again
        hits = eng.search("question about docs/fusion.md", layers=["derived"], timebox=10).hits
        assert hits[0].path == "docs/fusion.md" and eng.fetch(hits[0].id).text == "# Reciprocal rank fusion"
    finally:
        eng.close()
    eng = _open(corpus, state, derived_generator=gen, derived_prompt_version="q2")
    try:
        eng.build(timebox=120, layers=["derived"])
        assert len(gen.calls) == 10
        assert sorted(p.name for p in (state / "derived").iterdir()) == sorted(
            [GeneratorKey.of(gen).slug, GeneratorKey.of(gen, "q2").slug])
    finally:
        eng.close()


def test_layer_regenerates_a_corrupt_cache_file_and_reports_it(registered, corpus, tmp_path):
    gen = CountingGenerator()
    eng = _open(corpus, tmp_path / "state", derived_generator=gen)
    try:
        layer = eng.layers["derived"]
        eng.build(timebox=120, layers=["derived"])
        h = eng.index.get_many(["docs/fusion.md"])["docs/fusion.md"].hash
        layer.cache.path(layer.key, h).write_bytes(b"\x00garbage")
        layer.manifest.forget([h])
        eng.build(timebox=120, layers=["derived"])
        assert gen.calls.count("docs/fusion.md") == 2
        assert json.loads(layer.cache.path(layer.key, h).read_text())["hash"] == h
        st = layer.status(eng.scope_view())
        assert st.coverage == 1.0 and "1 corrupt entries regenerated" in st.notes
        assert eng.search("question about docs/fusion.md", layers=["derived"], timebox=10).hits
    finally:
        eng.close()


def test_layer_reports_a_failing_generator_and_bad_config(registered, corpus, tmp_path):
    def broken(text, path):
        return [{"text": "x", "source_spans": [[0, 10 ** 9]]}]

    eng = _open(corpus, tmp_path / "state", derived_generator=broken)
    try:
        eng.build(timebox=120, layers=["derived"])
        st = eng.layers["derived"].status(eng.scope_view())
        assert st.coverage == 1.0 and "units failed: GeneratorError" in st.notes
        assert not eng.search("anything", layers=["derived"], timebox=10).hits
    finally:
        eng.close()
    with pytest.raises(ConfigError):
        _open(corpus, tmp_path / "s2", derived_prompt_version=3)
    with pytest.raises(GeneratorError):
        _open(corpus, tmp_path / "s3", derived_generator="nomodule")
