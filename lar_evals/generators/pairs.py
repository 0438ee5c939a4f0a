"""Paraphrase pairs the corpus already holds: human-written text against the text it describes.

Each kind pairs a piece of prose a person wrote with the material it is about; the prose is the
query, the material the answer, and the written corpus has the prose **blanked out** (spaces,
byte for byte, line breaks kept: every other offset stays valid), so a search cannot find the
query's own words where they stood. Kinds:

* ``doc2code``: a Python function's docstring (else the ``#`` comment block right above it,
  unless that is a note or a tool directive), first paragraph, with doctest lines, Sphinx roles,
  backticked code and code-shaped words (``snake_case``, ``camelCase``, ``a.b``, ``f()``, words
  with digits) removed; plain words that happen to name an argument stay (the query must read as
  a sentence; the leak check rejects a rare one); answer: the function without its docstring.
* ``heading2section``: a Markdown/reST/LaTeX section's heading and its first sentence
  ("Backward compatibility: old files keep working."); answer: the rest of the section's own body.
* ``caption2text``: a LaTeX figure or table caption; answer: the paragraph that refers to the
  float's ``\\label`` (``\\ref``, ``\\cref``, ``\\autoref``, ...) in the same paper (first path
  component).
* ``ref2env``: a LaTeX sentence referring to a labelled environment (theorem, lemma, figure,
  table, algorithm, ...), the reference itself removed; answer: the environment.
* ``readme2code`` and ``cell2code`` (:mod:`lar_evals.generators.doc_pairs`): a README/docs
  sentence naming a function or class against its definition; a notebook markdown cell against
  the code cell after it.

Every query is the prose in words (LaTeX spelled out by :func:`lar_evals.generators.paraphrase.
spell_latex`), at most ``MAX_QUERY_WORDS`` words, at least ``MIN_CONTENT_WORDS`` content words;
the generic leak check (:mod:`lar_evals.generators.verify`) then rejects any that shares its
answer's rare terms.
"""
from __future__ import annotations

import ast
import random
import re
import warnings

from lar.layers.kits.lexical.tokenize import STOPWORDS_EN

from lar_evals.generators import doc_pairs
from lar_evals.generators.common import ALPHA, Doc, Target, round_robin, sentence_bounds, spread
from lar_evals.generators.paraphrase import spell_latex
from lar_evals.generators.sources import sections, structure_blocks

PAIR_KINDS = ("doc2code", "heading2section", "caption2text", "ref2env", "readme2code", "cell2code")
MIN_CONTENT_WORDS = 4
MAX_QUERY_WORDS = 30
MIN_ANSWER_WORDS = 12
MAX_TARGET_CHARS = 20_000
REF_ENVS = frozenset({"theorem", "lemma", "proposition", "corollary", "definition", "conjecture",
                      "claim", "remark", "example", "assumption", "thm", "lem", "prop", "cor",
                      "defn", "figure", "table", "algorithm", "listing"})
_REF = re.compile(r"\\(?:ref|cref|Cref|autoref|eqref|vref|nameref|subref|pageref)\s*\{([^{}\n]{1,80})\}")
_LABEL = re.compile(r"\\label\s*\{([^{}\n]{1,80})\}")
_CAPTION = re.compile(r"\\caption(?:of\{[^{}]*\})?\s*(?:\[[^\]]*\])?\s*\{")
_NOT_PROSE = re.compile(r"\W*(?:(?:todo|xxx|fixme|hack|note|bpo|gh|issue|noqa|pragma|pylint|mypy|"
                        r"isort)\b|type:|fmt:|-\*-|!)", re.I)
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`[^`]*`|``[^`]*``|`[^`]*`")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CODE_SHAPED = re.compile(r"\w*_\w*|\w+\(\)|\w+(?:\.\w+)+|[a-z]+[A-Z]\w*|\w*\d\w*")
_CODE_SHAPED_PROSE = re.compile(r"\w*_\w*|\w+\(\)")

__all__ = ["MIN_CONTENT_WORDS", "PAIR_KINDS", "caption_targets", "doc_targets", "heading_targets",
           "ordered_targets", "prose_query", "ref_targets"]


def prose_query(text: str, drop: set[str] = frozenset(), latex: bool = False, code: bool = True
                ) -> str | None:
    """``text`` as a query: markup removed, and code-shaped words (``code``: ``snake_case``,
    ``camelCase``, ``a.b``, ``f()``, words with digits; else only the first two and ``f()``)
    and the words of ``drop``; at most ``MAX_QUERY_WORDS`` words; None when fewer than
    ``MIN_CONTENT_WORDS`` content words remain."""
    shaped = _CODE_SHAPED if code else _CODE_SHAPED_PROSE
    if latex:
        text = spell_latex(_REF.sub(" ", text))
    text = _ROLE.sub(" ", text)
    text = _MD_LINK.sub(r"\1", text)
    words = []
    for tok in text.split():
        core = tok.strip(".,;:!?()[]{}\"'*_#>|<=")
        if not core or shaped.fullmatch(core) or core.lower() in drop:
            continue
        if not ALPHA.fullmatch(core.replace("-", "").replace("'", "")):
            continue
        words.append(tok.strip("*_#>|`\"()[]{}") if tok.strip("*_#>|`\"()[]{}") else core)
        if len(words) >= MAX_QUERY_WORDS:
            break
    content = [w for w in words if w.lower().strip(".,;:!?") not in STOPWORDS_EN and len(w) > 2]
    if len(content) < MIN_CONTENT_WORDS:
        return None
    return " ".join(words).strip(" ,;:") or None


def _first_paragraph(text: str) -> str:
    lines = []
    for line in text.strip().splitlines():
        if not line.strip():
            break
        if line.lstrip().startswith(">>>"):
            break
        lines.append(line.strip())
    return " ".join(lines)


def _char_of(lines: list[str], starts: list[int], lineno: int, col_bytes: int) -> int:
    line = lines[lineno - 1]
    return starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", "replace"))


def doc_targets(doc: Doc) -> list[Target]:
    """Documented Python functions: docstring (or comment above) against the code."""
    if not doc.id.lower().endswith((".py", ".pyi", ".pyw")):
        return []
    text = doc.text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.end_lineno is None:
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        span = (starts[first - 1], starts[node.end_lineno] if node.end_lineno < len(starts) else len(text))
        body = node.body
        doc_node = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(
            getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str) else None
        if doc_node is not None:
            if len(body) < 2:
                continue  # nothing but the docstring
            raw = ast.get_docstring(node) or ""
            redact = (_char_of(lines, starts, doc_node.lineno, doc_node.col_offset),
                      _char_of(lines, starts, doc_node.end_lineno, doc_node.end_col_offset))
            source = "docstring"
        else:
            i = first - 2
            while i >= 0 and lines[i].lstrip().startswith("#"):
                i -= 1
            if i == first - 2:
                continue
            raw = "\n".join(ln.strip().lstrip("#").strip() for ln in lines[i + 1:first - 1])
            if _NOT_PROSE.match(raw):
                continue
            redact = (starts[i + 1], starts[first - 1])
            span = (starts[i + 1], span[1])
            source = "comment"
        if span[1] - span[0] > MAX_TARGET_CHARS:
            continue
        query = prose_query(_first_paragraph(raw))
        if query is None:
            continue
        t = Target(doc, span[0], span[1], "doc2code", source_text=query, name=node.name,
                   extra={"pair": source}, redact=(redact,))
        if len(ALPHA.findall(t.text)) >= MIN_ANSWER_WORDS:
            out.append(t)
    return out


def _skip_commands(text: str, pos: int, end: int) -> int:
    """``pos`` moved past blank lines and lines that are only LaTeX commands (``\\label{...}``)."""
    while pos < end:
        nl = text.find("\n", pos, end)
        line = text[pos:end if nl < 0 else nl].strip()
        if line and not re.fullmatch(r"(?:\\[A-Za-z]+\*?(?:\[[^\]]*\])?(?:\{[^{}]*\})*\s*)+|%.*", line):
            break
        if nl < 0:
            return end
        pos = nl + 1
    while pos < end and text[pos].isspace():
        pos += 1
    return pos


def heading_targets(doc: Doc) -> list[Target]:
    """Section heading and first sentence against the rest of the section's own body."""
    latex = doc.id.lower().endswith((".tex", ".ltx", ".latex"))
    text = doc.text
    out = []
    for s in sections(doc):
        b0, b1 = s.body
        start = _skip_commands(text, b0, b1)
        if start >= b1:
            continue
        s0, s1 = sentence_bounds(text, start)
        s1 = min(s1, b1)
        title = s.title.strip().rstrip(":.")
        first = text[s0:s1]
        lead = f"{title}: " if not " ".join(first.split()).lower().startswith(title.lower()) else ""
        query = prose_query(lead + first, latex=latex, code=False)
        if query is None:
            continue
        rest0 = s1
        while rest0 < b1 and text[rest0].isspace():
            rest0 += 1
        rest1 = b1
        while rest1 > rest0 and text[rest1 - 1].isspace():
            rest1 -= 1
        if rest1 - rest0 > MAX_TARGET_CHARS or len(ALPHA.findall(text[rest0:rest1])) < MIN_ANSWER_WORDS:
            continue
        out.append(Target(doc, rest0, rest1, "heading2section", source_text=query, name=s.title,
                          redact=(s.heading, (s0, s1))))
    return out


def _braced(text: str, open_pos: int) -> int:
    """Index just past the ``}`` closing the ``{`` at ``open_pos - 1``, or -1."""
    depth, i = 1, open_pos
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _paper(doc: Doc) -> str:
    return doc.id.split("/", 1)[0] if "/" in doc.id else ""


def _labelled_envs(doc: Doc) -> list[tuple[str, str, int, int]]:
    """``(label, environment, start, end)`` of labelled environments of a LaTeX file."""
    out = []
    for b in structure_blocks(doc):
        name = b.label.rstrip("*").lower()
        if b.kind != "environment" or name not in REF_ENVS:
            continue
        start, end = doc.char_offset(b.start), doc.char_offset(b.end)
        m = _LABEL.search(doc.text, start, end)
        if m:
            out.append((m.group(1).strip(), name, start, end))
    return out


def _refs(docs: list[Doc]) -> dict[tuple[str, str], list[tuple[Doc, int]]]:
    """``{(paper, label): [(doc, position of the reference)]}`` in path order."""
    out: dict[tuple[str, str], list[tuple[Doc, int]]] = {}
    for d in docs:
        if not d.id.lower().endswith(".tex"):
            continue
        for m in _REF.finditer(d.text):
            for lab in m.group(1).split(","):
                out.setdefault((_paper(d), lab.strip()), []).append((d, m.start()))
    return out


def _paragraph(text: str, pos: int) -> tuple[int, int]:
    a = text.rfind("\n\n", 0, pos)
    b = text.find("\n\n", pos)
    a = 0 if a < 0 else a + 2
    b = len(text) if b < 0 else b
    return a, b


def caption_targets(docs: list[Doc], refs) -> list[Target]:
    """Figure/table captions against the paragraph that refers to the float."""
    out = []
    for doc in docs:
        for label, env, start, end in _labelled_envs(doc):
            if env not in ("figure", "table"):
                continue
            m = _CAPTION.search(doc.text, start, end)
            if m is None:
                continue
            close = _braced(doc.text, m.end())
            if close < 0 or close > end:
                continue
            query = prose_query(doc.text[m.end():close], latex=True, code=False)
            where = refs.get((_paper(doc), label))
            if query is None or not where:
                continue
            ref_doc, pos = where[0]
            a, b = _paragraph(ref_doc.text, pos)
            if b - a > MAX_TARGET_CHARS or len(ALPHA.findall(ref_doc.text[a:b])) < MIN_ANSWER_WORDS:
                continue
            extra = {"pair": env, "label": label}
            if ref_doc.id != doc.id:
                extra["caption_doc"] = doc.id
            redact = ((m.end(), close),) if ref_doc.id == doc.id else ()
            t = Target(ref_doc, a, b, "caption2text", source_text=query, name=label, extra=extra,
                       redact=redact)
            t.aux = {"redact_in": (doc, ((m.end(), close),))}
            out.append(t)
    return out


def ref_targets(docs: list[Doc], refs) -> list[Target]:
    """Sentences that refer to a labelled environment against the environment."""
    out = []
    for doc in docs:
        for label, env, start, end in _labelled_envs(doc):
            if end - start > MAX_TARGET_CHARS:
                continue
            for ref_doc, pos in refs.get((_paper(doc), label), ()):
                if ref_doc.id == doc.id and start <= pos < end:
                    continue  # a reference inside the environment itself
                s0, s1 = sentence_bounds(ref_doc.text, pos)
                query = prose_query(ref_doc.text[s0:s1], latex=True, code=False)
                if query is None:
                    continue
                t = Target(doc, start, end, "ref2env", source_text=query, name=label,
                           extra={"pair": env, "label": label},
                           redact=((s0, s1),) if ref_doc.id == doc.id else ())
                t.aux = {"redact_in": (ref_doc, ((s0, s1),))}
                if len(ALPHA.findall(t.text)) >= MIN_ANSWER_WORDS:
                    out.append(t)
                break
    return out


def ordered_targets(docs: list[Doc], rng: random.Random, kinds=PAIR_KINDS) -> list[Target]:
    """All targets of ``kinds``; the kinds take turns, each spread over documents."""
    refs = _refs(docs) if {"caption2text", "ref2env"} & set(kinds) else {}
    groups: dict[str, list[Target]] = {k: [] for k in kinds}
    for doc in docs:
        if "doc2code" in groups:
            groups["doc2code"].extend(doc_targets(doc))
        if "heading2section" in groups:
            groups["heading2section"].extend(heading_targets(doc))
    if "caption2text" in groups:
        groups["caption2text"] = caption_targets(docs, refs)
    if "ref2env" in groups:
        groups["ref2env"] = ref_targets(docs, refs)
    if "readme2code" in groups:
        groups["readme2code"] = doc_pairs.readme_targets(
            docs, doc_pairs.defined_names(docs), prose_query, MAX_TARGET_CHARS, MIN_ANSWER_WORDS)
    if "cell2code" in groups:
        groups["cell2code"] = [t for d in docs
                               for t in doc_pairs.cell_targets(d, prose_query, MIN_ANSWER_WORDS)]
    return round_robin([spread(groups[k], rng) for k in kinds])


def redactions(target: Target) -> list[tuple[Doc, tuple[tuple[int, int], ...]]]:
    """Every ``(doc, ranges)`` a written query of ``target`` blanks: its own ranges and, for a
    query whose prose lives in another document (a caption, a referring sentence), that one."""
    out = [(target.doc, target.redact)] if target.redact else []
    other = (target.aux or {}).get("redact_in") if isinstance(target.aux, dict) else None
    if other is not None and other[0].id != target.doc.id:
        out.append(other)
    return out
