"""LaTeX tables: the exact layout, bold best values, significance marks, escaping."""
from __future__ import annotations

import json

from lar_evals.latex import escape, per_type_table, render_latex, scores_table
from lar_evals.report import main

S = {"dataset": "sci_fact", "split": "test", "n_queries": 3,
     "routes": {"bm25": {"ndcg@10": 0.5, "map": 0.4}, "dense": {"ndcg@10": 0.6, "map": 0.35}},
     "fusion": {"rrf": {"ndcg@10": 0.65, "map": 0.45}},
     "default": {"ndcg@10": 0.55, "map": None},
     "comparisons": {"significance": {"alpha": 0.05, "best_route": "dense", "tests": [
         {"a": "fusion:rrf", "b": "route:dense", "metric": "ndcg@10", "delta": 0.05, "significant": True},
         {"a": "fusion:rrf", "b": "route:dense", "metric": "map", "delta": 0.1, "significant": False},
         {"a": "default", "b": "route:dense", "metric": "ndcg@10", "delta": -0.05, "significant": True}]}},
     "per_type": {"by_type": {"rare-term": {"n_queries": 2, "routes": {"bm25": {"ndcg@10": 0.9}},
                                            "fusion": {}, "default": {"ndcg@10": 0.8}}}},
     "settings": {"metrics": ["ndcg@10", "map"]}}


def test_scores_table_layout():
    assert scores_table(S, label="tab:x") == r"""\begin{table}[t]
\centering
\begin{tabular}{llrr}
\toprule
kind & list & ndcg@10 & map \\
\midrule
route & bm25 & 0.5000 & 0.4000 \\
route & dense & 0.6000 & 0.3500 \\
\midrule
fusion & rrf & \textbf{0.6500}\textsuperscript{\dag} & \textbf{0.4500} \\
\midrule
default & default & 0.5500\textsuperscript{\ddag} & -- \\
\bottomrule
\end{tabular}
\caption{sci\_fact/test, 3 queries. Best per column in bold; \dag{} / \ddag{}: significantly better / worse than the best route (dense), adjusted $p < 0.05$.}
\label{tab:x}
\end{table}
"""


def test_nothing_is_bold_when_all_values_are_equal():
    s = {"routes": {"a": {"recall@100": 1.0}, "b": {"recall@100": 1.0}}}
    assert r"\textbf" not in scores_table(s)


def test_per_type_table_and_escaping():
    t = per_type_table(S)
    assert r"list & rare-term (2) \\" in t
    assert r"route bm25 & 0.9000 \\" in t and r"default & 0.8000 \\" in t
    assert escape("a_b & 50% #1 {x}") == r"a\_b \& 50\% \#1 \{x\}"
    assert per_type_table({"per_type": {"by_type": {}}}) is None


def test_report_cli_writes_latex(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(S))
    assert main([str(path), "--out", str(tmp_path / "R"), "--latex"]) == 0
    tex = (tmp_path / "R.tex").read_text()
    assert tex == render_latex([S]) and tex.count(r"\begin{table}") == 2
    assert "R.tex" in capsys.readouterr().out
