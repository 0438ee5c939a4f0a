"""Progress of a long ``beir`` or ``fit`` run on stderr: the build phase per layer (units built
of the layer's total), the queries (done, rate, time left) and a fit's steps, as tqdm bars.

:class:`Bars` gives the two callbacks :func:`lar_evals.run.evaluate_beir` takes:
``build(layer, done, total)`` and ``queries(done, total)``, and ``fit(done, total)`` for
:func:`lar_evals.fit.run_fit`. Without tqdm (or with ``plain``)
it prints a line at every tenth of the way instead, so logs of non-interactive runs stay short.
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["Bars"]


class Bars:
    """Progress bars for one run; call :meth:`close` at the end (also a context manager)."""

    def __init__(self, stream: TextIO | None = None, plain: bool | None = None):
        self.stream = stream or sys.stderr
        tqdm = None
        if not plain:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
        self._tqdm = tqdm
        self._bars: dict[str, Any] = {}
        self._next: dict[str, int] = {}

    def _bar(self, key: str, total: int, desc: str, unit: str):
        bar = self._bars.get(key)
        if bar is None and self._tqdm is not None:
            bar = self._tqdm(total=total, desc=desc, unit=unit, file=self.stream, dynamic_ncols=True,
                             leave=True, mininterval=0.5)
            self._bars[key] = bar
        return bar

    def _line(self, key: str, done: int, total: int, text: str) -> None:
        if done >= self._next.get(key, 0) or done == total:
            print(text, file=self.stream, flush=True)
            self._next[key] = done + max(1, total // 10)

    def build(self, layer: str, done: int, total: int) -> None:
        """``done`` of ``total`` units of ``layer`` built."""
        bar = self._bar(f"build:{layer}", total, f"build {layer}", "unit")
        if bar is None:
            self._line(f"build:{layer}", done, total, f"evals: build {layer} {done}/{total} units")
            return
        bar.total = total
        bar.update(done - bar.n)
        if done >= total:  # stop its clock: the layer is built
            bar.close()

    def queries(self, done: int, total: int) -> None:
        """``done`` of ``total`` queries scored."""
        bar = self._bar("queries", total, "queries", "query")
        if bar is None:
            self._line("queries", done, total, f"evals: {done}/{total} queries")
            return
        bar.update(done - bar.n)

    def fit(self, done: int, total: int) -> None:
        """``done`` of ``total`` fit steps (each fold's fit, the final fit, each set scored)."""
        bar = self._bar("fit", total, "fit", "step")
        if bar is None:
            self._line("fit", done, total, f"evals: fit {done}/{total} steps")
            return
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()

    def __enter__(self) -> "Bars":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
