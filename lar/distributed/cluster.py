"""Ray, imported lazily (an error naming the ``ray`` extra when it is missing), and the cluster a
process joins: the one already initialised (a notebook's or a test's ``ray.init``), else the
cluster at ``address``, else a local one. Ray's usage-statistics report is switched off: lar never
talks to the network on its own."""
from __future__ import annotations

import os
import threading
from typing import Any

from lar.core.errors import ConfigError, require

__all__ = ["ray_module", "connect", "check_address", "start_local_cluster"]

_lock = threading.Lock()


def ray_module():
    """The ``ray`` package, or ``MissingExtraError`` naming the extra."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return require("ray", "ray")


def check_address(address: Any) -> str | None:
    """``None`` (join the running cluster or start a local one), ``"auto"`` or ``"host:port"``
    / ``"ray://host:port"``."""
    if address is None:
        return None
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"a Ray address must be 'auto', 'host:port' or 'ray://host:port', "
                          f"got {address!r}")
    return address.strip()


def connect(address: str | None = None):
    """Join a Ray cluster once per process and return the ``ray`` module."""
    ray = ray_module()
    with _lock:
        if not ray.is_initialized():
            if address is None:  # a local cluster on this machine, on loopback
                ray.init(include_dashboard=False, _node_ip_address="127.0.0.1",
                         log_to_driver=False)
            else:
                ray.init(address=check_address(address), log_to_driver=False)
    return ray


def _lean_imports_dir() -> str:
    """A folder whose ``rfc3987_syntax`` raises ImportError: jsonschema, which every Ray
    process imports, then skips its optional IRI format check instead of building that
    package's Earley grammar at import (6 s of CPU per process, measured with
    ``python -X importtime -c "import ray.dashboard.agent"`` in this environment, where the
    notebook extras bring the package in)."""
    import tempfile
    from pathlib import Path

    d = Path(tempfile.gettempdir()) / "lar-ray-lean-imports"
    pkg = d / "rfc3987_syntax"
    pkg.mkdir(parents=True, exist_ok=True)
    init = pkg / "__init__.py"
    if not init.exists():
        init.write_text('raise ImportError("left out of Ray processes started by lar")\n')
    return str(d)


def start_local_cluster(num_cpus: int = 2, attempts: int = 3):
    """Start a local Ray cluster on loopback (no dashboard, no usage report) and join it;
    returns the ``ray`` module and the function that stops it. Used by the tests and the
    benchmark.

    Ray 2.60's raylet gives its Python agents 15 s to report their ports and aborts when one
    misses it (``node_manager.cc``, not configurable), which happens when the machine's cores
    are shared with other jobs. So the cluster's processes start without the one slow optional
    import found here (:func:`_lean_imports_dir`), and a missed start is tried again, up to
    ``attempts`` times."""
    ray = ray_module()
    lean = _lean_imports_dir()
    path = os.environ.get("PYTHONPATH", "")
    if lean not in path.split(os.pathsep):  # inherited by the raylet, its agents and workers
        os.environ["PYTHONPATH"] = os.pathsep.join([lean] + ([path] if path else []))
    for i in range(attempts):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                     log_to_driver=False)
            return ray, ray.shutdown
        except Exception:
            ray.shutdown()
            if i == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
