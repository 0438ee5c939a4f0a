"""The formula layer: normalisation (hand-checked token lists), macros, scanning, similarity,
search with exact byte spans, and the layer contract suite run against it."""
from __future__ import annotations

import asyncio
import json

import pytest

import lar
from lar.core.errors import QueryError
from lar.layers.formula import find_formulas, normalise, normalise_tokens, parse_macros, strip_delimiters
from lar.layers.formula.scan import scan_notebook_json, scan_text
from lar.layers.formula.similarity import features, similarity
from lar.core.layer import Budget
from lar.layers.formula.layer import FormulaLayer, accepts_path, parse_query
from lar.core.registry import registered_layers, unregister_layer


def toks(s: str) -> str:
    return " ".join(normalise_tokens(s))


# -- normalisation ---------------------------------------------------------------------------
def test_hand_checked_token_list():
    assert normalise_tokens(r"\frac{a}{b} + \alpha^2") == [
        "\\frac", "{", "V1", "}", "{", "V2", "}", "+", "V3", "^", "{", "2", "}"]


def test_placeholders_numbered_by_first_appearance():
    assert toks("x + y = y") == "V1 + V2 = V2"
    assert toks("a^2+b^2=c^2") == toks("x^2+y^2=z^2") == "V1 ^ { 2 } + V2 ^ { 2 } = V3 ^ { 2 }"
    assert toks(r"\frac{a}{b}") == toks(r"\frac{x}{y}")
    assert toks("x + x") != toks("x + y")


def test_synonyms_and_redundant_braces():
    assert toks(r"\dfrac{a}{b}") == toks(r"\tfrac ab") == toks(r"\frac{a}{b}")
    assert toks(r"x \le y \ne z \to w") == r"V1 \leq V2 \neq V3 \rightarrow V4"
    assert toks(r"\lbrace x \rbrace") == r"\{ V1 \}"
    assert toks("x^{2}") == toks("x^2") and toks("{x}+y") == toks("x+y")
    assert toks("α ≤ β") == toks(r"\alpha \leq \beta") == r"V1 \leq V2"


def test_formatting_dropped_and_words_kept():
    assert toks(r"\left( x \right)") == toks("(x)") == "( V1 )"
    assert toks(r"\displaystyle \sum_{i=1}^{n} x_i \, \quad ~") == \
        r"\sum _ { V1 = 1 } ^ { V2 } V3 _ { V1 }"
    assert toks(r"\int f(x) \mathrm{d}x") == r"\int V1 ( V2 ) d V2"
    assert toks(r"x \text{ if } x > 0") == "V1 if V1 > 0"
    assert toks(r"\mathrm{sin}\,x") == toks(r"\sin x") == r"\sin V1"
    assert toks(r"\operatorname*{arg\,max}_\theta \mathbb{E}[f]") == r"argmax _ { V1 } \mathbb{E} [ V2 ]"
    assert toks(r"\left. \frac{\partial f}{\partial x}\right|_{x=0}") == \
        r"\frac { \partial V1 } { \partial V2 } | _ { V2 = 0 }"
    assert toks(r"E = mc^2 \label{eq:e} \nonumber .") == "V1 = V2 V3 ^ { 2 }"
    assert toks(r"x' + f''(x) + x^\prime") == "V1 + V2 ( V3 ) + V1"


def test_environments_inside_math():
    assert toks(r"\begin{aligned} a &= b \\ c &= d, \end{aligned}") == r"V1 = V2 \\ V3 = V4"
    assert toks(r"\begin{pmatrix} a & b \end{pmatrix}") == r"\begin{pmatrix} V1 V2 \end{pmatrix}"
    assert toks(r"\sqrt[3]{x}") == r"\sqrt [ 3 ] { V1 }"


def test_newcommand_macros_resolved():
    src = (r"\newcommand{\R}{\mathbb{R}} \newcommand\norm[1]{\left\|#1\right\|}"
           r"\def\pair#1#2{(#1, #2)} \DeclareMathOperator*{\argmin}{arg\,min}"
           r"\newcommand{\sub}[2][x]{#1_{#2}} % \newcommand{\C}{ignored}")
    macros, spans = parse_macros(src)
    assert set(macros) == {"\\R", "\\norm", "\\pair", "\\argmin", "\\sub"} and len(spans) == 5
    assert toks(r"\mathbb{R}^n") == " ".join(normalise(r"\R^n", macros).tokens) == r"\mathbb{R} ^ { V1 }"
    assert " ".join(normalise(r"\norm{a+b}", macros).tokens) == r"\| V1 + V2 \|"
    assert " ".join(normalise(r"\pair{u}{v}", macros).tokens) == "( V1 , V2 )"
    assert " ".join(normalise(r"\argmin_x", macros).tokens) == "argmin _ { V1 }"
    assert " ".join(normalise(r"\sub{i} + \sub[y]{j}", macros).tokens) == \
        "V1 _ { V2 } + V3 _ { V4 }"


def test_recursive_macros_do_not_hang():
    macros, _ = parse_macros(r"\newcommand{\a}{\b x}\newcommand{\b}{\a y}\def\c{\c}")
    n = normalise(r"\a + \c", macros)
    assert n.truncated and n.tokens  # stopped by the expansion limit, still a result
    assert "\\c" not in macros  # directly recursive: kept as an opaque command


def test_unbalanced_braces_best_effort():
    n = normalise(r"\frac{a}{b")
    assert n.unbalanced == 1 and " ".join(n.tokens) == r"\frac { V1 } { V2 }"
    n = normalise(r"a}} + b")
    assert n.unbalanced == 2 and " ".join(n.tokens) == "V1 + V2"
    assert normalise("").tokens == () and normalise(r"\, \quad % only a comment").tokens == ()


# -- finding formulas --------------------------------------------------------------------------
def _spans(text: str, mode: str) -> list[str]:
    found, _ = scan_text(text, mode)
    return [text[s:e] for s, e, _, _, _ in found]


def test_latex_scanner():
    tex = (r"Cost \$5 and $a+b$ % $not$ here" "\n"
           r"\verb|$x$| \[ x^2 \] \(y\) $$z$$" "\n"
           r"\begin{verbatim}$v$\end{verbatim}\begin{align*} a &= b \end{align*}")
    assert _spans(tex, "latex") == ["$a+b$", r"\[ x^2 \]", r"\(y\)", "$$z$$",
                                    r"\begin{align*} a &= b \end{align*}"]


def test_markdown_scanner_pandoc_rules():
    md = "It costs $5 and $10.\n\n```\n$code$\n```\nInline `$code$` and $x^2$.\n\n$$\n\\frac{a}{b}\n$$\n"
    assert _spans(md, "markdown") == ["$x^2$", "$$\n\\frac{a}{b}\n$$"]


def test_rst_scanner():
    rst = "Role :math:`a^2` here.\n\n.. math::\n   :label: e1\n\n   x + y\n\nAfter.\n"
    found = find_formulas(rst.encode(), "doc.rst")
    assert [(rst[f.start:f.end].split("\n")[0], f.label) for f in found.formulas] == \
        [(":math:`a^2`", "inline"), (".. math::", "display")]
    assert normalise(found.formulas[1].content).tokens == ("V1", "+", "V2")


def test_raw_notebook_json_spans_map_back():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {},
                     "source": ["Energy $E = mc^2$\n", "and $$\\frac{a}{b}$$"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(nb, indent=1)
    got, problems = scan_notebook_json(raw)
    assert problems == 0
    assert [raw[s:e] for s, e, _, _ in got] == ["$E = mc^2$", "$$\\\\frac{a}{b}$$"]
    assert [c for _, _, _, c in got] == ["E = mc^2", "\\frac{a}{b}"]


def test_extractor_blocks_first_then_scanner_fills_gaps():
    from lar.store.extract import Block

    text = b"A $x$ and \\(y\\).\n\\begin{align} a &= $b$ \\end{align}\n```\n\\(c\\)\n```\n"
    env_start = text.index(b"\\begin")
    code_start = text.index(b"```")
    blocks = (Block(2, 5, "formula", "inline", atomic=True),
              Block(env_start, text.index(b"\n```"), "environment", "align", atomic=True),
              Block(text.index(b"$b$"), text.index(b"$b$") + 3, "formula", "inline", atomic=True),
              Block(code_start, len(text), "code", "", atomic=True))
    found = find_formulas(text, "notes.md", blocks, "markdown")
    assert found.source == "blocks+scanner"
    assert [(text[f.start:f.end], f.label) for f in found.formulas] == [
        (b"$x$", "inline"), (b"\\(y\\)", "inline"),
        (b"\\begin{align} a &= $b$ \\end{align}", "align")]  # nested $b$ once; code skipped
    plain = find_formulas(b"Energy $$E = mc^2$$\n", "notes.txt")
    assert plain.source == "scanner" and plain.formulas[0].content == "E = mc^2"


def test_strip_delimiters():
    assert strip_delimiters("$x$") == ("x", "inline")
    assert strip_delimiters(r"\[x\]") == ("x", "display")
    assert strip_delimiters(r"\begin{equation*} x \end{equation*}") == (" x ", "equation*")
    assert strip_delimiters("x + y") == ("x + y", "")


def test_which_units_are_read():
    assert accepts_path("paper.tex") and accepts_path("notes.md") and accepts_path("nb.ipynb")
    assert accepts_path("refs.bib") and accepts_path("README")
    assert not accepts_path("src/a.py") and not accepts_path("Makefile") and not accepts_path("x.pdf")


# -- similarity --------------------------------------------------------------------------------
def test_similarity_hand_checked():
    q = features(normalise_tokens(r"\frac{x}{y}"))
    f = features(normalise_tokens(r"\frac{a}{b} + c"))
    score, dice, cover = similarity(q, f)
    assert dice == pytest.approx(2 * 7 / (8 + 10)) and cover == 1.0
    assert score == pytest.approx((14 / 18 + 1) / 2)
    assert similarity(q, features(normalise_tokens(r"\dfrac{u}{v}")))[0] == 1.0
    assert similarity(features(["V1"]), features(normalise_tokens("x_i")))[0] < 0.3


# -- the layer ----------------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def _formula_registered():
    """Register the layer for this module (a no-op once the entry point exists), then undo it."""
    had = "formula" in registered_layers()
    lar.register_layer(FormulaLayer)
    yield
    if not had:
        unregister_layer("formula")


@pytest.fixture
def eng(tmp_path):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.tex").write_text(
        "\\newcommand{\\R}{\\mathbb{R}}\n\\section{Ratio}\nThe ratio $\\frac{x}{y}$ of $t \\le T$ in $\\R^n$.\n"
        "\\begin{equation}\n  z = \\sum_i \\frac{q_i}{d_i}\n\\end{equation}\n")
    (root / "docs" / "b.md").write_text("# Pythagoras\n\n$$\nu^2 + v^2 = w^2\n$$\n\nCosts $5 and $10.\n")
    (root / "docs" / "c.tex").write_text("broken $\\frac{a}{b$ and fine $a+b$\n")
    (root / "src.py").write_text("x = '$\\frac{x}{y}$'\n")
    e = lar.open(root, state=tmp_path / "state")
    e.build(timebox=30, layers=["formula"])
    yield e
    e.close()


def _search(eng, query, seconds=5.0):
    layer = eng.layers["formula"]
    return asyncio.run(layer.search(query, eng.scope_view(), Budget.seconds(seconds, pool=50)))


def _text(eng, hit) -> bytes:
    return (eng.root / eng.index.paths_for_hash(hit.hash)[0]).read_bytes()[hit.span.start:hit.span.end]


def test_frac_finds_frac_with_exact_span(eng):
    hits = _search(eng, r"\frac{a}{b}")
    top = hits[0]
    data = (eng.root / "docs" / "a.tex").read_bytes()
    start = data.index(b"$\\frac{x}{y}$")
    assert (top.span.start, top.span.end) == (start, start + len(b"$\\frac{x}{y}$"))
    ev = top.evidence["formula"]
    assert ev.score == 1.0 and ev.score_kind == "normalised-token similarity 0-1"
    assert ev.details["normalised"] == r"\frac { V1 } { V2 }" and ev.details["match"] == "exact"
    assert [h.evidence["formula"].rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(eng.index.paths_for_hash(h.hash)[0] != "src.py" for h in hits)  # code is not read
    # the equation environment contains the fraction: found, lower
    assert any(_text(eng, h).startswith(b"\\begin{equation}") for h in hits[1:])


def test_macro_and_synonym_through_the_layer(eng):
    top = _search(eng, r"\mathbb{R}^m")[0]
    assert _text(eng, top) == b"$\\R^n$" and top.evidence["formula"].score == 1.0
    assert top.evidence["formula"].details["form"] == "macros expanded"
    top = _search(eng, r"\R^m")[0]  # copied with the paper's macro: matches the form as written
    assert _text(eng, top) == b"$\\R^n$" and top.evidence["formula"].score == 1.0
    assert top.evidence["formula"].details["form"] == "as written"
    top = _search(eng, r"$a \leq b$")[0]  # delimiters in the query are fine; \le == \leq
    assert _text(eng, top) == b"$t \\le T$"


def test_markdown_display_formula_found(eng):
    top = _search(eng, {"formula": "a^2+b^2=c^2", "min_score": 0.9})[0]
    assert _text(eng, top) == b"$$\nu^2 + v^2 = w^2\n$$"
    assert top.evidence["formula"].details["label"] == "display"


def test_unbalanced_unit_is_still_indexed(eng):
    layer = eng.layers["formula"]
    h = eng.index.get_many(["docs/c.tex"])["docs/c.tex"].hash
    info = layer.manifest.entry(h)
    assert info["state"] == "ok" and info["info"]["formulas"] == 2
    assert info["info"]["unbalanced_braces"] == 1
    assert [f[3] for f in layer.formulas(h)] == [r"\frac { V1 } { V2 }", "V1 + V2"]


def test_query_errors(eng):
    for bad in ("", "   ", {"formula": 3}, {"formula": "x", "min_score": 2}, {"latex": "x"},
                ["x"], r"\, \quad"):
        with pytest.raises(QueryError):
            _search(eng, bad)
    assert parse_query({"formula": "x", "min_score": 0.5}) == ("x", 0.5)


def test_expired_budget_returns_partial(eng):
    layer = eng.layers["formula"]
    budget = Budget.seconds(0.0)
    hits = asyncio.run(layer.search(r"\frac{a}{b}", eng.scope_view(), budget))
    assert hits == [] and budget.report().partial and budget.coverage == 1.0


def test_build_version_names_the_extractors(eng):
    layer = eng.layers["formula"]
    assert layer.build_version.startswith(f"{layer.version}+c{layer.chunker_version}+x")
    st = layer.status(eng.scope_view())
    assert st.granularity == "formula" and "LaTeX" in st.query_format and st.coverage == 1.0

# The layer is registered through pyproject's entry points, so tests/contract runs the
# contract suite against it with every other registered layer.
