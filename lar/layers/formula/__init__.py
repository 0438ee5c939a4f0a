"""Formulas as normalised LaTeX tokens (seed section 12): finding them in a unit
(``scan``), resolving the unit's macros (``macros``), normalising (``normalize``) and comparing
(``similarity``). Pure functions; the ``formula`` layer (``lar.layers.formula.layer``) stores and
searches what they produce."""
from __future__ import annotations

from lar.layers.formula.macros import Macro, parse_macros
from lar.layers.formula.normalize import Normalised, normalise, normalise_tokens
from lar.layers.formula.tokens import tokenize
from lar.layers.formula.scan import Found, FoundFormula, find_formulas, strip_delimiters

__all__ = ["Found", "FoundFormula", "Macro", "Normalised", "find_formulas", "normalise",
           "normalise_tokens", "parse_macros", "strip_delimiters", "tokenize"]
