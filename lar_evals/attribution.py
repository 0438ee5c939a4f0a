"""Why a relevant document was missed: one reason per missed (query, document) pair.

A pair is *missed* when the document is not among the documents of the default search's first
``k`` hits (``k = 10`` by default). Its reason is the first of these that holds:

1. ``not_in_index``: the document's file is not a live unit of the file index (skipped as
   binary or too large, or absent); the detail gives the scanner's reason;
2. ``extraction_empty``: the unit's text (``eng.reader.document(hash, path)``) is empty, or its
   extraction was skipped;
3. ``excluded_by_scope``: a scope was given and the file does not match it;
4. ``layer_coverage``: no selected route covers the unit: no always-current generate layer was
   selected and no selected building layer has it built (``layer.built()[hash] == "ok"``);
5. ``below_candidate_window``: no route returned the document at all (in its whole candidate
   list, ``pool = max(20, 5 k_run)`` hits);
6. ``ranked_below_k``: some route had it, but the default search did not rank it within ``k``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from lar.core.errors import LarError
from lar.core.scope import Scope

if TYPE_CHECKING:  # pragma: no cover
    from lar_evals.evaluation import BeirEvaluation

REASONS: tuple[str, ...] = ("not_in_index", "extraction_empty", "excluded_by_scope", "layer_coverage",
                            "below_candidate_window", "ranked_below_k")
MAX_EXAMPLES = 20


def _rank(docs: Sequence[str], doc: str) -> int | None:
    try:
        return docs.index(doc) + 1
    except ValueError:
        return None


class _Context:
    """What the checks read from the engine, loaded once per attribution."""

    def __init__(self, eng, routes: Sequence[str], scope: Any):
        self.eng = eng
        self.routes = list(routes)
        self.live = {r.path: r for r in eng.index.live()}
        self.skipped = {path: (reason, size) for path, reason, size in eng.index.skipped()}
        self.scope = Scope.parse(scope) if scope is not None else None
        self.always = [r for r in routes if getattr(eng.layers[r], "always_current", True)
                       and "generate" in eng.layers[r].roles]
        self.built = {r: eng.layers[r].built() for r in routes
                      if not getattr(eng.layers[r], "always_current", True)}
        self._empty: dict[str, str | None] = {}

    def extraction_problem(self, h: str, path: str) -> str | None:
        if h not in self._empty:
            try:
                doc = self.eng.reader.document(h, path)
                if doc.skipped:
                    why = f"extraction skipped: {doc.skipped}"
                elif not doc.text.strip():
                    why = "the unit's text is empty"
                else:
                    why = None
            except (LarError, OSError) as exc:
                why = f"cannot read the unit: {exc}"
            self._empty[h] = why
        return self._empty[h]


def reason_for(ctx: _Context, ev: "BeirEvaluation", qid: str, doc: str,
               path: str | None) -> tuple[str, dict[str, Any]]:
    """The first reason that holds for one missed pair, with its detail."""
    rec = ctx.live.get(path) if path is not None else None
    if rec is None:
        if path is None:
            return "not_in_index", {"why": "the document was not written to the corpus folder"}
        why, size = ctx.skipped.get(path, ("absent from the file index", None))
        return "not_in_index", {"path": path, "why": why, "size": size}
    problem = ctx.extraction_problem(rec.hash, path)
    if problem:
        return "extraction_empty", {"path": path, "why": problem}
    if ctx.scope is not None and not ctx.scope.is_everything and not ctx.scope.matches(path, rec.hash):
        return "excluded_by_scope", {"path": path, "scope": ctx.scope.to_dict()}
    if not ctx.always and not any(b.get(rec.hash) == "ok" for b in ctx.built.values()):
        states = {r: b.get(rec.hash, "not built") for r, b in ctx.built.items()}
        return "layer_coverage", {"path": path, "build_states": states}
    ranks = {r: _rank(ev.pools.get(r, {}).get(qid, []), doc) for r in ctx.routes}
    ranks = {r: n for r, n in ranks.items() if n is not None}
    if not ranks:
        return "below_candidate_window", {"path": path}
    default_rank = _rank(ev.rankings.get("default", {}).get(qid, []), doc)
    return "ranked_below_k", {"path": path, "route_ranks": ranks, "default_rank": default_rank}


def attribute(eng, ev: "BeirEvaluation", routes: Sequence[str], *, k: int = 10, scope: Any = None,
              max_examples: int = MAX_EXAMPLES) -> dict[str, Any]:
    """Counts per reason over every missed relevant pair, plus up to ``max_examples`` examples
    (spread over the reasons) with ``qid``, ``docid``, ``reason`` and ``detail``."""
    ctx = _Context(eng, routes, scope)
    doc_to_path = {d: p for p, d in ev.path_to_doc.items()}
    counts = {r: 0 for r in REASONS}
    examples: dict[str, list[dict[str, Any]]] = {r: [] for r in REASONS}
    pairs = missed = 0
    for qid in ev.qids:
        top = set(ev.top.get("default", {}).get(qid, ()))
        for doc in ev.qrels.get(qid, {}):
            pairs += 1
            if doc in top:
                continue
            missed += 1
            reason, detail = reason_for(ctx, ev, qid, doc, doc_to_path.get(doc))
            counts[reason] += 1
            if len(examples[reason]) < max_examples:
                examples[reason].append({"qid": qid, "docid": doc, "reason": reason, "detail": detail})
    picked: list[dict[str, Any]] = []
    while len(picked) < max_examples and any(examples.values()):
        for r in REASONS:  # round robin, so that every reason shows up
            if examples[r] and len(picked) < max_examples:
                picked.append(examples[r].pop(0))
    return {"k": k, "relevant_pairs": pairs, "missed": missed, "counts": counts, "examples": picked}


__all__ = ["MAX_EXAMPLES", "REASONS", "attribute", "reason_for"]
