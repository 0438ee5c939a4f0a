"""Fixed vocabularies of the formula normaliser: synonyms, formatting commands, arities, letters.

Every table maps *raw* tokens (as ``lar.layers.formula.tokens.tokenize`` writes them: a command is
``"\\name"``, a control symbol ``"\\,"``, any other character itself). Keep them data only: the
rules that use them live in ``normalize.py``.
"""
from __future__ import annotations

import unicodedata

# -- letters that become variable placeholders -----------------------------------------------
GREEK_LOWER = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron "
               "pi rho sigma tau upsilon phi chi psi omega").split()
GREEK_UPPER = "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()
VARIABLE_COMMANDS = frozenset({"\\" + g for g in GREEK_LOWER + GREEK_UPPER} | {"\\ell"})

# -- synonyms: one raw token -> the raw tokens it means ---------------------------------------
_SYN: dict[str, str] = {
    "\\dfrac": "\\frac", "\\tfrac": "\\frac", "\\cfrac": "\\frac",
    "\\dbinom": "\\binom", "\\tbinom": "\\binom",
    "\\le": "\\leq", "\\leqslant": "\\leq", "\\ge": "\\geq", "\\geqslant": "\\geq",
    "\\ne": "\\neq", "\\lt": "<", "\\gt": ">",
    "\\to": "\\rightarrow", "\\longrightarrow": "\\rightarrow", "\\gets": "\\leftarrow",
    "\\longleftarrow": "\\leftarrow", "\\implies": "\\Rightarrow",
    "\\Longrightarrow": "\\Rightarrow",
    "\\impliedby": "\\Leftarrow", "\\Longleftarrow": "\\Leftarrow", "\\iff": "\\Leftrightarrow",
    "\\Longleftrightarrow": "\\Leftrightarrow", "\\longleftrightarrow": "\\leftrightarrow",
    "\\longmapsto": "\\mapsto",
    "\\land": "\\wedge", "\\lor": "\\vee", "\\lnot": "\\neg",
    "\\lbrace": "\\{", "\\rbrace": "\\}", "\\lbrack": "[", "\\rbrack": "]",
    "\\vert": "|", "\\lvert": "|", "\\rvert": "|", "\\mid": "|",
    "\\Vert": "\\|", "\\lVert": "\\|", "\\rVert": "\\|",
    "\\ast": "*", "\\colon": ":",
    "\\ldots": "\\dots", "\\cdots": "\\dots", "\\dotsc": "\\dots", "\\dotsb": "\\dots",
    "\\dotsm": "\\dots", "\\dotsi": "\\dots", "\\dotso": "\\dots",
    "\\cdotp": "\\cdot", "\\centerdot": "\\cdot", "\\varnothing": "\\emptyset",
    "\\intop": "\\int", "\\smallint": "\\int",
    "\\widehat": "\\hat", "\\widetilde": "\\tilde", "\\overline": "\\bar",
    "\\boldsymbol": "\\mathbf", "\\bm": "\\mathbf", "\\pmb": "\\mathbf", "\\mathbold": "\\mathbf",
    "\\mathbfit": "\\mathbf", "\\Bbb": "\\mathbb",
    "\\varepsilon": "\\epsilon", "\\vartheta": "\\theta", "\\varphi": "\\phi", "\\varrho": "\\rho",
    "\\varsigma": "\\sigma", "\\varpi": "\\pi", "\\varkappa": "\\kappa",
    "\\prime": "'",
}
SYNONYMS: dict[str, tuple[str, ...]] = {k: (v,) for k, v in _SYN.items()}
SYNONYMS.update({
    "\\coloneqq": (":", "="), "\\coloneq": (":", "="), "\\eqqcolon": ("=", ":"),
    "\\mathds": ("\\mathbb",), "\\mathbbm": ("\\mathbb",),
})

# unicode characters written straight into Markdown or notebooks
_UNICODE: dict[str, tuple[str, ...]] = {
    "≤": ("\\leq",), "≥": ("\\geq",), "≠": ("\\neq",), "→": ("\\rightarrow",),
    "←": ("\\leftarrow",), "⇒": ("\\Rightarrow",), "⇔": ("\\Leftrightarrow",),
    "↦": ("\\mapsto",),
    "∑": ("\\sum",), "∏": ("\\prod",), "∫": ("\\int",), "∞": ("\\infty",), "×": ("\\times",),
    "·": ("\\cdot",), "⋅": ("\\cdot",), "∈": ("\\in",), "∉": ("\\notin",),
    "⊂": ("\\subset",),
    "⊆": ("\\subseteq",), "∪": ("\\cup",), "∩": ("\\cap",), "∂": ("\\partial",),
    "∇": ("\\nabla",), "≈": ("\\approx",), "±": ("\\pm",), "−": ("-",), "√": ("\\sqrt",),
    "∀": ("\\forall",), "∃": ("\\exists",), "∅": ("\\emptyset",), "…": ("\\dots",),
    "⋯": ("\\dots",), "′": ("'",), "ℓ": ("\\ell",), "∼": ("\\sim",), "≡": ("\\equiv",),
    "∝": ("\\propto",), "⟨": ("\\langle",), "⟩": ("\\rangle",), "∧": ("\\wedge",),
    "∨": ("\\vee",), "¬": ("\\neg",), "∘": ("\\circ",), "⊗": ("\\otimes",),
    "⊕": ("\\oplus",),
}
for _letter, _name in (("ℝ", "R"), ("ℕ", "N"), ("ℤ", "Z"), ("ℚ", "Q"), ("ℂ", "C")):
    _UNICODE[_letter] = ("\\mathbb", "{", _name, "}")


def _greek_unicode() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for case, names in (("SMALL", GREEK_LOWER), ("CAPITAL", GREEK_UPPER)):
        for name in names:
            for spelled in (name.upper(), name.upper().replace("LAMBDA", "LAMDA")):
                try:
                    out[unicodedata.lookup(f"GREEK {case} LETTER {spelled}")] = ("\\" + name,)
                    break
                except KeyError:
                    continue
    for ch, name in (("ϵ", "epsilon"), ("ϑ", "theta"), ("ϕ", "phi"), ("ϱ", "rho"),
                     ("ς", "sigma"), ("ϖ", "pi")):
        out[ch] = ("\\" + name,)
    return out


_UNICODE.update(_greek_unicode())
UNICODE = _UNICODE

# -- formatting ------------------------------------------------------------------------------
SIZERS = frozenset(
    "\\left \\right \\middle \\big \\Big \\bigg \\Bigg \\bigl \\bigr \\bigm \\Bigl \\Bigr \\Bigm "
    "\\biggl \\biggr \\biggm \\Biggl \\Biggr \\Biggm".split())
"""Delimiter sizing: dropped, and a following ``.`` (the empty delimiter) with them."""

DROP = frozenset(
    "\\displaystyle \\textstyle \\scriptstyle \\scriptscriptstyle \\limits \\nolimits \\nonumber "
    "\\notag \\, \\; \\: \\! \\> \\quad \\qquad \\enspace \\thinspace \\medspace \\thickspace "
    "\\negthinspace \\negmedspace \\negthickspace \\hfill \\allowbreak \\nobreak \\mathstrut "
    "\\strut \\relax \\mit \\boldmath \\unboldmath \\displaybreak "
    "\\centering \\protect \\tiny \\scriptsize \\footnotesize \\small \\normalsize \\large "
    "\\Large \\LARGE \\huge \\Huge ~ & $".split()) | {"\\ ", "\\\n", "\\\t"}
"""Formatting without arguments: dropped."""

DROP_ARGS: dict[str, int] = {
    "\\label": 1, "\\tag": 1, "\\hspace": 1, "\\vspace": 1, "\\phantom": 1, "\\hphantom": 1,
    "\\vphantom": 1, "\\color": 1, "\\eqref": 1, "\\ref": 1, "\\cite": 1, "\\citep": 1,
    "\\citet": 1, "\\intertext": 1, "\\shortintertext": 1, "\\mspace": 1, "\\footnote": 1,
    "\\index": 1,
}
"""Commands dropped together with this many arguments."""

KEEP_LAST: dict[str, int] = {"\\textcolor": 2, "\\colorbox": 2, "\\fcolorbox": 3}
"""Commands whose leading arguments are formatting; the last argument is kept as math."""

TRANSPARENT = frozenset(
    "\\mathnormal \\ensuremath \\mathord \\mathbin \\mathrel \\mathpunct \\mathopen \\mathclose "
    "\\mathinner \\smash \\boxed \\displaylimits \\cancel \\bcancel \\xcancel \\llap \\rlap "
    "\\mathllap \\mathrlap \\mathclap".split())
"""Wrappers whose argument is ordinary math: the command goes, the argument stays."""

WORD_WRAPPERS = frozenset(
    "\\text \\textrm \\textit \\textbf \\textsf \\texttt \\textnormal \\textup \\textsc \\emph "
    "\\mathrm \\mathit \\mathsf \\mathtt \\mathup \\operatorname \\mathop \\mbox \\hbox".split())
"""Upright or text wrappers: their content becomes word tokens (letters are not variables)."""

SWITCHES: dict[str, str] = {"\\rm": "\\mathrm", "\\it": "\\mathit", "\\sf": "\\mathsf",
                            "\\tt": "\\mathtt", "\\bf": "\\mathbf", "\\cal": "\\mathcal"}
"""Old-style font switches (``{\\rm acc}``): they act like the wrapper on the rest of the group."""

CONST_FONTS = frozenset("\\mathbb \\mathcal \\mathfrak \\mathscr \\mathbbold".split())
"""Alphabets for fixed objects (number sets, operators): ``\\mathbb{R}`` is one constant token."""

ARITY: dict[str, int] = {
    "\\frac": 2, "\\binom": 2, "\\overset": 2, "\\underset": 2, "\\stackrel": 2,
    "\\sqrt": 1, "\\xrightarrow": 1, "\\xleftarrow": 1, "\\overbrace": 1, "\\underbrace": 1,
    "\\overrightarrow": 1, "\\overleftarrow": 1, "\\hat": 1, "\\check": 1, "\\tilde": 1,
    "\\bar": 1, "\\underline": 1, "\\vec": 1, "\\dot": 1, "\\ddot": 1, "\\dddot": 1,
    "\\acute": 1, "\\grave": 1, "\\breve": 1, "\\mathring": 1, "\\mathbf": 1, "\\pmod": 1,
    "\\substack": 1,
}
"""Commands with mandatory arguments that keep their structure: arguments are always braced."""

OPTIONAL_FIRST = frozenset({"\\sqrt", "\\xrightarrow", "\\xleftarrow"})
"""Commands that may take ``[...]`` before their mandatory arguments."""

FORMAT_ENVS = frozenset(
    "aligned alignedat split gathered multlined equation equation* align align* gather gather* "
    "multline multline* flalign flalign* alignat alignat* eqnarray eqnarray* displaymath math "
    "dmath dmath*".split())
"""Environments that only lay out lines: ``\\begin``/``\\end`` tags dropped."""

ENVS_WITH_SPEC = frozenset({"array", "subarray", "alignedat", "alignat", "alignat*", "tabular"})
"""Environments whose ``\\begin`` takes one more argument (column spec, count): dropped."""

FUNCTION_WORDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth log ln lg exp max min sup "
    "inf lim liminf limsup det dim ker deg gcd hom arg Pr".split())
"""Words that are LaTeX operator names: ``\\mathrm{sin}`` is written as ``\\sin``."""

TRAILING_PUNCT = frozenset({",", ".", ";"})
"""Sentence punctuation at the end of a display formula (or a row of one): dropped."""

ROW_SEP = "\\\\"
