"""The results view: one card per hit (``path:lines``, the fused score, the excerpt with the
matched sub-spans highlighted, signal chips with each route's rank and score) and a button that
fetches the hit in place; a second tab holds the results table (fused score, each layer's rank
and score; sortable and filterable, ``lar_magics.results_table``).

When the data changed underneath (a fetch finds the file edited, or ``check()`` finds edited
files or layers that built more), the view says so; ``refresh()`` (the button, or ``check()``
itself) runs the search again and redraws the cards.
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING

from lar.core.errors import LarError, StaleSpanError, require

from lar_magics import render, results_table
from lar_magics.render import unit_text

if TYPE_CHECKING:  # pragma: no cover
    from lar_magics.results import Results

FETCH_CONTEXT = 2
widgets = require("ipywidgets", "notebook")


def fetched_html(f) -> str:
    """A fetched hit: its location, a note when the file changed, and the text with context
    (the hit's own text in bold)."""
    head = f"<b>{html.escape(str(f.path))}</b>:{f.context_lines[0]}-{f.context_lines[1]}"
    text = f.context_text
    i = text.find(f.text) if f.text else -1
    if i >= 0:
        body = (html.escape(text[:i]) + "<b>" + html.escape(f.text) + "</b>"
                + html.escape(text[i + len(f.text):]))
    else:
        body = html.escape(text)
    note = render.note_html([f.note]) if f.note else ""
    return f"{note}<div>{head}</div><div class='lar-excerpt lar-fetched'>{body}</div>"


class HitCard(widgets.VBox):
    """A hit's card plus its fetch button and the fetched text."""

    def __init__(self, view: "ResultsView", rank: int, hit, data: bytes | None):
        self.view, self.hit, self.rank = view, hit, rank
        self.fetched = None
        self.card = widgets.HTML(render.card_html(rank, hit, data,
                                                  getattr(view.results.result, "score_scale", "")))
        self.button = widgets.Button(description="fetch", tooltip=f"fetch {hit.id} with "
                                     f"{FETCH_CONTEXT} lines of context",
                                     layout=widgets.Layout(width="90px"))
        self.button.on_click(lambda _b: self.fetch())
        self.text = widgets.HTML("")
        super().__init__([self.card, self.button, self.text])
        self.add_class("lar-hitcard")

    def fetch(self):
        """Fetch the hit (``engine.fetch(id, context=2)``) and show its text under the card."""
        try:
            f = self.view.results.fetch(self.hit.id, context=FETCH_CONTEXT)
        except StaleSpanError as exc:
            self.text.value = render.note_html([str(exc)])
            self.view.mark_stale([f"{self.hit.path}: the hit's text is gone from the file"])
            return None
        except LarError as exc:
            self.text.value = render.note_html([str(exc)])
            return None
        self.fetched = f
        self.text.value = fetched_html(f)
        if f.changed:
            self.view.mark_stale([f"{f.path} changed since this search"])
        return f


class ResultsView(widgets.VBox):
    """Live view of a ``Results``: cards, fetch in place, change detection and refresh."""

    def __init__(self, results: Results, *, auto_refresh: bool = True):
        self.results = results
        self.auto_refresh = auto_refresh
        self.notes: list[str] = []
        self.header = widgets.HTML()
        self.notice = widgets.HTML()
        self.check_button = widgets.Button(description="check for changes",
                                           tooltip="were files edited or layers built since?")
        self.refresh_button = widgets.Button(description="refresh", tooltip="search again")
        self.check_button.on_click(lambda _b: self.check())
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.cards_box = widgets.VBox()
        self.table_box = widgets.VBox()
        self.tabs = widgets.Tab([self.cards_box, self.table_box])
        self.tabs.titles = ("hits", "table")
        self.runs = widgets.HTML()
        super().__init__([widgets.HTML(render.CSS), self.header,
                          widgets.HBox([self.check_button, self.refresh_button]), self.notice,
                          self.tabs, self.runs])
        self.add_class("lar-results")
        self.render()

    @property
    def cards(self) -> list[HitCard]:
        return list(self.cards_box.children)

    def render(self) -> None:
        r = self.results.result
        texts: dict[str, bytes | None] = {}
        cards = []
        for i, h in enumerate(r.hits, 1):
            if h.hash not in texts:
                texts[h.hash] = unit_text(self.results.engine, h)
            cards.append(HitCard(self, i, h, texts[h.hash]))
        self.header.value = render.header_html(r)
        self.cards_box.children = cards
        self.table_box.children = [self._table()]
        self.runs.value = "<details><summary>layers</summary>" + render.runs_html(r.runs) + "</details>"

    def _table(self):
        """The sortable, filterable grid; the static table where itables is missing."""
        try:
            return results_table.results_grid(self.results.result)
        except LarError as exc:  # MissingExtraError: the notebook extra is not complete
            return widgets.HTML(render.note_html([str(exc)])
                                + results_table.table_html(self.results.result))

    def _repr_html_(self) -> str:  # where widgets are not live: the same cards, static
        return self.results._repr_html_()

    def mark_stale(self, notes: list[str]) -> None:
        """Say that the data changed underneath; the refresh button runs the search again."""
        self.notes = list(dict.fromkeys(self.notes + list(notes)))
        self.notice.value = render.note_html(self.notes + ["these results are out of date: "
                                                           "press refresh to search again"])
        self.refresh_button.button_style = "warning"

    def check(self) -> list[str]:
        """What changed since the search (``Results.changes``); with ``auto_refresh`` the view
        then searches again and says why. Returns the notes (empty: nothing changed)."""
        notes = self.results.changes()
        if not notes:
            self.notice.value = "<div style='color:#555'>nothing changed since this search</div>"
            return notes
        if self.auto_refresh:
            self.refresh()
            self.notice.value = render.note_html([f"refreshed: {n}" for n in notes])
        else:
            self.mark_stale(notes)
        return notes

    def refresh(self) -> Results:
        """Run the search again and redraw."""
        from lar_magics.session import SESSION

        was_last = SESSION.last is self.results
        self.results = self.results.rerun()
        if was_last:
            SESSION.last = self.results
        self.notes = []
        self.notice.value = ""
        self.refresh_button.button_style = ""
        self.render()
        return self.results


def results_view(results: Results, **kw) -> ResultsView:
    return ResultsView(results, **kw)


__all__ = ["FETCH_CONTEXT", "HitCard", "ResultsView", "fetched_html", "results_view"]
