"""LaTeX math to a normalised token sequence (seed section 12: macros resolved, variables replaced).

Pipeline, all pure functions:

1. ``tokenize``: commands (``\\frac``), control symbols (``\\,``), numbers (``3.14``), single
   characters; ``%`` comments removed; whitespace kept as ``" "`` markers (it matters only
   inside ``\\text{...}``); unicode math (``α``, ``≤``, ``ℝ``) mapped to its command.
2. ``expand_macros``: ``\\newcommand``/``\\def`` macros of the unit (``lar.layers.formula.macros``),
   with ``#1``.. arguments and an optional first argument, bounded against runaway recursion.
3. Synonyms (``\\dfrac`` -> ``\\frac``, ``\\le`` -> ``\\leq``, ``\\to`` -> ``\\rightarrow``,
   ``\\lbrace`` -> ``\\{`` ...; ``lar.layers.formula.tables``).
4. Group parse on ``{``/``}`` (unbalanced braces: an extra ``}`` is dropped, a missing one closed
   at the end; both counted in ``Normalised.unbalanced``), then emission:

   * formatting goes (``\\left``, ``\\right``, ``\\displaystyle``, spacing, ``&``, ``\\label{..}``);
   * ``\\text``/``\\mathrm``/``\\operatorname`` content becomes word tokens
     (``\\mathrm{d}`` -> ``d``; operator names such as ``\\mathrm{sin}`` -> ``\\sin``);
   * ``\\mathbb{R}``, ``\\mathcal{O}`` are one constant token each;
   * structural commands keep braced arguments (``\\frac { .. } { .. }``, ``\\sqrt [ n ] { .. }``),
     and so do ``^``/``_`` (``x^2`` and ``x^{2}`` are the same), other groups lose their braces;
   * single letters (Latin, Greek commands such as ``\\alpha``, with primes) become placeholders
     ``V1``, ``V2``... numbered by first appearance; numbers and other commands stay;
   * trailing sentence punctuation of a display formula (``E = mc^2 .``) is dropped.

So ``\\frac{a}{b} + \\alpha^2`` is ``\\frac { V1 } { V2 } + V3 ^ { 2 }``, the same as
``\\dfrac{x}{y}+\\beta^{2}``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping, Union

from lar.layers.formula import tables as T
from lar.layers.formula.macros import Macro
from lar.layers.formula.tokens import tokenize

MAX_TOKENS = 6000
"""Formulas are cut at this many raw tokens (after macro expansion); ``truncated`` says so."""
MAX_EXPANSIONS = 500

_LATIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

Item = Union[str, list]  # a token or a group (list of items)


@dataclass(frozen=True, slots=True)
class Normalised:
    """The normalised form of one formula."""

    tokens: tuple[str, ...]
    variables: int = 0
    unbalanced: int = 0
    truncated: bool = False

    @property
    def text(self) -> str:
        """The tokens joined by single spaces (tokens never contain spaces)."""
        return " ".join(self.tokens)


def _grab_group(queue: deque, open_tok: str = "{", close_tok: str = "}") -> list[str]:
    """Pop a balanced ``{...}`` (content, without the braces) or one token off ``queue``."""
    while queue and queue[0] == " ":
        queue.popleft()
    if not queue:
        return []
    first = queue.popleft()
    if first != open_tok:
        return [first]
    depth, out = 1, []
    while queue:
        t = queue.popleft()
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
        if t == close_tok and depth == (0 if close_tok == "}" else 1):
            break
        out.append(t)
    return out


def expand_macros(tokens: list[str], macros: Mapping[str, Macro]) -> tuple[list[str], bool]:
    """Expand ``macros`` in ``tokens``; returns the tokens and whether a limit stopped it."""
    if not macros:
        return tokens, False
    queue, out, steps, limited = deque(tokens), [], 0, False
    while queue:
        t = queue.popleft()
        m = macros.get(t)
        if m is None:
            out.append(t)
            continue
        if steps >= MAX_EXPANSIONS or len(out) + len(queue) > MAX_TOKENS:
            limited = True
            out.append(t)
            continue
        steps += 1
        args: list[list[str]] = []
        if m.default is not None:
            while queue and queue[0] == " ":
                queue.popleft()
            if queue and queue[0] == "[":
                args.append(_grab_group(queue, "[", "]"))
            else:
                args.append(list(m.default))
        while len(args) < m.nargs:
            args.append(_grab_group(queue))
        body: list[str] = []
        for b in m.body:
            if len(b) == 2 and b[0] == "#" and b[1].isdigit():
                k = int(b[1]) - 1
                body.extend(args[k] if 0 <= k < len(args) else ())
            else:
                body.append(b)
        queue.extendleft(reversed(body))
    return out, limited


def _apply_synonyms(tokens: list[str]) -> list[str]:
    out: list[str] = []
    for t in tokens:
        syn = T.SYNONYMS.get(t)
        out.extend(syn if syn else (t,))
    return out


def parse_groups(tokens: list[str]) -> tuple[list[Item], int]:
    """Nest ``tokens`` on braces; returns the tree and the number of brace fixes it needed."""
    root: list[Item] = []
    stack = [root]
    bad = 0
    for t in tokens:
        if t == "{":
            group: list[Item] = []
            stack[-1].append(group)
            stack.append(group)
        elif t == "}":
            if len(stack) > 1:
                stack.pop()
            else:
                bad += 1
        else:
            stack[-1].append(t)
    return root, bad + len(stack) - 1


def _flat(items: list[Item]) -> str:
    parts: list[str] = []
    for it in items:
        if isinstance(it, list):
            parts.append("{" + _flat(it) + "}")
        elif it != " ":
            parts.append(it)
    return "".join(parts)


def _words(items: list[Item]) -> list[str]:
    """Alphanumeric words of a ``\\text``-like argument (spacing commands join, others split)."""
    words: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            w = "".join(cur)
            words.append("\\" + w if w in T.FUNCTION_WORDS else w)
            cur.clear()

    def walk(seq: list[Item]) -> None:
        for it in seq:
            if isinstance(it, list):
                walk(it)
            elif it.isalnum() or it.replace(".", "").isdigit():
                cur.append(it)
            elif it in T.DROP and it != "~" and it != "\\ ":
                continue  # thin spaces inside a name: arg\,max
            else:
                flush()
    walk(items)
    flush()
    return words


class _Emitter:
    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def var(self, key: str) -> str:
        ph = self.names.get(key)
        if ph is None:
            ph = self.names[key] = f"V{len(self.names) + 1}"
        return ph

    @staticmethod
    def _skip_space(items: list[Item], i: int) -> int:
        while i < len(items) and items[i] == " ":
            i += 1
        return i

    def _arg(self, items: list[Item], i: int) -> tuple[list[Item], int]:
        i = self._skip_space(items, i)
        if i >= len(items):
            return [], i
        it = items[i]
        return (it if isinstance(it, list) else [it]), i + 1

    def _opt(self, items: list[Item], i: int) -> tuple[list[Item] | None, int]:
        j = self._skip_space(items, i)
        if j >= len(items) or items[j] != "[":
            return None, i
        for k in range(j + 1, len(items)):
            if items[k] == "]":
                return items[j + 1:k], k + 1
        return None, i

    def seq(self, items: list[Item]) -> list[str]:
        out: list[str] = []
        i = 0
        while i < len(items):
            toks, i = self.one(items, i)
            out.extend(toks)
        return out

    def braced(self, items: list[Item]) -> list[str]:
        return ["{", *self.seq(items), "}"]

    def one(self, items: list[Item], i: int) -> tuple[list[str], int]:  # noqa: C901 - a dispatch
        """Emit the thing starting at ``items[i]`` (with its arguments); return the next index."""
        it = items[i]
        i += 1
        if isinstance(it, list):
            return self.seq(it), i
        if it == " " or it in T.DROP:
            return [], i
        if it in T.SIZERS:
            j = self._skip_space(items, i)
            nxt = items[j] if j < len(items) else None
            if nxt == ".":
                return [], j + 1
            if nxt in ("<", ">"):  # \left< is an angle bracket
                return ["\\langle" if nxt == "<" else "\\rangle"], j + 1
            return [], i
        if it in T.SWITCHES:  # {\rm acc}: the wrapper applied to the rest of the group
            return self.one([T.SWITCHES[it], items[i:]], 0)[0], len(items)
        if it == T.ROW_SEP:
            _, i = self._opt(items, i)
            return [T.ROW_SEP], i
        if it in T.DROP_ARGS:
            if i < len(items) and items[i] == "*":
                i += 1
            for _ in range(T.DROP_ARGS[it]):
                _, i = self._arg(items, i)
            return [], i
        if it in T.KEEP_LAST:
            for _ in range(T.KEEP_LAST[it] - 1):
                _, i = self._arg(items, i)
            arg, i = self._arg(items, i)
            return self.seq(arg), i
        if it in T.TRANSPARENT:
            arg, i = self._arg(items, i)
            return self.seq(arg), i
        if it in T.WORD_WRAPPERS:
            if i < len(items) and items[i] == "*":
                i += 1
            arg, i = self._arg(items, i)
            return _words(arg), i
        if it in T.CONST_FONTS:
            arg, i = self._arg(items, i)
            return [f"{it}{{{_flat(arg)}}}"], i
        if it in ("\\begin", "\\end"):
            arg, i = self._arg(items, i)
            name = _flat(arg)
            if it == "\\begin" and name in T.ENVS_WITH_SPEC:
                _, i = self._arg(items, i)
            return ([] if name in T.FORMAT_ENVS else [f"{it}{{{name}}}"]), i
        if it in T.ARITY:
            out = [it]
            if it in T.OPTIONAL_FIRST:
                opt, i = self._opt(items, i)
                if opt is not None:
                    out += ["[", *self.seq(opt), "]"]
            for _ in range(T.ARITY[it]):
                arg, i = self._arg(items, i)
                out += self.braced(arg)
            return out, i
        if it in ("^", "_"):
            j = self._skip_space(items, i)
            if it == "^" and j < len(items) and (items[j] == "'" or items[j] == ["'"]):
                return ["'"], j + 1  # x^\prime
            if j >= len(items):
                return [it], j
            toks, j = self.one(items, j)
            return [it, "{", *toks, "}"], j
        if (len(it) == 1 and it in _LATIN) or it in T.VARIABLE_COMMANDS:
            key = it
            while i < len(items):
                if items[i] == "'":  # x'
                    key += "'"
                    i += 1
                elif items[i] == "^" and i + 1 < len(items) and items[i + 1] \
                        and all(p == "'" for p in items[i + 1]):  # x^\prime
                    key += "'" * len(items[i + 1])
                    i += 2
                else:
                    break
            return [self.var(key)], i
        return [it], i


def _tidy(tokens: list[str]) -> list[str]:
    """Drop sentence punctuation before row ends and at the end; collapse empty rows."""
    out: list[str] = []
    for t in tokens + [T.ROW_SEP]:
        if t != T.ROW_SEP:
            out.append(t)
            continue
        while out and (out[-1] in T.TRAILING_PUNCT or out[-1] == T.ROW_SEP):
            out.pop()
        if out:
            out.append(t)
    if out and out[-1] == T.ROW_SEP:
        out.pop()  # the sentinel row end
    return out


def normalise(latex: str, macros: Mapping[str, Macro] | None = None) -> Normalised:
    """The normalised token sequence of the math ``latex`` (without its ``$``/env delimiters)."""
    raw = tokenize(latex)
    raw, limited = expand_macros(raw, macros or {})
    truncated = limited or len(raw) > MAX_TOKENS
    raw = _apply_synonyms(raw[:MAX_TOKENS])
    tree, bad = parse_groups(raw)
    em = _Emitter()
    tokens = _tidy(em.seq(tree))
    return Normalised(tuple(tokens), len(em.names), bad, truncated)


def normalise_tokens(latex: str, macros: Mapping[str, Macro] | None = None) -> list[str]:
    """Shortcut: just the normalised tokens."""
    return list(normalise(latex, macros).tokens)


__all__ = ["Normalised", "expand_macros", "normalise", "normalise_tokens", "parse_groups",
           "tokenize"]
