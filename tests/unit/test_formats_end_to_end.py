"""Extracted formats through the whole engine: spans index the extracted text, hits say where
in the source they came from, broken files are skipped per unit with a visible reason."""
import json

import lar
from tests.unit.test_extract import text_pdf


def _corpus(root):
    root.mkdir()
    (root / "paper.pdf").write_bytes(text_pdf([b"Introduction to timeboxes", b"Exact MaxSim scoring here"]))
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj <<>> endobj\n")  # truncated, no %%EOF
    nb = {"cells": [{"cell_type": "markdown", "source": ["# Notes\n", "anytime layers\n"], "metadata": {}},
                    {"cell_type": "code", "source": ["def rescore_candidates(x):\n", "    return x\n"],
                     "metadata": {}, "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (root / "nb.ipynb").write_text(json.dumps(nb))
    (root / "page.html").write_text("<html><body><h1>Title</h1><p>HTML paragraph about fusion</p>"
                                    "<script>var hidden_script_token = 1;</script></body></html>")
    return root


def test_pdf_notebook_html_hits_map_back_to_their_source(tmp_path):
    root = _corpus(tmp_path / "c")
    with lar.open(root, state=tmp_path / "s") as eng:
        eng.build(timebox=60, layers=["trigram", "bm25"] if "bm25" in eng.layers else ["trigram"])
        hit = eng.search({"trigram": "MaxSim scoring"}, timebox=5).hits[0]
        assert hit.path == "paper.pdf" and hit.context["source"] == {"page": 2}
        assert eng.read(hit.hash, (hit.span.start, hit.span.end)) == "Exact MaxSim scoring here"
        f = eng.fetch(hit.id)
        assert f.text == "Exact MaxSim scoring here" and f.source["source"] == {"page": 2}
        nb_hit = eng.search({"trigram": "rescore_candidates"}, timebox=5).hits[0]
        assert nb_hit.path == "nb.ipynb" and nb_hit.context["source"]["cell"] == 1
        assert nb_hit.excerpt.startswith("def rescore_candidates")
        assert [h.path for h in eng.search({"trigram": "HTML paragraph"}, timebox=5).hits] == ["page.html"]
        assert eng.search({"trigram": "hidden_script_token"}, timebox=5).hits == ()
        st = eng.status().layer("trigram")
        assert "1 units skipped" in st.notes and "pdf" in st.notes.lower()
        assert st.coverage == 1.0
