"""Whether a layer can answer now, and why it found nothing: the notebook's answer to "it
depends on timing".

``ensure_built(engine, layer)`` builds the layer for the units it still lacks before a cell
relies on it (a no-op when it is built). ``empty_reason(engine, result, layer)`` names the real
cause when a layer gave no hits: it was not selected, skipped or failed (with the layer's own
reason), it has built none or part of its units (and what the background build is busy with),
or it ran out of its timebox. ``require_hits`` raises :class:`NoLayerHitsError` with that
reason. ``explain_data`` uses the same message when there is nothing to explain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lar.core.errors import LarError
from lar.core.types import RunState

from lar_magics.errors import MagicError


class NoLayerHitsError(MagicError):
    """A layer a cell relies on found nothing; the message names the cause and the remedy."""


@dataclass(frozen=True)
class Background:
    """The engine's background build as seen from outside: whether it runs, and the layer it
    is working through (None: idle or not running)."""

    running: bool
    layer: str | None

    def clause(self, layer: str) -> str:
        """``": the background build is busy with dense-e5"`` or the empty string."""
        if not self.running:
            return ""
        if self.layer is None:
            return ""
        if self.layer == layer:
            return f": the background build is building {layer} now"
        return f": the background build is busy with {self.layer}"


def background(engine) -> Background:
    b = getattr(engine, "builder", None)
    return Background(bool(getattr(b, "running", False)), getattr(b, "busy_with", None))


def layer_counts(engine, layer: str, scope: Any = None) -> tuple[int, int, float]:
    """(built units, units, coverage) of ``layer`` now."""
    st = engine.status(scope).layer(layer)
    return st.built_units, st.units, st.coverage


def build_hint(layer: str) -> str:
    return f"run %lar build --layers {layer} (or engine.build(layers=[{layer!r}]))"


def describe(layer: str, run, built: int, units: int, coverage: float, bg: Background,
             found: int = 0) -> str:
    """The cause of an empty answer from what is known: the layer's run in the call (None: it
    did not run), its build counts now and the background build. Pure: tests give the values."""
    if run is None:
        return f"{layer} did not run in this search: select it (layers=[{layer!r}] or the query {{{layer!r}: ...}})"
    state = RunState(run.state)
    reason = f" ({run.reason})" if run.reason else ""
    if state is RunState.FAILED:
        return f"{layer} failed in this search{reason}"
    if state is RunState.SKIPPED and built == 0 and units:
        return f"{layer} has built 0 of {units:,} units{bg.clause(layer)}; {build_hint(layer)}"
    if state is RunState.SKIPPED:
        return f"{layer} was skipped in this search{reason}"
    if state is RunState.ABORTED:
        return (f"{layer} ran out of time: aborted after {run.elapsed:.1f} s{bg.clause(layer)}; "
                "search again with a longer timebox, or stop the background build "
                "(%lar build --stop)")
    if built == 0 and units:
        return f"{layer} has built 0 of {units:,} units{bg.clause(layer)}; {build_hint(layer)}"
    if coverage < 0.9995 and units:
        return (f"{layer} has built {built:,} of {units:,} units ({coverage:.0%}){bg.clause(layer)} "
                f"and found nothing in them; {build_hint(layer)}")
    if found:
        return f"{layer} found {found} hit(s) but fusion kept none of them in the top k; raise k"
    return f"{layer} searched all {units:,} units and found nothing for this query; change the query"


def empty_reason(engine, result, layer: str) -> str:
    """Why ``layer`` gave no hit in ``result`` (a ``lar.Result`` or ``Results``)."""
    res = getattr(result, "result", result)
    try:
        run = res.run(layer)
    except KeyError:
        run = None
    if run is not None and RunState(run.state) is RunState.SKIPPED and "not selected" in run.reason:
        run = None
    try:
        built, units, coverage = layer_counts(engine, layer)
    except (KeyError, LarError):
        built, units, coverage = 0, 0, 0.0
    found = run.contributions if run is not None else 0
    return describe(layer, run, built, units, coverage, background(engine), found)


def layer_hits(result, layer: str) -> list:
    res = getattr(result, "result", result)
    return [h for h in res.hits if layer in h.signals]


def require_hits(engine, result, layer: str):
    """``result`` when at least one hit carries ``layer``'s signal, else NoLayerHitsError with
    the real cause (:func:`empty_reason`)."""
    if not layer_hits(result, layer):
        raise NoLayerHitsError(empty_reason(engine, result, layer))
    return result


def ensure_built(engine, layer: str, timebox: float = 600.0, scope: Any = None) -> tuple[int, int]:
    """Build ``layer`` for every unit it lacks (up to ``timebox`` seconds; a no-op when it is
    built) and return (built units, units). Raises NoLayerHitsError when the layer does not
    apply here (no model configured) or is still not complete when the timebox ends."""
    if layer not in engine.layers:
        raise MagicError(f"the engine has no layer {layer!r}; layers: {', '.join(engine.layers)}")
    built, units, coverage = layer_counts(engine, layer, scope)
    if coverage >= 0.9995:
        return built, units
    report = engine.build(timebox=timebox, layers=[layer], scope=scope)
    info = (report.get("layers") or {}).get(layer, {})
    built, units, coverage = layer_counts(engine, layer, scope)
    if info.get("state") == "skipped":
        raise NoLayerHitsError(f"{layer} cannot build here: {info.get('reason', 'does not apply')}")
    if coverage < 0.9995:
        raise NoLayerHitsError(f"{layer} has built {built:,} of {units:,} units after "
                               f"{timebox:g} s{background(engine).clause(layer)}; build longer: "
                               f"%lar build --layers {layer} --timebox 30m")
    return built, units


__all__ = ["Background", "NoLayerHitsError", "background", "build_hint", "describe",
           "empty_reason", "ensure_built", "layer_counts", "layer_hits", "require_hits"]
