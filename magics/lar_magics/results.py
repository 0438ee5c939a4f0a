"""The rich object ``%lar search`` returns: a ``lar.Result`` with its engine and search flags.

``Results`` renders as the results view: live ipywidgets inside a kernel, static HTML cards
everywhere else (``_repr_html_``); ``.to_polars()`` adds one ``rank_<layer>`` column per route
to the result's table; ``.fetch(i)`` / ``.rerun()`` / ``.changes()`` / ``.widget()`` /
``.explain(i)`` work on it. ``ResultsList`` holds the results of a ``%%lar`` cell with several
queries.
"""
from __future__ import annotations

from typing import Any, Iterator

from lar.core.errors import HitNotFoundError, LarError
from lar.core.result import Fetched, Result
from lar.core.types import RunState

from lar_magics import render
from lar_magics.render import unit_text
from lar_magics.errors import MagicError
from lar_magics.session import SESSION, as_magic, unrecorded

SEARCH_KEYS = ("timebox", "k", "emphasis", "layers", "exclude", "scope", "fusion", "rrf_c",
               "strict", "tokens")


def widgets_live() -> bool:
    """True inside a Jupyter kernel (a frontend may render widgets) unless switched off with
    ``lar_magics.SESSION.live_widgets = False``."""
    if not getattr(SESSION, "live_widgets", True):
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook extra
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


class Results:
    """One search: ``.result`` (``lar.Result``), ``.engine``, ``.params`` (its search flags)."""

    def __init__(self, engine, result: Result, params: dict[str, Any] | None = None):
        self.engine = engine
        self.result = result
        self.params = {k: v for k, v in (params or {}).items() if k in SEARCH_KEYS}

    # -- the result ----------------------------------------------------------------------------
    @property
    def query(self) -> Any:
        return self.result.query

    @property
    def hits(self):
        return self.result.hits

    @property
    def runs(self):
        return self.result.runs

    def __len__(self) -> int:
        return len(self.result.hits)

    def __iter__(self) -> Iterator:
        return iter(self.result.hits)

    def __getitem__(self, ref: int | str):
        return self.hit(ref)

    def hit(self, ref: int | str):
        """A hit by position (0-based) or id."""
        hits = self.result.hits
        if isinstance(ref, int) and not isinstance(ref, bool):
            if -len(hits) <= ref < len(hits):
                return hits[ref]
            raise HitNotFoundError(f"this result has {len(hits)} hits; there is no hit {ref}")
        for h in hits:
            if h.id == ref:
                return h
        raise HitNotFoundError(f"no hit {ref!r} in this result; ids: "
                               f"{', '.join(h.id for h in hits[:5])}{' ...' if len(hits) > 5 else ''}")

    def route_names(self) -> list[str]:
        """Layers that found at least one of the hits, in the order of the call's runs."""
        found = {n for h in self.result.hits for n in h.signals}
        return [r.name for r in self.result.runs if r.name in found]

    def to_polars(self):
        """``Result.to_polars()`` plus ``rank_<layer>``: each route's rank for the hit (null
        where that route did not find it)."""
        import polars as pl

        df = self.result.to_polars()
        cols = [pl.Series(f"rank_{n}", [h.evidence[n].rank if n in h.evidence else None
                                        for h in self.result.hits], dtype=pl.Int64)
                for n in self.route_names()]
        return df.with_columns(cols) if cols else df

    def runs_to_polars(self):
        return self.result.runs_to_polars()

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        return self.result.to_dict(full=full)

    def to_json(self, *, full: bool = False, indent: int | None = None) -> str:
        return self.result.to_json(full=full, indent=indent)

    # -- acting on it --------------------------------------------------------------------------
    def fetch(self, ref: int | str, context: int = 2) -> Fetched:
        """The hit's full text with ``context`` lines (``engine.fetch``)."""
        hit_id = self.hit(ref).id if not isinstance(ref, str) else ref
        with as_magic(self.engine):
            return self.engine.fetch(hit_id, context=context)

    def rerun(self) -> "Results":
        """The same search again, on the current files and indexes."""
        with as_magic(self.engine):
            res = self.engine.search(self.result.query, **self.params)
        return Results(self.engine, res, self.params)

    def changes(self) -> list[str]:
        """What changed underneath this result: edited or removed files of its hits, layers
        that built more (or were rebuilt) since the call. Empty when nothing did."""
        notes: list[str] = []
        eng = self.engine
        seen: set[tuple[str, str]] = set()
        with unrecorded():
            for h in self.result.hits:
                for path in h.paths[:1]:
                    if (path, h.hash) in seen:
                        continue
                    seen.add((path, h.hash))
                    try:
                        now = eng.read_bytes(path, raw=True)
                    except (LarError, OSError):
                        notes.append(f"{path} was removed since this search")
                        continue
                    try:
                        then = eng.read_bytes(h.hash, raw=True)
                    except (LarError, OSError):
                        then = None
                    if then != now:
                        notes.append(f"{path} changed since this search")
            try:
                status = {l.name: l for l in eng.status().layers}
            except LarError:
                status = {}
            for r in self.result.runs:
                cur = status.get(r.name)
                if cur is None or r.coverage is None or r.state not in (RunState.RAN, RunState.ABORTED):
                    continue
                if cur.coverage > r.coverage + 0.005:
                    notes.append(f"layer {r.name} has built more since this search (coverage "
                                 f"{r.coverage:.0%} -> {cur.coverage:.0%})")
                elif cur.coverage < r.coverage - 0.005:
                    notes.append(f"layer {r.name} was reset or is being rebuilt (coverage "
                                 f"{r.coverage:.0%} -> {cur.coverage:.0%})")
        return notes

    def widget(self):
        """The interactive results view (ipywidgets)."""
        from lar_magics.results_view import ResultsView

        return ResultsView(self)

    def explain(self, ref: int | str):
        """The explain view of a late-interaction hit (``lar_magics.explain_view``)."""
        from lar_magics.views import explain

        return explain(self.engine, self, self.hit(ref).id if not isinstance(ref, str) else ref)

    # -- display -------------------------------------------------------------------------------
    def cards_html(self) -> str:
        texts: dict[str, bytes | None] = {}
        cards = []
        for i, h in enumerate(self.result.hits, 1):
            if h.hash not in texts:
                texts[h.hash] = unit_text(self.engine, h)
            cards.append(render.card_html(i, h, texts[h.hash], self.result.score_scale))
        return "".join(cards)

    def _repr_html_(self) -> str:
        r = self.result
        from lar_magics.results_table import table_html

        return (render.CSS + "<div class='lar-results'>" + render.header_html(r) + self.cards_html()
                + "<details><summary>table</summary>" + table_html(r) + "</details>"
                + "<details><summary>layers</summary>" + render.runs_html(r.runs)
                + "</details></div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self._repr_html_()}
        if widgets_live():
            try:
                live = self.widget()._repr_mimebundle_()
            except Exception:  # noqa: BLE001 - the static HTML is always there
                live = {}
            bundle.update({k: v for k, v in (live or {}).items() if k != "text/plain"})
        return bundle

    def __repr__(self) -> str:
        return str(self.result)


class Shown:
    """A lar object (``Status``, ``Fetched``) as a magic shows it: its readable text as the
    plain repr, its HTML (for a status: coverage bars first); attributes pass through."""

    def __init__(self, obj: Any):
        self.obj = obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self.obj, name)

    def __repr__(self) -> str:
        return str(self.obj)

    def _repr_html_(self) -> str:
        html = self.obj._repr_html_()
        if hasattr(self.obj, "layers") and hasattr(self.obj, "skipped"):  # a lar.Status
            html = (render.CSS + render.coverage_html(self.obj)
                    + f"<details><summary>all columns</summary>{html}</details>")
        return html


class ResultsList(list):
    """The results of several queries (one ``%%lar`` cell, one query per line)."""

    def to_polars(self):
        import polars as pl

        frames = [r.to_polars().with_columns(pl.lit(str(r.query)).alias("query")) for r in self]
        if not frames:
            return pl.DataFrame()
        df = pl.concat(frames, how="diagonal_relaxed")
        return df.select(["query", *[c for c in df.columns if c != "query"]])

    def _repr_html_(self) -> str:
        return "".join(r._repr_html_() for r in self)

    def __repr__(self) -> str:
        return "\n\n".join(f"query {r.query!r}:\n{r!r}" for r in self)


def search(engine, query: Any, **params: Any) -> Results:
    """``engine.search`` recorded as a magic call, wrapped in ``Results``."""
    if not isinstance(query, (str, dict)):
        raise MagicError(f"a query is text or a mapping {{layer: query}}, got {type(query).__name__}")
    with as_magic(engine):
        res = engine.search(query, **params)
    return Results(engine, res, params)


__all__ = ["Results", "ResultsList", "Shown", "SEARCH_KEYS", "search", "unit_text", "widgets_live"]
