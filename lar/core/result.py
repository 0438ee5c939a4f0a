"""What calls return: Result (search), Status, Fetched, InventoryItem. Each is frozen, renders
as HTML in Jupyter (``_repr_html_``), converts to polars (``to_polars``) and to stable JSON
(``to_dict``; schema in README)."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from lar.core.types import Hit, LayerRun, LayerStatus, RunState

JSON_SCHEMA_VERSION = 1


def polars_module():
    from lar.core.errors import require

    return require("polars", "notebook")


def text_table(headers: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(str(c))}</td>" for c in r) + "</tr>"
        for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True)
class Result:
    query: Any
    hits: tuple[Hit, ...]
    runs: tuple[LayerRun, ...]
    timebox: float
    elapsed: float
    k: int
    fusion: str
    emphasis: str
    first_result: float | None = None  # seconds from call start to the first layer's hits
    pool: dict[str, int] = field(default_factory=dict)
    # each layer's own best-first list as fusion received it (hits carrying that layer's signal
    # only; not in the JSON form): what an offline study re-fuses, lar.fusion.pipeline.fuse_hits
    layer_hits: Mapping[str, tuple[Hit, ...]] = field(default_factory=dict, repr=False)
    # the scale of every hit's fused ``score`` (lar.fusion.pipeline.POLICY_SCALES: "rrf",
    # "adaptive-<norm>", ...): scores of different scales are not comparable
    score_scale: str = ""
    # the layers the caller selected (None: every layer); the text form lists only these
    layers: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hits", tuple(self.hits))
        object.__setattr__(self, "runs", tuple(self.runs))
        object.__setattr__(self, "layer_hits", MappingProxyType(
            {name: tuple(hits) for name, hits in self.layer_hits.items()}))

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self):
        return iter(self.hits)

    def run(self, name: str) -> LayerRun:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def overshoot(self) -> float:
        return self.elapsed - self.timebox

    def to_dict(self, *, full: bool = False) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION,
            "query": self.query,
            "k": self.k,
            "timebox": self.timebox,
            "elapsed": round(self.elapsed, 6),
            "first_result": None if self.first_result is None else round(self.first_result, 6),
            "fusion": self.fusion,
            "score_scale": self.score_scale,
            "emphasis": self.emphasis,
            "hits": [h.to_dict() if full else h.to_compact() for h in self.hits],
            "runs": [r.to_dict(probe=full) for r in self.runs],
        }

    def to_json(self, *, full: bool = False, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(full=full), indent=indent, ensure_ascii=False, default=str)

    def to_polars(self):
        pl = polars_module()
        return pl.DataFrame(
            {
                "rank": list(range(1, len(self.hits) + 1)),
                "id": [h.id for h in self.hits],
                "path": [h.path for h in self.hits],
                "line_start": [h.lines[0] if h.lines else None for h in self.hits],
                "line_end": [h.lines[1] if h.lines else None for h in self.hits],
                "signals": [list(h.signals) for h in self.hits],
                "score": [h.score for h in self.hits],
                "excerpt": [h.excerpt for h in self.hits],
            },
            schema_overrides={"line_start": pl.Int64, "line_end": pl.Int64, "score": pl.Float64},
        )

    def runs_to_polars(self):
        pl = polars_module()
        return pl.DataFrame([r.to_dict() for r in self.runs]) if self.runs else pl.DataFrame()

    def shown_runs(self, all_runs: bool = False) -> tuple[LayerRun, ...]:
        """The runs a reader wants by default: every layer that ran, was cut short or failed, and
        a skipped layer only when the caller named it (``all_runs``: every run)."""
        if all_runs:
            return self.runs
        named = set(self.layers or ())
        return tuple(r for r in self.runs if r.state is not RunState.SKIPPED or r.name in named)

    def _repr_html_(self) -> str:
        rows = [[h.rank or i, "" if h.score is None else f"{h.score:.4g}", h.path,
                 f"{h.lines[0]}-{h.lines[1]}" if h.lines else "", ", ".join(h.signals),
                 h.excerpt[:160], h.id] for i, h in enumerate(self.hits, 1)]
        runs = [[r.name, r.state.value, r.reason, r.contributions, f"{r.elapsed * 1000:.1f} ms",
                 "" if r.coverage is None else f"{r.coverage:.0%}"] for r in self.shown_runs()]
        return (f"<div><b>lar</b>: {len(self.hits)} hits for <code>{html.escape(str(self.query))}</code> "
                f"in {self.elapsed * 1000:.0f} ms (timebox {self.timebox * 1000:.0f} ms, fusion {self.fusion})"
                + text_table(["#", f"score ({self.score_scale or self.fusion})", "path", "lines",
                              "signals", "excerpt", "id"], rows)
                + text_table(["layer", "state", "reason", "hits", "elapsed", "coverage"], runs) + "</div>")

    def format(self, all_runs: bool = False) -> str:
        """The text form: one line per hit (rank, fused score, place, layers, excerpt, id), then
        one per run (:meth:`shown_runs`; ``all_runs``: every layer, skipped ones too)."""
        scale = f", scores on the {self.score_scale} scale" if self.score_scale and self.hits else ""
        lines = [f"{len(self.hits)} hits in {self.elapsed * 1000:.0f} ms "
                 f"(timebox {self.timebox * 1000:.0f} ms{scale})"]
        for i, h in enumerate(self.hits, 1):
            loc = f"{h.path}:{h.lines[0]}" if h.lines else str(h.path)
            score = "" if h.score is None else f"{h.score:.4g}  "
            lines.append(f"{h.rank or i:>3}. {score}{loc}  [{', '.join(h.signals)}]  "
                         f"{h.excerpt[:100]!r}  ({h.id})")
        shown = self.shown_runs(all_runs)
        for r in shown:
            cov = "" if r.coverage is None else f" coverage {r.coverage:.0%}"
            why = f" ({r.reason})" if r.reason else ""
            lines.append(f"  - {r.name}: {r.state.value}, {r.contributions} hits, "
                         f"{r.elapsed * 1000:.1f} ms{cov}{why}")
        hidden = len(self.runs) - len(shown)
        if hidden:
            lines.append(f"  ({hidden} layers skipped; --all-runs lists them)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True)
class Status:
    root: str
    state_dir: str
    units: int
    distinct_hashes: int
    skipped: tuple[tuple[str, str, int | None], ...]
    layers: tuple[LayerStatus, ...]
    last_scan: dict[str, Any] = field(default_factory=dict)

    def layer(self, name: str) -> LayerStatus:
        for l in self.layers:
            if l.name == name:
                return l
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION,
            "root": self.root,
            "state_dir": self.state_dir,
            "units": self.units,
            "distinct_hashes": self.distinct_hashes,
            "skipped": [{"path": p, "reason": r, "size": s} for p, r, s in self.skipped],
            "layers": [l.to_dict() for l in self.layers],
            "last_scan": self.last_scan,
        }

    def to_polars(self):
        pl = polars_module()
        return pl.DataFrame([l.to_dict() for l in self.layers])

    def _repr_html_(self) -> str:
        rows = [[l.name, l.version, ", ".join(sorted(l.roles)), l.origin, l.granularity,
                 f"{l.coverage:.0%}", l.query_format, l.cost, l.device, l.resident_text()]
                for l in self.layers]
        skipped = "".join(f"<li>{html.escape(p)}: {html.escape(r)}</li>" for p, r, _ in self.skipped[:20])
        return (f"<div><b>lar</b> {html.escape(self.root)}: {self.units} units "
                f"({self.distinct_hashes} distinct), {len(self.skipped)} skipped"
                + text_table(["layer", "version", "roles", "origin", "granularity", "coverage",
                          "query format", "cost", "device", "resident"], rows)
                + (f"<details><summary>skipped</summary><ul>{skipped}</ul></details>" if skipped else "")
                + "</div>")

    def __str__(self) -> str:
        out = [f"root {self.root}: {self.units} units ({self.distinct_hashes} distinct), "
               f"{len(self.skipped)} skipped; state in {self.state_dir}"]
        for l in self.layers:
            out.append(f"  {l.name:<10} v{l.version:<4} {'/'.join(sorted(l.roles)):<16} {l.origin:<9} "
                       f"{l.granularity:<12} coverage {l.coverage:>4.0%}  query: {l.query_format}"
                       + (f"  device: {l.device}" if l.device else ""))
            if l.resident:
                out.append(f"  {'':<10} {l.resident_text()}")
        for p, r, _ in self.skipped[:10]:
            out.append(f"  skipped {p}: {r}")
        if len(self.skipped) > 10:
            out.append(f"  ... and {len(self.skipped) - 10} more skipped")
        return "\n".join(out)


@dataclass(frozen=True)
class Fetched:
    id: str
    path: str | None
    hash: str
    start: int
    end: int
    lines: tuple[int, int]
    text: str
    context_lines: tuple[int, int]
    context_text: str
    changed: bool = False
    current_id: str | None = None
    note: str = ""
    source: dict[str, Any] = field(default_factory=dict)  # e.g. {"page": 3} or {"symbol": ...}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION,
            "id": self.id,
            "path": self.path,
            "hash": self.hash,
            "span": [self.start, self.end],
            "lines": list(self.lines),
            "text": self.text,
            "context_lines": list(self.context_lines),
            "context": self.context_text,
            "changed": self.changed,
            "current_id": self.current_id,
            "note": self.note,
            "source": self.source,
        }

    def __str__(self) -> str:
        head = f"{self.path}:{self.lines[0]}-{self.lines[1]} ({self.id})"
        if self.note:
            head += f"\n# {self.note}"
        return head + "\n" + self.context_text

    def _repr_html_(self) -> str:
        return (f"<div><b>{html.escape(str(self.path))}</b>:{self.lines[0]}-{self.lines[1]} "
                f"<code>{html.escape(self.id)}</code>"
                + (f"<br><i>{html.escape(self.note)}</i>" if self.note else "")
                + f"<pre>{html.escape(self.context_text)}</pre></div>")


@dataclass(frozen=True, slots=True)
class InventoryItem:
    path: str
    hash: str
    size: int
    mtime_ns: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "hash": self.hash, "size": self.size, "mtime_ns": self.mtime_ns}


__all__ = ["Result", "Status", "Fetched", "InventoryItem", "RunState"]
