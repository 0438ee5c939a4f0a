"""The plain-text summary warns when a route was scored on a partial index."""
from __future__ import annotations

import copy

from lar_evals.cli import format_summary


def test_summary_warns_about_a_route_scored_on_a_partial_index(evaluation):
    _, ev, _ = evaluation
    s = copy.deepcopy(ev.summary)
    assert "warning" not in format_summary(s)  # every route of the tiny run built completely
    route = next(iter(s["routes"]))
    s["coverage"][route] = 0.0667
    s["coverage"]["not-a-route"] = 0.5  # a layer that was not scored: no warning
    lines = [x for x in format_summary(s).splitlines() if x.startswith("warning")]
    assert lines == [f"warning: route {route} was scored on a partial index (coverage 7%: its build "
                     f"did not finish within --build-timebox); its scores are not the layer's"]
