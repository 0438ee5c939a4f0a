"""Paraphrase queries: questions that do not share their target's rare vocabulary.

Targets, taken in turns (functions, sections, theorems) and spread over documents:

* ``docstring`` / ``comment``: a documented function (Python via ``ast``, other languages via
  tree-sitter). The query starts from the first paragraph of its docstring (or the comment
  block above it, unless that is a note such as ``TODO``/``XXX`` or a tool directive); every
  word that is, or is a part of, an identifier the function's code uses is dropped
  (camelCase/snake_case split). Target: the whole definition.
* ``section``: a Markdown/reST/LaTeX section. The query starts from the heading's words plus
  the three most salient words of the section's own body (tf-idf). Target: that body.
* ``theorem``: a LaTeX theorem-like environment. The query starts from the statement in words:
  macros stripped, common symbols spelled out (``\\le`` -> "at most", ``\\sum`` -> "sum"),
  single-letter variables dropped. Target: the environment.

Every content word is then replaced by its nearest Model2Vec neighbour (see ``neighbours``;
the second nearest a quarter of the time) that is no form of the same word and no rare term of
the target, with cosine at least ``neighbours.MIN_SIMILARITY``; a word without
such a neighbour is kept when it is not a rare target term, else dropped. Stopwords stay where
they stand (between content words), so the query still reads as words.
"""
from __future__ import annotations

import random
import re

from lar.layers.kits.lexical.tokenize import STOPWORDS_EN, split_identifier

from lar_evals.generators.common import ALPHA, WORD, Doc, Target, round_robin, spread
from lar_evals.generators.sources import definitions, sections, theorems
from lar_evals.generators.verify import CorpusStats, term_of, terms

MIN_CONTENT_WORDS = 3
MAX_WORDS = 14
SUMMARY_WORDS = 40
SALIENT_BODY_WORDS = 3
MIN_BODY_WORDS = 12
MAX_TARGET_CHARS = 20_000
# words a neighbour would turn into another meaning (one -> two): kept as they are
KEEP_WORDS = frozenset("zero one two three four five six seven eight nine ten first second "
                       "last next previous true false".split())
NEAREST_PROBABILITY = 0.75  # else the second nearest neighbour

# LaTeX symbols and operators spelled out (macro name -> words); other macros are dropped
SPELLED: dict[str, str] = {
    "le": "at most", "leq": "at most", "leqslant": "at most", "ge": "at least",
    "geq": "at least", "geqslant": "at least", "neq": "differs from", "ne": "differs from",
    "approx": "approximately", "sim": "similar to", "equiv": "equivalent to",
    "in": "in", "notin": "not in", "subset": "contained in", "subseteq": "contained in",
    "cup": "union", "cap": "intersection", "emptyset": "empty set", "varnothing": "empty set",
    "forall": "for every", "exists": "there exists", "neg": "not", "land": "and", "lor": "or",
    "to": "to", "rightarrow": "to", "mapsto": "maps to", "implies": "implies",
    "Rightarrow": "implies", "iff": "if and only if", "Leftrightarrow": "if and only if",
    "sum": "sum", "prod": "product", "int": "integral", "infty": "infinity",
    "frac": "ratio", "sqrt": "square root", "log": "logarithm", "ln": "logarithm",
    "exp": "exponential", "max": "maximum", "min": "minimum", "sup": "supremum",
    "inf": "infimum", "lim": "limit", "partial": "partial derivative", "nabla": "gradient",
    "times": "times", "cdot": "times", "pm": "plus or minus", "circ": "composed with",
    "det": "determinant", "dim": "dimension", "deg": "degree", "Pr": "probability",
    "mathbb": "", "mathcal": "", "mathbf": "", "mathrm": "", "operatorname": "",
}
BLACKBOARD = {"R": "real numbers", "N": "natural numbers", "Z": "integers",
              "Q": "rational numbers", "C": "complex numbers", "E": "expectation",
              "P": "probability"}
SYMBOLS = {"<": " less than ", ">": " greater than ", "=": " equals ", "+": " plus ",
           "|": " ", "^": " ", "_": " ", "&": " ", "~": " ", "$": " ", "{": " ", "}": " "}
_LATEX_DROP = re.compile(r"(?<!\\)%[^\n]*|\\(?:label|ref|eqref|cite[a-z]*)\s*\{[^{}]*\}"
                         r"|\\(?:begin|end)\s*\{[^{}]*\}(?:\s*\[[^\]]*\])?")
_BB = re.compile(r"\\mathbb\s*\{?\s*([A-Z])\s*\}?")
_MACRO = re.compile(r"\\([A-Za-z]+)\*?")
# comments that are notes or tool directives rather than descriptions
_NOT_PROSE = re.compile(r"\W*(?:(?:todo|xxx|fixme|hack|note|bpo|gh|issue|noqa|pragma|pylint|mypy|"
                        r"isort)\b|type:|fmt:|-\*-|!)", re.I)


def spell_latex(src: str) -> str:
    """A LaTeX fragment in words: comments, labels, references and environment markers
    dropped, blackboard sets and common symbols spelled out, other macros stripped."""
    text = _LATEX_DROP.sub(" ", src)
    text = _BB.sub(lambda m: f" {BLACKBOARD.get(m.group(1), '')} ", text)
    text = _MACRO.sub(lambda m: f" {SPELLED.get(m.group(1), '')} ", text)
    return "".join(SYMBOLS.get(c, c) for c in text)


def _summary(doc_text: str) -> str:
    """The first paragraph of a docstring or comment, at most ``SUMMARY_WORDS`` words."""
    para = re.split(r"\n[ \t]*\n", doc_text.strip(), maxsplit=1)[0]
    return " ".join(para.split()[:SUMMARY_WORDS])


def code_targets(doc: Doc) -> list[Target]:
    """Documented functions and methods of a code file."""
    out = []
    for d in definitions(doc):
        if d.kind not in ("function", "method") or not d.doc:
            continue
        summary = _summary(d.doc)
        if d.doc_kind == "comment" and _NOT_PROSE.match(summary):
            continue
        if len([w for w in ALPHA.findall(summary) if len(w) > 2]) < MIN_CONTENT_WORDS + 1:
            continue
        if d.span[1] - d.span[0] > MAX_TARGET_CHARS:
            continue
        ids = set()
        for ident in d.identifiers:
            ids.add(ident.lower())
            ids.update(p.lower() for p in split_identifier(ident))
        out.append(Target(doc, *d.span, d.doc_kind, source_text=summary, name=d.name,
                          aux=ids))
    return out


def section_targets(doc: Doc) -> list[Target]:
    """Sections whose own body has at least ``MIN_BODY_WORDS`` words."""
    out = []
    for s in sections(doc):
        start, end = s.body
        body = doc.text[start:end]
        lead = len(body) - len(body.lstrip())
        start, end = start + lead, start + len(body.rstrip())
        if len(ALPHA.findall(body)) < MIN_BODY_WORDS or end - start > MAX_TARGET_CHARS:
            continue
        out.append(Target(doc, start, end, "section", source_text=s.title, name=s.title))
    return out


def theorem_targets(doc: Doc) -> list[Target]:
    """Theorem-like LaTeX environments with a statement of at least three words."""
    out = []
    for env, start, end in theorems(doc):
        words = spell_latex(doc.text[start:end])
        if len([w for w in ALPHA.findall(words) if len(w) > 1]) < MIN_CONTENT_WORDS:
            continue
        out.append(Target(doc, start, end, "theorem", source_text=" ".join(words.split()),
                          name=env))
    return out


def ordered_targets(docs: list[Doc], rng: random.Random) -> list[Target]:
    """All targets; functions, sections and theorems take turns, each group spread over
    documents."""
    groups: dict[str, list[Target]] = {"code": [], "section": [], "theorem": []}
    for doc in docs:
        groups["code"].extend(code_targets(doc))
        groups["section"].extend(section_targets(doc))
        groups["theorem"].extend(theorem_targets(doc))
    return round_robin([spread(groups[g], rng) for g in groups])


def _seed_words(target: Target, stats: CorpusStats, neighbours) -> list[str]:
    """The words a query starts from (in order), before neighbours replace them."""
    if target.kind == "section":
        heading = [p for w in WORD.findall(target.source_text) for p in split_identifier(w)]
        heading = [w for w in heading if w.isalpha()]
        taken = {w.lower() for w in heading}
        counts: dict[str, int] = {}
        for w in ALPHA.findall(target.text):
            low = w.lower()
            if low not in taken and low not in STOPWORDS_EN and len(low) > 2 and low in neighbours:
                counts[low] = counts.get(low, 0) + 1
        ranked = sorted(counts, key=lambda w: (-counts[w] * stats.idf(term_of(w) or w), w))
        return heading + ranked[:SALIENT_BODY_WORDS]
    if target.kind == "theorem":
        return [w for w in ALPHA.findall(target.source_text) if len(w) > 1]
    ids = target.aux or set()
    out = []
    for token in WORD.findall(target.source_text):
        parts = [p for p in split_identifier(token) if p.isalpha()]
        if token.lower() in ids or any(p.lower() in ids for p in parts):
            continue
        out.extend(parts)
    return out


def build_query(target: Target, stats: CorpusStats, neighbours, rng: random.Random
                ) -> str | None:
    """The built-in paraphrase of ``target``, or None when fewer than ``MIN_CONTENT_WORDS``
    content words survive."""
    forbidden = stats.rare_terms(terms(target.text))
    if target.aux:
        forbidden |= {t for w in target.aux if (t := term_of(w))}

    def reject(word: str) -> bool:
        return (term_of(word) or word) in forbidden

    words: list[str] = []
    content = 0
    for w in _seed_words(target, stats, neighbours):
        low = w.lower()
        if len(low) < 2:
            continue
        if low in STOPWORDS_EN:
            if words and words[-1] != low:
                words.append(low)
            continue
        near = [] if low in KEEP_WORDS else neighbours.near(low, 2, reject)
        if near:
            new = near[0] if len(near) == 1 or rng.random() < NEAREST_PROBABILITY else near[1]
        elif not reject(low):
            new = low
        else:
            continue
        if new not in words:
            words.append(new)
            content += 1
        if content >= MAX_WORDS:
            break
    while words and words[-1] in STOPWORDS_EN:
        words.pop()
    while words and words[0] in STOPWORDS_EN:
        words.pop(0)
    if content < MIN_CONTENT_WORDS:
        return None
    return " ".join(words)
