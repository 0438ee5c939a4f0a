"""A local Ray cluster for the Ray tests (test_ray_build, test_ray_scan): started once per
session when one of them asks, 2 CPUs, loopback only, no dashboard, no usage report (started
in a few seconds on an idle machine; tens of seconds when the cores are shared)."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    kw = dict(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
              log_to_driver=False)
    try:
        ray.init(**kw)
    except Exception:  # Ray gives its node 30 s to register: once more on a very busy machine
        ray.shutdown()
        ray.init(**kw)
    yield ray
    ray.shutdown()
