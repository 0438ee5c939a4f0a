"""The explain view of a late-interaction hit: why did MaxSim rank this chunk here?

``explain_data(engine, result_or_query, hit_id)`` recomputes, with the late layer's own encoder and
its stored token vectors (the layer's objects: nothing is loaded twice), the similarity matrix of
the query tokens x the document tokens of the hit's best chunk. Row ``i``'s maximum is query token
``i``'s ``sim`` in the hit's ``evidence[late].details``; ``weight x sim`` is its contribution and
the contributions sum to the hit's score. ``explain_view(engine, result, hit_id)`` shows it: a
heatmap, contribution bars (altair), the localised span with the matched tokens highlighted, and
one slider per query token (weight 0..3) that re-runs the late search (debounced).

When the data changed underneath the view (the file was edited, the layer re-encoded the unit),
``check()`` says so and ``refresh()`` catches the layer up, re-runs the query and explains anew.
"""
from __future__ import annotations

import hashlib
import html
import threading
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from lar.core.errors import HitNotFoundError, LarError, StaleSpanError, require
from lar.layers.late.explain import localise, token_matches
from lar.layers.late.query import LateQuery, parse_late_query, token_weights
from lar.core.result import Result

__all__ = ["ExplainError", "NoLateEvidenceError", "ExplainData", "explain_data", "rerun",
           "ExplainView", "explain_view", "late_evidence", "heatmap_html", "span_html",
           "contribution_chart"]

DEBOUNCE_S = 0.35
esc = html.escape


class ExplainError(LarError):
    """The explain view could not explain this hit; the message says what to do."""


class NoLateEvidenceError(ExplainError):
    """The hit has no late-interaction evidence (no ``late`` signal)."""


def late_evidence(engine, hit) -> tuple[str, Any]:
    """(layer name, Evidence) of the hit's late-interaction signal (``late`` or a variant)."""
    for name in hit.signals:
        ev = hit.evidence[name]
        if {"tokens", "chunk"} <= set(ev.details or {}) and hasattr(engine.layers.get(name),
                                                                   "encode_query"):
            return name, ev
    raise NoLateEvidenceError(
        f"hit {hit.id} was found by {', '.join(hit.signals)} and carries no late-interaction "
        "evidence: explain a hit whose signals include 'late' (search with layers=['late'] or "
        "query {'late': 'text'})")


@dataclass(frozen=True, eq=False)
class ExplainData:
    """Everything the view shows, as numbers (tests read these, nothing is rendered)."""

    hit_id: str
    path: str | None
    hash: str
    layer: str
    query: str
    query_tokens: tuple[str, ...]
    weights: np.ndarray  # (nq,) float32, the weights the scores use
    chunk: tuple[int, int]  # byte span of the best chunk in the unit text
    doc_tokens: tuple[str, ...]
    doc_spans: np.ndarray  # (nd, 2) byte spans of the chunk's tokens in the unit text
    sim: np.ndarray  # (nq, nd) cosine of each query token with each document token
    span: tuple[int, int]  # the localised span (what the hit points at)
    hit_score: float | None  # the score the layer reported (None: not in the re-run's top k)
    rank: int | None  # the chunk's rank among the late hits (None: not in the top k)
    text: bytes  # the unit text
    fingerprint: str  # of the chunk's stored vectors and the layer version: detects rebuilds

    @property
    def argmax(self) -> np.ndarray:
        return self.sim.argmax(axis=1)

    @property
    def row_max(self) -> np.ndarray:
        return self.sim[np.arange(self.sim.shape[0]), self.argmax]

    @property
    def contributions(self) -> np.ndarray:
        return self.weights * self.row_max

    @property
    def score(self) -> float:
        return float(self.contributions.sum())

    @property
    def span_text(self) -> str:
        return self.text[self.span[0]:self.span[1]].decode("utf-8", errors="replace")

    def matches(self):
        """``lar.layers.late.explain.TokenMatch`` per query token (what the layer reports)."""
        return token_matches(self.query_tokens, self.weights, self.contributions, self.argmax,
                             self.row_max, 0, self.doc_spans, self.text)

    def tokens_table(self) -> list[dict[str, Any]]:
        """One row per query token: i, q, w, contrib, sim, match, span (as in the details)."""
        return [{"i": i, **m.to_dict()} for i, m in enumerate(self.matches())]

    def to_polars(self):
        pl = require("polars", "notebook")
        return pl.DataFrame(self.tokens_table()).select("i", "q", "w", "sim", "contrib", "match",
                                                        "span")

    def with_weights(self, weights: Sequence[float]) -> "ExplainData":
        """The same chunk scored under other weights (the similarities do not change)."""
        w = np.asarray(weights, dtype=np.float32)
        if w.shape != self.weights.shape:
            raise ExplainError(f"{len(w)} weights for {len(self.query_tokens)} query tokens")
        out = replace(self, weights=w, hit_score=None, rank=None)
        return replace(out, span=localise(self.text, self.chunk, out.matches()))


def search_late(engine, layer: str, text: str, weights=None, *, timebox: float = 5.0,
                k: int = 10) -> Result:
    """The late layer alone, ``weights`` one per query token (the list form of lar.layers.late.query)."""
    q: dict[str, Any] = {"text": text}
    if weights is not None:
        q["weights"] = [float(x) for x in weights]
    return engine.search({layer: q}, layers=[layer], timebox=timebox, k=k)


def explain_data(engine, result_or_query: Result | str | Mapping, hit_id: str | None = None, *,
                 layer: str = "late", timebox: float = 5.0, k: int = 10) -> ExplainData:
    """Explain ``hit_id`` of a result (or of a late search for a query; None: its top hit) with
    the late layer's encoder and stored token vectors."""
    result = getattr(result_or_query, "result", result_or_query)  # lar_magics.Results too
    if not isinstance(result, Result):
        if layer not in engine.layers:
            raise ExplainError(f"the engine has no layer {layer!r}; layers: {', '.join(engine.layers)}")
        lq = parse_late_query(result, layer)
        weights = None
        if lq.weights is not None:
            qe, _ = engine.layers[layer].encode_query(lq.text)
            weights = token_weights(lq, qe.token_texts, qe.token_spans, layer)
        result = search_late(engine, layer, lq.text, weights, timebox=timebox, k=k)
    if not result.hits:
        from lar_magics.readiness import empty_reason

        raise ExplainError(f"the search for {result.query!r} found nothing to explain: "
                           f"{empty_reason(engine, result, layer)}")
    hit = result.hits[0] if hit_id is None else next((h for h in result.hits if h.id == hit_id), None)
    if hit is None:
        raise HitNotFoundError(f"hit {hit_id!r} is not in this result; its hits are "
                               f"{', '.join(h.id for h in result.hits[:10])}")
    name, ev = late_evidence(engine, hit)
    lq, lyr = parse_late_query(ev.query, name), engine.layers[name]
    qe, q = lyr.encode_query(lq.text)  # the layer's cached query encoding
    w = token_weights(lq, qe.token_texts, qe.token_spans, name)
    text, spans, x, fp = _chunk_vectors(lyr, hit.hash, hit.path, tuple(ev.details["chunk"]))
    data = ExplainData(hit_id=hit.id, path=hit.path, hash=hit.hash, layer=name, query=lq.text,
                       query_tokens=tuple(qe.token_texts), weights=np.asarray(w, np.float32),
                       chunk=tuple(ev.details["chunk"]), doc_spans=spans,
                       doc_tokens=tuple(text[s:e].decode("utf-8", errors="replace")
                                        for s, e in spans),
                       sim=np.ascontiguousarray((x @ q.T).T),  # the products the layer maxed over
                       span=(hit.span.start, hit.span.end), hit_score=float(ev.score),
                       rank=int(ev.rank), text=text, fingerprint=fp)
    if lyr.options.get("localise", True):
        data = replace(data, span=localise(text, data.chunk, data.matches()))
    return data


def _chunk_vectors(lyr, h: str, path: str | None, chunk: tuple[int, int]):
    """(unit text, token spans, float32 token rows, fingerprint) of the stored chunk."""
    try:
        enc = lyr.load(h)
        text = lyr.ctx.reader.unit_text(h, path)
    except (LookupError, OSError, HitNotFoundError, StaleSpanError) as exc:
        raise ExplainError(f"the stored vectors or text of {path or h[:12]} are gone ({exc}); "
                           "re-run the search (view.refresh())") from None
    found = [c for c in range(enc.n_chunks) if int(enc.chunk_spans[c][0]) == chunk[0]
             and min(int(enc.chunk_spans[c][1]), len(text)) == chunk[1]]
    if not found:
        raise ExplainError(f"no stored chunk spans bytes {chunk[0]}-{chunk[1]}: the late layer "
                           "re-encoded this unit since the search; refresh (view.refresh())")
    a, b = enc.chunk_rows(found[0])
    # float16 -> float32 is exact: the same numbers the layer scored
    x = enc.tokens_f32(a, b) if enc.token_scales is not None else \
        np.asarray(enc.tokens[a:b], dtype=np.float32)
    spans = np.asarray(enc.token_spans[a:b], dtype=np.int64)
    fp = hashlib.blake2b(np.ascontiguousarray(enc.tokens[a:b]).tobytes() + spans.tobytes()
                         + lyr.build_version.encode(), digest_size=8).hexdigest()
    return text, spans, x, fp


def rerun(engine, data: ExplainData, weights: Sequence[float], *, timebox: float = 5.0,
          k: int = 10) -> tuple[Result, ExplainData]:
    """Re-run the late search with per-token ``weights``; explain the same chunk again (its new
    rank and score; rank None when it left the top ``k``)."""
    res = search_late(engine, data.layer, data.query, weights, timebox=timebox, k=k)
    for h in res.hits:
        ev = h.evidence.get(data.layer)
        if ev is not None and h.hash == data.hash and tuple(ev.details.get("chunk", ())) == data.chunk:
            return res, replace(data.with_weights(weights), hit_id=h.id, hit_score=float(ev.score),
                                rank=int(ev.rank), span=(h.span.start, h.span.end))
    return res, data.with_weights(weights)


from lar_magics.explain_render import (MAX_WEIGHT, chart_svg, contribution_chart,  # noqa: E402,F401
                             heatmap_html, span_html)


def _note(text: str, color: str = "#b00") -> str:
    return f"<div class='lar-stale' style='color:{color};padding:2px'>{text}</div>"


# -- the widget ------------------------------------------------------------------------------
class ExplainView(require("ipywidgets", "notebook").VBox):
    """The explain widget; ``set_weights`` / ``check`` / ``refresh`` drive it from code."""

    def __init__(self, engine, data: ExplainData, *, timebox: float = 5.0, k: int = 10,
                 debounce: float = DEBOUNCE_S):
        w = require("ipywidgets", "notebook")
        super().__init__()
        self.engine, self.data, self.original = engine, data, data
        self.timebox, self.k, self.debounce = timebox, k, debounce
        self.result: Result | None = None
        self._timer: threading.Timer | None = None
        self._muted, self._lock = False, threading.RLock()
        self.notice, self.header, self.heat, self.bars, self.span, self.ranking = (
            w.HTML() for _ in range(6))
        self.bars_out = w.Output()
        self.sliders = [w.FloatSlider(value=float(data.weights[i]), min=0.0, max=MAX_WEIGHT,
                                      step=0.05, description=f"{i:02d} {t}", readout_format=".2f",
                                      layout=w.Layout(width="340px"),
                                      style={"description_width": "110px"})
                        for i, t in enumerate(data.query_tokens)]
        for s in self.sliders:
            s.observe(self._on_slider, names="value")
        reset, refresh = w.Button(description="reset weights"), w.Button(description="refresh")
        reset.on_click(lambda _: self.set_weights([float(x) for x in self.original.weights]))
        refresh.on_click(lambda _: self.refresh())
        self.children = [
            self.notice, self.header,
            w.HTML("<b>query-token weights</b> (0 drops a token, &gt;1 boosts it; moving a "
                   "slider re-runs the late search)"),
            w.GridBox(self.sliders, layout=w.Layout(grid_template_columns="repeat(2, 360px)")),
            w.HBox([reset, refresh]), self.ranking,
            w.HTML("<b>similarity: query tokens x document tokens of the best chunk</b> "
                   "(outlined: each query token's best match)"), self.heat,
            w.HBox([self.bars, self.bars_out]),
            w.HTML("<b>the chunk</b> (yellow: the localised span; red: matched tokens)"), self.span]
        self.add_class("lar-explain")
        self.render()

    def weights(self) -> list[float]:
        return [float(s.value) for s in self.sliders]

    def render(self) -> None:
        d = self.data
        rank = f"not in the top {self.k}" if d.rank is None else f"rank {d.rank}"
        self.header.value = (
            f"<div><b>{esc(str(d.path))}</b> <code>{esc(d.hit_id)}</code> ({d.layer}, {rank}) "
            f"&mdash; query <code>{esc(d.query)}</code><br>score {d.score:.4f} = sum over "
            f"{len(d.query_tokens)} query tokens of weight x best cosine over {len(d.doc_tokens)} "
            f"chunk tokens (bytes {d.chunk[0]}-{d.chunk[1]}); localised span bytes "
            f"{d.span[0]}-{d.span[1]}</div>")
        self.heat.value, self.span.value = heatmap_html(d), span_html(d)
        chart = contribution_chart(d)
        svg = chart_svg(chart)
        self.bars.value = svg or ""
        self.bars_out.clear_output()
        if svg is None:  # no vl-convert: let the frontend render the chart
            with self.bars_out:
                from IPython.display import display

                display(chart)
        if self.result is not None:
            rows = "".join(
                f"<tr><td>{i}</td><td>{esc(str(h.path))}</td><td>{esc(h.excerpt[:90])}</td>"
                f"<td>{h.evidence[d.layer].score:.3f}</td></tr>"
                for i, h in enumerate(self.result.hits, 1) if d.layer in h.evidence)
            self.ranking.value = ("<details open><summary>re-run ranking</summary><table "
                                  "style='font-size:12px'><tr><th>#</th><th>path</th><th>excerpt"
                                  f"</th><th>score</th></tr>{rows}</table></details>")

    def _on_slider(self, change) -> None:
        if self._muted:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.debounce, self._apply_safely, (self.weights(),))
        self._timer.daemon = True
        self._timer.start()

    def _apply_safely(self, weights) -> None:
        try:
            self.apply(weights)
        except Exception as exc:  # a timer thread: show the problem rather than lose it
            self.notice.value = _note(esc(str(exc)))

    def _resolve(self, weights) -> list[float]:
        d, cur = self.data, np.array(self.weights(), dtype=np.float32)
        if not isinstance(weights, Mapping):
            cur = np.asarray([float(x) for x in weights], dtype=np.float32)
            if cur.shape[0] != len(self.sliders):
                raise ExplainError(f"{cur.shape[0]} weights for {len(self.sliders)} query tokens")
            return cur.tolist()
        for key, val in weights.items():
            val = parse_late_query({"text": d.query, "weights": [val]}, d.layer).weights[0]
            if isinstance(key, int):
                if not 0 <= key < len(cur):
                    raise ExplainError(f"query token index {key} is out of 0..{len(cur) - 1}")
                cur[key] = val
            else:  # a word of the query or a token, read as lar.layers.late.query reads weight keys
                qe, _ = self.engine.layers[d.layer].encode_query(d.query)
                probe = LateQuery(d.query, {str(key): MAX_WEIGHT + 1})
                cur[token_weights(probe, qe.token_texts, qe.token_spans, d.layer) > MAX_WEIGHT] = val
        return cur.tolist()

    def set_weights(self, weights: Mapping[str | int, float] | Sequence[float]) -> ExplainData:
        """Set query-token weights ({word, token or index: w}, or one per token) and re-run now."""
        w = self._resolve(weights)
        self._muted = True
        try:
            for s, v in zip(self.sliders, w):
                s.value = v
        finally:
            self._muted = False
        return self.apply(w)

    def apply(self, weights: Sequence[float]) -> ExplainData:
        """Re-run with ``weights`` (one per query token); refresh first if the data changed."""
        with self._lock:
            reason = self.check()
            if reason:
                return self.refresh(reason)
            if not any(x > 0 for x in weights):
                self.notice.value = _note("every query token has weight 0: raise at least one slider")
                return self.data
            self.result, self.data = rerun(self.engine, self.data, weights, timebox=self.timebox,
                                           k=self.k)
            self.notice.value = ""
            self.render()
            return self.data

    def check(self) -> str | None:
        """Why the view's data no longer holds (file edited, layer re-encoded), or None."""
        d = self.data
        try:
            f = self.engine.fetch(d.hit_id)
        except (StaleSpanError, HitNotFoundError) as exc:
            return f"{d.path} changed since this hit ({exc})"
        if f.changed:
            return f"{d.path} was edited since this hit"
        lyr = self.engine.layers.get(d.layer)
        if lyr is None or lyr.built().get(d.hash) != "ok":
            return f"the {d.layer} layer has no current vectors for {d.path} (rebuilt or dropped)"
        try:
            fp = _chunk_vectors(lyr, d.hash, d.path, d.chunk)[3]
        except ExplainError as exc:
            return str(exc)
        return None if fp == d.fingerprint else f"the {d.layer} layer re-encoded {d.path}"

    def refresh(self, reason: str | None = None) -> ExplainData:
        """Catch the layer up, re-run the query with the current weights and explain the best
        late hit of the same file (else the top hit)."""
        with self._lock:
            d = self.data
            self.engine.build(timebox=120, layers=[d.layer])
            res = search_late(self.engine, d.layer, d.query, self.weights(),
                              timebox=self.timebox, k=self.k)
            if not res.hits:
                self.notice.value = _note("after the refresh the late search finds nothing")
                return d
            pick = next((h for h in res.hits if h.path == d.path), res.hits[0])
            self.result, self.data = res, explain_data(self.engine, res, pick.id)
            why = f"data changed underneath this view: {esc(reason)}; " if reason else ""
            self.notice.value = _note(f"{why}refreshed, now explaining {esc(pick.id)}", "#7a5b00")
            self.render()
            return self.data


def explain_view(engine, result: Result | str | Mapping, hit_id: str | None = None, *,
                 timebox: float = 5.0, k: int = 10, layer: str = "late"):
    """The explain widget for ``hit_id`` of ``result`` (or of a late search for a query). A hit
    without late evidence gets a widget that says so."""
    try:
        data = explain_data(engine, result, hit_id, layer=layer, timebox=timebox, k=k)
    except NoLateEvidenceError as exc:
        w = require("ipywidgets", "notebook")
        box = w.VBox([w.HTML("<div class='lar-explain-none' style='padding:6px;background:#f3f3f3'>"
                             f"no late-interaction evidence: {esc(str(exc))}</div>")])
        box.add_class("lar-explain")
        return box
    return ExplainView(engine, data, timebox=timebox, k=k)
