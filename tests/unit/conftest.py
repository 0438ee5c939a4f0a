"""A local Ray cluster for the Ray tests (test_ray_build, test_ray_scan): started once per
session when one of them asks, 2 CPUs, loopback only, no dashboard, no usage report."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    yield ray
    ray.shutdown()
