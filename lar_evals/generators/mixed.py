"""Mixed queries: a rare identifier and what it is for, in words.

A rare-term query asks for a name alone, which grep answers trivially; a person who half
remembers a name also says what it does. Targets: Python functions and classes whose name is a
rare term (:func:`lar_evals.generators.verify.CorpusStats.is_rare_word`) and that have a
docstring; the query is the name followed by the docstring's first sentence (code-shaped words
and the name itself removed, at most ``INTENT_WORDS`` words): ``frobnicate_weights scale every
weight so that the largest one becomes exactly one``. Nothing is blanked: the docstring stays
in the corpus, as it would in a real repository. The qrels are the rare-term ones (score 2
where the name is defined, 1 for another document holding it).
"""
from __future__ import annotations

import random

from lar_evals.generators.common import Doc, Target, is_term_word, sentence_bounds, spread
from lar_evals.generators.pairs import prose_query
from lar_evals.generators.sources import PY_SUFFIXES, python_defs
from lar_evals.generators.verify import CorpusStats

INTENT_WORDS = 16

__all__ = ["INTENT_WORDS", "build_query", "ordered_targets"]


def _first_sentence(text: str) -> str:
    text = " ".join(text.strip().split("\n\n", 1)[0].split())
    s0, s1 = sentence_bounds(text, 0)
    return text[s0:s1]


def ordered_targets(docs: list[Doc], stats: CorpusStats, rng: random.Random) -> list[Target]:
    out = []
    for doc in docs:
        if not doc.id.lower().endswith(PY_SUFFIXES):
            continue
        for d in python_defs(doc):
            if d.kind not in ("function", "class") or d.doc_kind != "docstring":
                continue
            if not is_term_word(d.name) or not stats.is_rare_word(d.name):
                continue
            intent = prose_query(_first_sentence(d.doc), {d.name.lower()})
            if intent is None:
                continue
            intent = " ".join(intent.split()[:INTENT_WORDS]).rstrip(" ,;:.")
            out.append(Target(doc, d.span[0], d.span[1], "mixed", source_text=intent,
                              name=d.name, term=d.name, extra={"def": d.kind}))
    return spread(out, rng)


def build_query(target: Target) -> str:
    return f"{target.term} {target.source_text}"
