"""Extractors: LaTeX, Markdown, reStructuredText, HTML, notebooks and PDF; the shared chunker
never splits the atomic blocks they report."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lar.layers.kits.chunking import chunk, split_atomic_count
from lar.store.extract import Document, ExtractionCache, extract

REPO = Path(__file__).resolve().parents[2]


def blocks(doc: Document, kind: str) -> list[tuple[int, int, str, int, bool]]:
    return [(b.start, b.end, b.label, b.level, b.atomic) for b in doc.blocks if b.kind == kind]


def spans(doc: Document, kind: str) -> list[bytes]:
    return [doc.text[b.start:b.end] for b in doc.blocks if b.kind == kind]


def no_split(doc: Document, target: int = 1200) -> list[tuple[int, int]]:
    chunks = chunk(doc, target=target)
    assert split_atomic_count(doc, chunks) == 0
    return chunks


# ---------------------------------------------------------------------------------------- LaTeX
def test_latex_exact_offsets_sections_formula_proof():
    src = (b"\\section{A}\n"
           b"x $y$ z\n"
           b"\\begin{proof}\nq\n\\end{proof}\n"
           b"\\subsection{B}\n"
           b"w\n")
    doc = extract("a.tex", src)
    assert doc.kind == "latex" and not doc.derived and doc.text == src and doc.notes == ()
    assert blocks(doc, "section") == [(0, 65, "A", 1, False), (48, 65, "B", 2, False)]
    assert blocks(doc, "formula") == [(14, 17, "inline", 0, True)]
    assert blocks(doc, "environment") == [(20, 47, "proof", 0, True)]
    assert src[20:47] == b"\\begin{proof}\nq\n\\end{proof}"


def test_latex_sections_nest_and_stop_at_same_or_higher_level():
    src = (b"\\documentclass{book}\n\\newcommand\\section{x}\n\\begin{document}\n"
           b"\\chapter{One}\n\\section*{S1}\na\n\\subsection[short]{Sub {nested} $x$}\nb\n"
           b"\\paragraph{P}\nc\n\\section{S2}\nd\n\\chapter{Two}\ne\n\\end{document}\n")
    doc = extract("b.tex", src)
    secs = [(b.label, b.level, doc.text[b.start:b.end].split(b"\n")[0], doc.text[b.end:b.end + 9])
            for b in doc.blocks if b.kind == "section"]
    assert secs == [
        ("One", 0, b"\\chapter{One}", b"\\chapter{"),
        ("S1", 1, b"\\section*{S1}", b"\\section{"),
        ("Sub {nested} $x$", 2, b"\\subsection[short]{Sub {nested} $x$}", b"\\section{"),
        ("P", 4, b"\\paragraph{P}", b"\\section{"),
        ("S2", 1, b"\\section{S2}", b"\\chapter{"),
        ("Two", 0, b"\\chapter{Two}", b"\\end{docu"),  # the last one stops at \end{document}
    ]
    ordered = [b for b in doc.blocks if b.kind == "section"]
    for i, a in enumerate(ordered):  # sections either nest or are disjoint, never cross
        for b in ordered[i + 1:]:
            assert b.start >= a.end or b.end <= a.end


def test_latex_atomic_environments_declared_and_theorem_like():
    src = (b"\\newtheorem{hyp}{Hypothesis}\n\\declaretheorem[style=definition]{recipe}\n"
           b"\\newenvironment{sketch}{\\begin{proof}[Sketch]}{\\end{proof}}\n\\begin{document}\n"
           b"\\begin{hyp}h\\end{hyp}\n\\begin{recipe}r\\end{recipe}\n\\begin{sketch}s\\end{sketch}\n"
           b"\\begin{openproblem}o\\end{openproblem}\n\\begin{thm}t\\end{thm}\n"
           b"\\begin{align*}a&=b\\\\[2pt] c&=d\\end{align*}\n\\begin{algorithm}x\\end{algorithm}\n"
           b"\\begin{itemize}\\item i\\end{itemize}\n\\begin{figure}f\\end{figure}\n\\end{document}\n")
    doc = extract("c.tex", src)
    envs = {b.label: b.atomic for b in doc.blocks if b.kind == "environment"}
    assert envs == {"document": False, "hyp": True, "recipe": True, "sketch": True,
                    "openproblem": True, "thm": True, "align*": True, "algorithm": True,
                    "itemize": False, "figure": False}
    # ``\\[2pt]`` after a line break is spacing, not display math
    assert blocks(doc, "formula") == []


def test_latex_formulas_escapes_comments_and_verbatim():
    src = (b"\\begin{document}\n"
           b"costs \\$5, $a$ and \\(b\\) 100\\% sure % $not$ \\section{not}\n"
           b"\\[ c \\] then $$d$$ and $\\text{if $e$} f$ and $g$$h$\n"
           b"\\verb|$v$| \\url{http://x.org/%20$} done\n"
           b"\\begin{verbatim}\n$w$ \\section{no} \\begin{proof}\n\\end{verbatim}\n"
           b"\\iffalse $hidden$ \\fi\n"
           b"\\end{document}\n$after$\n")
    doc = extract("d.tex", src)
    assert [(s, b.label) for s, b in zip(spans(doc, "formula"), (x for x in doc.blocks if x.kind == "formula"))] == [
        (b"$a$", "inline"), (b"\\(b\\)", "inline"), (b"\\[ c \\]", "display"), (b"$$d$$", "display"),
        (b"$\\text{if $e$} f$", "inline"), (b"$g$", "inline"), (b"$h$", "inline")]
    assert blocks(doc, "section") == []
    assert [b.label for b in doc.blocks if b.kind == "environment"] == ["document", "verbatim"]
    assert all(b.atomic for b in doc.blocks if b.label == "verbatim")
    assert doc.notes == ()


def test_latex_includes_resolved_relative_to_including_folder():
    files = {"paper/chapters/intro.tex": b"x", "paper/chapters/fig.tikz": b"y",
             "paper/section/deep/part.tex": b"z", "paper/defs.tex": b"\\newtheorem{obsv}{Obs}"}
    src = (b"\\input{defs}\n\\begin{document}\n\\include{chapters/intro}\n\\input{chapters/fig.tikz}\n"
           b"\\input chapters/intro.tex\n\\input{missing}\n% \\input{commented}\n"
           b"\\begin{obsv}o\\end{obsv}\n\\end{document}\n")
    doc = extract("paper/main.tex", src, files.get)
    assert blocks(doc, "include") == [
        (0, 12, "paper/defs.tex", 1, False),
        (30, 54, "paper/chapters/intro.tex", 1, False),
        (55, 80, "paper/chapters/fig.tikz", 1, False),
        (81, 106, "paper/chapters/intro.tex", 1, False),
        (107, 122, "paper/missing.tex", 0, False)]
    # a theorem declared in an included preamble file is atomic here
    assert [b.atomic for b in doc.blocks if b.label == "obsv"] == [True]
    # a nested file: its own folder first, then (as TeX does) the folders above it
    sub = extract("paper/section/deep.tex", b"\\input{deep/part}\n\\input{section/deep/part}\n"
                  b"\\subimport{deep/}{part}\n", files.get)
    assert [(b.label, b.level) for b in sub.blocks if b.kind == "include"] == [
        ("paper/section/deep/part.tex", 1), ("paper/section/deep/part.tex", 1),
        ("paper/section/deep/part.tex", 1)]
    assert [b.level for b in extract("paper/main.tex", src).blocks if b.kind == "include"] == [0] * 5


def test_latex_unbalanced_input_gives_notes_not_exceptions():
    src = (b"\\begin{document}\n\\section{S}\n\\begin{theorem}\nx $y\n\nz\n\\end{proof}\n"
           b"\\begin{lemma}ok\\end{lemma}\n\\begin{itemize}\n\\begin{equation}\na\n\\end{itemize}\n"
           b"\\section{T\n\\end{document}\n")
    doc = extract("e.tex", src)
    notes = " | ".join(doc.notes)
    assert "unclosed math $ at line 4" in notes
    assert "stray \\end{proof} at line 7" in notes
    assert "unclosed \\begin{equation} at line 10" in notes
    assert "unclosed \\begin{theorem} at line 3" in notes
    assert [b.label for b in doc.blocks if b.kind == "environment"] == ["document", "lemma", "itemize"]
    assert [b.label for b in doc.blocks if b.kind == "section"] == ["S"]
    no_split(doc)
    for junk in (b"\\end{a}\\end{b}$", b"\\begin{", b"$$", b"\\section{", b"\\verb|x", b"\\iffalse",
                 b"\xff\xfe\\begin{proof}\x00", b""):
        extract("junk.tex", junk)  # must not raise


def test_latex_style_files_have_no_body_structure():
    doc = extract("x.sty", b"\\newcommand{\\foo}{$x$}\n\\def\\bar{\\begin{proof}}\n\\input{other}\n")
    assert [b.kind for b in doc.blocks] == ["include"] and doc.notes == ()


def test_latex_chunking_keeps_every_atomic_block_whole():
    para = b"Words of a paragraph that goes on for a while with $x_i$ inline.\n" * 12
    proof = b"\\begin{proof}\n" + b"A long proof line with $a+b$ in it.\n" * 80 + b"\\end{proof}\n"
    multi = b"An inline formula across lines $a +\n b$ and \\[\n c\n\\]\n\n"
    src = (b"\\begin{document}\n\\section{One}\n" + para + b"\n" + proof + multi + para +
           b"\\begin{equation}\n" + b"x\\\\\n" * 300 + b"\\end{equation}\n" + para + b"\\end{document}\n")
    doc = extract("f.tex", src)
    atomic = [b for b in doc.blocks if b.atomic]
    assert len(atomic) > 100 and any(b.end - b.start > 2000 for b in atomic)
    chunks = no_split(doc)
    assert len(chunks) > 3
    chunks_small = no_split(doc, target=200)
    assert len(chunks_small) > len(chunks)


# ------------------------------------------------------------------------------------- Markdown
MD = (b"---\ntitle: x\n# no\n---\n"          # 0..22 front matter
      b"# Title #\n\n"                       # 22..33
      b"Some $x^2$ costs $5 and $10 and `$y$`.\n\n"
      b"```python\n# not a heading\n$ z $\n```\n\n"
      b"Setext one\nline two\n===\n\n"
      b"$$\na = b\n$$\n\n"
      b"## Sub\n\n"
      b"<!-- $c$ -->\ntext\n")


def test_markdown_headings_code_and_math():
    doc = extract("r.md", MD)
    assert doc.kind == "markdown" and not doc.derived and doc.text == MD
    secs = [(b.label, b.level, b.start) for b in doc.blocks if b.kind == "section"]
    assert secs == [("Title", 1, 22), ("Setext one line two", 1, MD.index(b"Setext")),
                    ("Sub", 2, MD.index(b"## Sub"))]
    assert blocks(doc, "section")[0][1] == MD.index(b"Setext")  # level 1 stops at the next h1
    assert blocks(doc, "section")[1][1] == len(MD)
    assert spans(doc, "code") == [b"```python\n# not a heading\n$ z $\n```"]
    assert [b.label for b in doc.blocks if b.kind == "code"] == ["python"]
    assert spans(doc, "formula") == [b"$x^2$", b"$$\na = b\n$$"]
    assert all(b.atomic for b in doc.blocks if b.kind in ("code", "formula"))
    no_split(doc, target=20)


def test_markdown_unclosed_fence_runs_to_the_end():
    doc = extract("u.md", b"# A\n\n~~~\ncode\n# B\n")
    assert spans(doc, "code") == [b"~~~\ncode\n# B\n"]
    assert [b.label for b in doc.blocks if b.kind == "section"] == ["A"]
    assert doc.notes and "unclosed code fence" in doc.notes[0]


# ------------------------------------------------------------------------------------------ rst
RST = (b"=====\nTitle\n=====\n\n"
       b"Intro::\n\n    literal $x$\n\n    more\n\nafter\n\n"
       b"Section A\n---------\n\n.. math::\n\n   E = mc^2\n\n"
       b"Sub\n~~~\n\n.. code-block:: python\n\n   x = 1\n\n"
       b"Section B\n---------\ntext :math:`a+b` end\n\n----\n\nLast\n")


def test_rst_sections_levels_by_adornment_order_and_atomic_blocks():
    doc = extract("r.rst", RST)
    assert doc.kind == "rst" and not doc.derived
    secs = [(b.label, b.level, b.start, b.end) for b in doc.blocks if b.kind == "section"]
    a, sub, b = RST.index(b"Section A"), RST.index(b"Sub\n"), RST.index(b"Section B")
    assert secs == [("Title", 1, 0, len(RST)), ("Section A", 2, a, b), ("Sub", 3, sub, b),
                    ("Section B", 2, b, len(RST))]
    assert [(s, x.label) for s, x in zip(spans(doc, "code"), (y for y in doc.blocks if y.kind == "code"))] == [
        (b"    literal $x$\n\n    more", "literal"), (b".. code-block:: python\n\n   x = 1", "python")]
    assert spans(doc, "formula") == [b".. math::\n\n   E = mc^2", b":math:`a+b`"]
    assert all(x.atomic for x in doc.blocks if x.kind in ("code", "formula"))
    no_split(doc, target=10)


# ----------------------------------------------------------------------------------------- HTML
HTML = (b"<!DOCTYPE html>\n<html><head><title>T</title><style>p {color: red}</style></head>\n"
        b"<body>\n<h1>Main &amp; title</h1>\n<p>Hello <b>world</b>,\n  second line.</p>\n"
        b"<script>var x = '<h1>no</h1>';</script>\n<h2>Code</h2>\n<pre>\ndef f():\n    return 1\n</pre>\n"
        b"<p>Use <code>f()</code> here.<br>next</p>\n<h1>Other</h1><ul><li>one</li><li>two</li></ul>\n"
        b"</body></html>\n")


def test_html_visible_text_sections_code_and_lines():
    doc = extract("p.html", HTML)
    assert doc.kind == "html" and doc.derived and doc.skipped is None
    assert doc.text == (b"Main & title\n\nHello world, second line.\n\nCode\n\n"
                        b"def f():\n    return 1\n\nUse f() here.\nnext\n\nOther\n\none\ntwo")
    t = doc.text
    assert blocks(doc, "section") == [(0, t.index(b"Other"), "Main & title", 1, False),
                                      (t.index(b"Code"), t.index(b"Other"), "Code", 2, False),
                                      (t.index(b"Other"), len(t), "Other", 1, False)]
    assert spans(doc, "code") == [b"def f():\n    return 1\n", b"f()"]
    assert all(b.atomic for b in doc.blocks if b.kind == "code")
    assert doc.locate(t.index(b"Hello")) == {"line": 5}
    assert doc.locate(t.index(b"second")) == {"line": 5}
    assert doc.locate(t.index(b"return")) == {"line": 10}
    assert doc.locate(t.index(b"Use")) == {"line": 13}
    assert doc.locate(t.index(b"two")) == {"line": 14}
    no_split(doc, target=10)


def test_html_broken_markup_and_other_encodings():
    doc = extract("b.html", b"<p>caf\xe9 <b>bold<p>next<div><pre>x = 1")
    assert doc.text == "café bold\n\nnext\n\nx = 1".encode()
    assert spans(doc, "code") == [b"x = 1"]
    assert extract("e.htm", b"").text == b""


# ------------------------------------------------------------------------------------ notebooks
def _nb(cells: list[dict], **extra) -> bytes:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells,
                       **extra}).encode()


def test_notebook_text_cells_and_source_map():
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "text"]},
             {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "x = 1\nprint(x)\n",
              "outputs": [{"output_type": "stream", "name": "stdout", "text": ["OUTPUT-1\n"]}]},
             {"cell_type": "code", "metadata": {}, "source": "y = 2\n" * 800, "outputs": []}]
    doc = extract("n.ipynb", _nb(cells))
    assert doc.kind == "notebook" and doc.derived and doc.skipped is None
    head = b"# %% [markdown]\n# Title\ntext\n\n# %% [code]\nx = 1\nprint(x)\n\n# %% [code]\ny = 2\n"
    assert doc.text.startswith(head) and b"OUTPUT" not in doc.text
    assert blocks(doc, "cell")[:2] == [(0, 28, "markdown", 0, False), (30, 56, "code", 0, True)]
    big = doc.blocks[2]
    assert big.end - big.start > 4000 and not big.atomic  # large code cells may be split
    assert [r.locator for r in doc.source_map] == [
        {"cell": 0, "cell_type": "markdown", "line": 1}, {"cell": 1, "cell_type": "code", "line": 5},
        {"cell": 2, "cell_type": "code", "line": 9}]
    assert doc.locate(doc.text.index(b"print")) == {"cell": 1, "cell_type": "code", "line": 5}
    assert doc.locate(29) == {"cell": 0, "cell_type": "markdown", "line": 1}  # the blank line
    no_split(doc, target=10)


def test_notebook_broken_or_foreign_json_is_skipped():
    for data in (b"{not json", b"[1, 2]", b'{"cells": 3}', b"\xff\xfe"):
        doc = extract("x.ipynb", data)
        assert doc.skipped and doc.text == b"" and doc.derived
    old = json.dumps({"nbformat": 3, "worksheets": [{"cells": [
        {"cell_type": "code", "input": ["a = 1"]}, {"cell_type": "markdown", "source": "b"}]}]})
    doc = extract("old.ipynb", old.encode())
    assert doc.text == b"# %% [code]\na = 1\n\n# %% [markdown]\nb"
    empty = extract("e.ipynb", _nb([]))
    assert empty.skipped is None and empty.text == b"" and empty.notes


# ------------------------------------------------------------------------------------------ PDF
def text_pdf(pages: list[bytes]) -> bytes:
    """A minimal PDF written by hand: one Helvetica text line per page."""
    objs: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
                         b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for words in pages:
        stream = b"BT /F1 12 Tf 72 720 Td (" + words + b") Tj ET"
        objs.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                    b"/Resources << /Font << /F1 3 0 R >> >> >>" % len(objs))
        kids.append(len(objs))
    objs[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objs, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (i, obj))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    out.writelines(b"%010d 00000 n \n" % o for o in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


def test_pdf_pages_text_and_source_map():
    pytest.importorskip("pypdf")
    doc = extract("paper.pdf", text_pdf([b"Hello page one", b"Second page text"]))
    assert doc.kind == "pdf" and doc.derived and doc.skipped is None
    assert doc.text == b"Hello page one\n\f\nSecond page text"
    assert blocks(doc, "page") == [(0, 14, "1", 0, False), (17, 33, "2", 0, False)]
    assert [(r.start, r.end, r.locator) for r in doc.source_map] == [
        (0, 17, {"page": 1}), (17, 33, {"page": 2})]
    assert doc.locate(doc.text.index(b"Second")) == {"page": 2}
    assert doc.locate(15) == {"page": 1}  # the separator belongs to the page before it
    assert no_split(doc, target=5) == [(0, 15), (17, 33)]  # a page starts a chunk
    assert Document.from_json(doc.to_json()) == doc


def _written(writer) -> bytes:
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def test_pdf_blank_encrypted_truncated_and_garbage_are_skipped():
    pypdf = pytest.importorskip("pypdf")
    blank = pypdf.PdfWriter()
    blank.add_blank_page(width=200, height=200)
    cases = {"no extractable text": _written(blank)}
    locked = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(text_pdf([b"Secret"]))))
    locked.encrypt("pw")
    cases["encrypted"] = _written(locked)
    good = text_pdf([b"Hello page one", b"Second page text"])
    cases["truncated"] = good[: len(good) * 2 // 3]
    cases["not a PDF"] = b"<html>nope</html>"
    cases["broken PDF"] = b"%PDF-1.4\nnothing here\n%%EOF\n"
    for why, data in cases.items():
        doc = extract("x.pdf", data)
        assert doc.skipped and why in doc.skipped, (why, doc.skipped)
        assert doc.text == b"" and doc.derived and doc.kind == "pdf"
    # an empty user password (owner password only) opens
    opened = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(good)))
    opened.encrypt("", "owner")
    assert extract("o.pdf", _written(opened)).text == b"Hello page one\n\f\nSecond page text"


def test_pdf_ligatures_become_letters():
    pytest.importorskip("pypdf")
    from lar.store.extract.pdf import _LIGATURES

    assert "e\ufb03cient \ufb01le".translate(_LIGATURES) == "efficient file"


# ------------------------------------------------------------------------------------ plumbing
def test_extraction_cache_roundtrip(tmp_path):
    cache = ExtractionCache(tmp_path)
    src = b"\\section{A}\n$x$\n"
    first = cache.get("ab" * 16, "a.tex", src)
    assert list(tmp_path.rglob("*.latex.1.json"))
    assert cache.get("ab" * 16, "a.tex", b"ignored: served from the cache") == first


def test_importing_one_extractor_module_first_registers_all():
    code = ("import lar.store.extract.latex\nfrom lar.store.extract import extract\n"
            "assert extract('a.ipynb', b'{bad').skipped\n"
            "assert extract('a.pdf', b'nope').skipped\n"
            "assert extract('a.html', b'<p>x</p>').text == b'x'\n"
            "assert extract('a.rst', b'T\\n=\\n').blocks[0].kind == 'section'\n")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True)
