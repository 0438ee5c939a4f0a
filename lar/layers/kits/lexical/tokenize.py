"""lar's own tokenizers for word-level (BM25) layers: code, LaTeX, prose and plain.

Every tokenizer maps text to a list of *terms*; one normalisation is applied to every word
(``Tokenizer.norm``): lower-casing, optional English stemming (PyStemmer, Snowball), and
dropping single ASCII letters and runs longer than ``MAX_TERM_CHARS``. Prose, LaTeX and plain
text also drop one-character words and the built-in English stopwords (and words whose stem is
a stopword's stem, e.g. ``having``); code keeps stopwords, which are keywords there (``if``,
``is``, ``not``, ``in``). Documents and queries go through the same rules, so a query term
matches the same term in a document whichever tokenizer produced it.

* **code**: identifiers (``\\w+``, kebab-joined when the part after ``-`` starts with a letter)
  that are compounds (``is_compound``: an inner ``_``/``-`` or a camelCase/PascalCase boundary)
  are split at ``_``/``-``, lower-to-upper case changes, acronym ends (``HTTPResponse`` ->
  ``HTTP``, ``Response``) and letter/digit boundaries (``utf8Decode`` -> ``utf``, ``8``,
  ``Decode``), and also yield their *whole* form: the parts joined without separators and
  lower-cased, so ``parseDuration`` and ``parse_duration`` share the whole term
  ``parseduration`` as well as ``parse`` and ``duration``. In documents a letter/digit mix such
  as ``int32`` also yields its parts; in queries it stays one term. Punctuation yields nothing.
* **prose**: Unicode words (letters and digits; ``_`` separates), lower-cased.
* **latex**: comments dropped, each macro becomes its name as a term (``\\frac`` -> ``frac``;
  a few pure-markup macros such as ``\\begin`` or ``\\label`` are dropped), braces, ``$``, ``^``
  and ``_`` are removed, and the remaining text (math content included) is prose-tokenised.
* **plain**: ``\\w\\w+`` runs of the lower-cased text (bm25s's default split).

A *setting* names which tokenizer reads which unit and how queries are read (a query's terms
are the union of its readings: "auto-v1" reads it as prose and as code, so ``parseDuration``
finds ``parse_duration``). Settings are versioned names and part of the bm25 layer's build
version, so changing one rebuilds lazily.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable

from lar.core.errors import ConfigError, require
from lar.store.extract import kind_for

# A small English stopword list (function words only: content words are never dropped).
STOPWORDS_EN: frozenset[str] = frozenset("""
a an and are as at be but by for if in into is it no not of on or such that the their then
there these they this to was will with i me my we our you your he him his she her its them
what which who whom when where why how all any both each few more most other some do does did
have has had been being were am from up down out off over under again further once here so
than too very can just should now about above after before below between during through until
while against only own same nor
""".split())

CODE_EXTENSIONS: frozenset[str] = frozenset("""
.py .pyi .pyx .pxd .ipynb .c .h .cc .cpp .cxx .hpp .hh .hxx .cu .cuh .m .mm .java .kt .kts
.scala .groovy .go .rs .swift .js .jsx .mjs .cjs .ts .tsx .vue .svelte .rb .php .pl .pm .lua
.r .jl .cs .fs .fsx .vb .sh .bash .zsh .fish .ps1 .bat .sql .hs .ml .mli .ex .exs .erl .clj
.cljs .el .lisp .scm .dart .zig .nim .v .sv .vhd .f .f90 .f95 .cmake .mk .make .gradle .proto
.thrift .graphql .toml .yaml .yml .ini .cfg .json .xml .css .scss .less .tf .dockerfile
""".split())
CODE_FILENAMES: frozenset[str] = frozenset({"makefile", "dockerfile", "cmakelists.txt",
                                            "rakefile", "gemfile", "justfile"})

# macros that only mark up structure; their arguments (braces stripped) are still tokenised
LATEX_MARKUP_MACROS: frozenset[str] = frozenset("""
begin end label ref eqref autoref cref cite citep citet item textbf textit texttt emph
underline section subsection subsubsection paragraph subparagraph chapter part caption
usepackage documentclass newcommand renewcommand providecommand def let left right big bigl
bigr bigg biggl biggr mathrm mathbf mathit mathsf mathtt mathcal mathbb text hline vspace
hspace noindent centering includegraphics footnote url href input include maketitle
tableofcontents bibliography bibliographystyle newpage clearpage quad qquad label
""".split())

MAX_TERM_CHARS = 64  # longer runs (hashes, base64, minified code) are noise, not terms

_PROSE_WORD = re.compile(r"[^\W_]+")
_PLAIN_WORD = re.compile(r"\b\w\w+\b")
_IDENT = re.compile(r"\w+(?:-(?=[^\W\d_])\w+)*")
_SEP = re.compile(r"[_\-]+")
_ASCII_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_LATEX_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
_LATEX_MACRO = re.compile(r"\\([A-Za-z]+)\*?|\\[^A-Za-z]")
_LATEX_STRIP = str.maketrans({c: " " for c in "{}[]$^_&~#"})
_MISS = object()
_MEMO_LIMIT = 1_000_000


def _split_unicode(piece: str) -> list[str]:
    """Case/digit splitting for identifiers with non-ASCII letters (no separators inside)."""
    out: list[str] = []
    cur = piece[0]
    for i in range(1, len(piece)):
        p, c = piece[i - 1], piece[i]
        nxt = piece[i + 1] if i + 1 < len(piece) else ""
        cut = (p.isdigit() != c.isdigit()
               or (c.isupper() and not p.isupper() and not p.isdigit())
               or (p.isupper() and c.isupper() and nxt.islower()))
        if cut:
            out.append(cur)
            cur = c
        else:
            cur += c
    out.append(cur)
    return out


def split_identifier(word: str) -> list[str]:
    """The parts of an identifier, original case kept: ``parseHTTPResponse2`` ->
    ``['parse', 'HTTP', 'Response', '2']``; ``snake_case`` -> ``['snake', 'case']``."""
    parts: list[str] = []
    for piece in _SEP.split(word):
        if not piece:
            continue
        if piece.isascii():
            parts.extend(_ASCII_PARTS.findall(piece))
        else:
            parts.extend(_split_unicode(piece))
    return parts


_COMPOUND_ASCII = re.compile(r"[^_\-][_\-]+[^_\-]|[a-z][A-Z]|[0-9][A-Z][a-z]|[A-Z][A-Z][a-z]")


def is_compound(word: str) -> bool:
    """Whether ``word`` is an identifier made of parts: it has an inner ``_``/``-``, a
    lower-to-upper case change (``parseDuration``, ``mRNA``), a digit before a capitalised part
    (``utf8Decode``) or an acronym followed by a capitalised part (``HTTPResponse``). Plain words
    and letter/digit mixes such as ``p53``, ``x86`` or ``H3K27me3`` are not compounds: they stay
    one term, as in prose, so queries read as code do not split them into noise."""
    if word.isascii():
        return _COMPOUND_ASCII.search(word) is not None
    core = word.strip("_-")
    if "_" in core or "-" in core:
        return True
    return any((a.islower() or a.isdigit()) and b.isupper() for a, b in zip(word, word[1:]))


def code_mode(path: str) -> str:
    """'code' for source files (by extension or well-known name), else ''."""
    p = PurePosixPath(path)
    if p.suffix.lower() in CODE_EXTENSIONS or p.name.lower() in CODE_FILENAMES:
        return "code"
    return ""


def _auto_mode(path: str) -> str:
    kind = kind_for(path)
    if kind == "latex":
        return "latex"
    if kind == "notebook":
        return "code"
    return code_mode(path) or "prose"


@dataclass(frozen=True)
class Setting:
    """A named, versioned tokenizer setting: which tokenizer reads each unit (by path) and
    which tokenizers read a query (their terms are united, duplicates dropped)."""

    name: str
    description: str
    doc_mode: Callable[[str], str]
    query_modes: tuple[str, ...]


SETTINGS: dict[str, Setting] = {
    "auto-v1": Setting("auto-v1", "code tokenizer for source files and notebooks, LaTeX for "
                       ".tex, prose otherwise; queries read as prose and as code",
                       _auto_mode, ("prose", "code")),
    "code-v1": Setting("code-v1", "identifier-splitting code tokenizer for every unit (LaTeX "
                       "for .tex); queries read as prose and as code",
                       lambda p: "latex" if kind_for(p) == "latex" else "code", ("prose", "code")),
    "prose-v1": Setting("prose-v1", "prose tokenizer for every unit and for queries",
                        lambda p: "prose", ("prose",)),
    "plain-v1": Setting("plain-v1", "lower-cased \\w\\w+ runs (bm25s's default split) for every "
                        "unit and for queries", lambda p: "plain", ("plain",)),
}


class Tokenizer:
    """Tokenizes units and queries for one setting; ``key`` names it in build versions.

    Thread-safe: each thread gets its own stemmer; the memo tables are plain dicts."""

    def __init__(self, setting: str = "auto-v1", stem: bool = True):
        if setting not in SETTINGS:
            raise ConfigError(f"unknown bm25 tokenizer setting {setting!r}; choose one of "
                              f"{', '.join(sorted(SETTINGS))}")
        self.setting = SETTINGS[setting]
        self.stem = bool(stem)
        self._local = threading.local()
        self._norm_memo: dict[str, str | None] = {}
        self._code_memos: dict[tuple[bool, bool], dict[str, tuple[str, ...]]] = {
            (q, st): {} for q in (False, True) for st in (False, True)}
        self._stop_terms_cache: frozenset[str] | None = None

    @property
    def key(self) -> str:
        return self.setting.name + ("+stem" if self.stem else "")

    # -- normalisation ------------------------------------------------------------------------
    @property
    def _stop_terms(self) -> frozenset[str]:
        """Stopwords and (when stemming) their stems."""
        if self._stop_terms_cache is None:
            terms = STOPWORDS_EN
            if self.stem:
                terms = terms | {self._stemmer().stemWord(w) for w in STOPWORDS_EN}
            self._stop_terms_cache = frozenset(terms)
        return self._stop_terms_cache

    def _stemmer(self):
        """This thread's PyStemmer English stemmer (``MissingExtraError`` without PyStemmer)."""
        st = getattr(self._local, "stemmer", None)
        if st is None:
            Stemmer = require("Stemmer", "lexical")

            st = self._local.stemmer = Stemmer.Stemmer("english")
        return st

    def norm(self, word: str, stop: bool = True) -> str | None:
        """The term for a lower-cased word, or None: a single ASCII letter, a word longer than
        ``MAX_TERM_CHARS``, or with ``stop`` (the prose rules) any one-character word, a
        stopword, or a word whose term is a stopword's term (``having`` -> ``have``), so that
        the keywords code keeps never meet prose words."""
        if stop and (len(word) == 1 or word in STOPWORDS_EN):
            return None
        r = self._norm_memo.get(word, _MISS)
        if r is _MISS:
            if len(word) > MAX_TERM_CHARS or (len(word) == 1 and word.isascii() and word.isalpha()):
                r = None
            elif self.stem and not word.isdigit():
                r = self._stemmer().stemWord(word)
            else:
                r = word
            if len(self._norm_memo) > _MEMO_LIMIT:
                self._norm_memo.clear()
            self._norm_memo[word] = r
        if stop and r is not None and r in self._stop_terms:
            return None
        return r  # type: ignore[return-value]

    # -- tokenizers ---------------------------------------------------------------------------
    def prose(self, text: str, stop: bool = True) -> list[str]:
        norm = self.norm
        return [t for w in _PROSE_WORD.findall(text.lower()) if (t := norm(w, stop)) is not None]

    def plain(self, text: str, stop: bool = True) -> list[str]:
        norm = self.norm
        return [t for w in _PLAIN_WORD.findall(text.lower()) if (t := norm(w, stop)) is not None]

    def code_word(self, word: str, query: bool = False, stop: bool = False) -> tuple[str, ...]:
        """Terms of one identifier: for a compound, the whole then its parts. In documents a
        non-compound letter/digit mix (``int32``, ``utf8``) also yields its parts (``int``,
        ``32``); in queries it stays one term (parts of ``p53`` would only add noise)."""
        memo = self._code_memos[(query, stop)]
        hit = memo.get(word)
        if hit is not None:
            return hit
        norm = self.norm
        core = word.strip("_-")
        if is_compound(word):
            parts = [p.lower() for p in split_identifier(word)]
        elif not query and not core.isalpha() and not core.isdigit():
            parts = [p.lower() for p in split_identifier(core)]
        else:
            parts = [core.lower()] if core else []
        words = parts if len(parts) <= 1 else ["".join(parts)] + parts
        out = tuple(t for w in words if (t := norm(w, stop)) is not None)
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        memo[word] = out
        return out

    def code(self, text: str, query: bool = False, stop: bool = False) -> list[str]:
        out: list[str] = []
        for w in _IDENT.findall(text):
            out.extend(self.code_word(w, query, stop))
        return out

    def latex(self, text: str, stop: bool = True) -> list[str]:
        text = _LATEX_COMMENT.sub(" ", text)
        out: list[str] = []
        pos = 0
        for m in _LATEX_MACRO.finditer(text):
            out.extend(self.prose(text[pos:m.start()].translate(_LATEX_STRIP), stop))
            name = m.group(1)
            if name and name.lower() not in LATEX_MARKUP_MACROS:
                t = self.norm(name.lower(), stop)
                if t is not None:
                    out.append(t)
            pos = m.end()
        out.extend(self.prose(text[pos:].translate(_LATEX_STRIP), stop))
        return out

    def by_mode(self, text: str, mode: str, query: bool = False, stop: bool | None = None
                ) -> list[str]:
        """Terms of ``text`` read with tokenizer ``mode``. Unless ``stop`` says otherwise,
        English stopwords are dropped from prose, LaTeX and plain text but kept in code, where
        ``if``, ``is``, ``not``, ``in``, ``for`` are keywords (the same rule applies to a query's
        prose and code readings, so it stays symmetric)."""
        if stop is None:
            stop = mode != "code"
        if mode == "code":
            return self.code(text, query, stop)
        if mode == "latex":
            return self.latex(text, stop)
        if mode == "plain":
            return self.plain(text, stop)
        if mode == "prose":
            return self.prose(text, stop)
        raise ConfigError(f"unknown tokenizer mode {mode!r}")

    # -- what the layer calls -----------------------------------------------------------------
    def mode_for(self, path: str) -> str:
        """Which tokenizer reads the unit at ``path`` under this setting."""
        return self.setting.doc_mode(path)

    def document(self, text: str, path: str) -> list[str]:
        return self.by_mode(text, self.mode_for(path))

    def query(self, text: str) -> list[str]:
        """The query's terms: the union of its query modes' terms, first occurrence order."""
        seen: dict[str, None] = {}
        for mode in self.setting.query_modes:
            for t in self.by_mode(text, mode, query=True):
                seen.setdefault(t, None)
        return list(seen)

    def surface(self, text: str) -> tuple[list[str], list[str]]:
        """Lower-cased forms to look for in a chunk to mark the query's matches: the query's
        words and identifier parts, and (when stemming) their stems. Stopwords and single
        letters are left out. Returns ``(words, stems)``."""
        words: dict[str, None] = {}
        for w in _IDENT.findall(text):
            for piece in [w] + split_identifier(w) + _PROSE_WORD.findall(w):
                lw = piece.lower()
                if self.norm(lw) is not None:
                    words.setdefault(lw, None)
        stems: dict[str, None] = {}
        if self.stem:
            for lw in words:
                s = self.norm(lw)
                if s and s != lw and len(s) >= 3 and s not in words:
                    stems.setdefault(s, None)
        return list(words), list(stems)
