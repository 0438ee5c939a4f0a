"""Rare-term queries: an identifier or term that few documents hold, asked for by name.

Candidates are words of at least five characters (not numbers, hex strings, stopwords or
syntax keywords) whose document frequency in the corpus is at most ``RARE_DF`` (whole,
lower-cased words), taken from a *definition site* when there is one:

* code: Python ``def``/``class`` names and module/class-level assignments (``ast``), other
  languages' definitions (tree-sitter); the answer span is the line that names it;
* Markdown/reST/LaTeX headings: the heading line;
* LaTeX ``\\newcommand``-like macro names and ``\\label`` keys (the line) and terms set in
  ``\\emph``/``\\textbf``/``\\textit`` (the sentence).

Only when those run short are plain *mentions* used (the first occurrence of a rare word; the
answer span is its sentence in prose, its line in code). The query is the term as written,
with one common word of the answer span beside it half of the time. The qrels hold every
document with the word: score 2 where it is defined (or, for a mention, the answer document),
score 1 for the other (at most ``RARE_DF`` documents in all).
"""
from __future__ import annotations

import random
import re

from lar.layers.kits.lexical.tokenize import code_mode

from lar_evals.generators.common import ALPHA, WORD, Doc, Target, contains_word, is_term_word, line_bounds, \
    sentence_bounds, spread, word_key
from lar_evals.generators.sources import definitions, latex_terms, sections
from lar_evals.generators.verify import RARE_DF, CorpusStats

CONTEXT_PROBABILITY = 0.5
_MACRO = re.compile(r"\\[A-Za-z@]+")


def _definition_sites(doc: Doc) -> list[tuple[str, str, int, int]]:
    """``(word, kind, start, end)`` of every definition site in ``doc``."""
    sites: list[tuple[str, str, int, int]] = []
    py = doc.id.lower().endswith((".py", ".pyi", ".pyw"))
    for d in definitions(doc):
        sites.append((d.name, ("python-" if py else "code-") + d.kind, *d.header))
    for s in sections(doc):
        for w in WORD.findall(s.title):
            sites.append((w, "heading", *s.heading))
    sites.extend(latex_terms(doc))
    return sites


def definition_targets(docs: list[Doc], stats: CorpusStats) -> tuple[list[Target], dict]:
    """One target per rare defined term (its first definition site in path order), and for
    every such term (lower-cased) the sorted ids of the documents defining it."""
    first: dict[str, Target] = {}
    defined_in: dict[str, set[str]] = {}
    for doc in docs:
        for word, kind, start, end in _definition_sites(doc):
            if not is_term_word(word) or not stats.is_rare_word(word):
                continue
            if not contains_word(doc.text[start:end], word):
                continue
            key = word_key(word)
            defined_in.setdefault(key, set()).add(doc.id)
            if key not in first:
                first[key] = Target(doc, start, end, kind, source_text=doc.text[start:end],
                                    name=word, term=word)
    targets = [first[k] for k in sorted(first)]
    return targets, {k: sorted(v) for k, v in sorted(defined_in.items())}


def mention_targets(docs: list[Doc], stats: CorpusStats, taken: set[str]) -> list[Target]:
    """One target per rare word not in ``taken`` (lower-cased): its first occurrence in path
    order; the span is the sentence (prose formats) or the line (code)."""
    out: list[Target] = []
    seen = set(taken)
    for doc in docs:
        bounds = line_bounds if code_mode(doc.id) else sentence_bounds
        for m in WORD.finditer(doc.text):
            word = m.group()
            key = word_key(word)
            if key in seen or not is_term_word(word) or not stats.is_rare_word(word):
                continue
            seen.add(key)
            start, end = bounds(doc.text, m.start())
            if not contains_word(doc.text[start:end], word):
                start, end = line_bounds(doc.text, m.start())
            out.append(Target(doc, start, end, "mention", source_text=doc.text[start:end],
                              name=word, term=word))
    return out


def ordered_targets(docs: list[Doc], stats: CorpusStats, n: int, rng: random.Random
                    ) -> tuple[list[Target], dict]:
    """Targets in the order they are tried: definition sites spread over documents, then (if
    fewer than twice ``n`` of those exist) mentions spread the same way."""
    defs, defined_in = definition_targets(docs, stats)
    order = spread(defs, rng)
    if len(defs) < 2 * n:
        order += spread(mention_targets(docs, stats, set(defined_in)), rng)
    return order, defined_in


def build_query(target: Target, stats: CorpusStats, rng: random.Random) -> str:
    """The term, with (half of the time) one common word of its span before or after it."""
    query = target.term
    if rng.random() < CONTEXT_PROBABILITY:
        term = target.term.lower()
        plain = _MACRO.sub(" ", target.text)  # LaTeX macro names are not context words
        context = sorted({w.lower() for w in ALPHA.findall(plain)
                          if len(w) >= 4 and term not in w.lower() and w.lower() not in term
                          and is_term_word(w, 4) and stats.word_df.get(w.lower(), 0) > RARE_DF})
        if context:
            word = rng.choice(context)
            query = f"{word} {query}" if rng.random() < 0.5 else f"{query} {word}"
    return query


def qrels(target: Target, stats: CorpusStats, defined_in: dict) -> dict[str, int]:
    """``{doc id: score}``: 2 where the term is defined (and the answer document), 1 for the
    other documents holding it."""
    key = word_key(target.term)
    defining = set(defined_in.get(key, ())) | {target.doc.id}
    docs = set(stats.docs_with_word(key)) | {target.doc.id}
    return {d: 2 if d in defining else 1 for d in sorted(docs)}
