"""A local Ray cluster for the Ray tests (test_ray_build, test_ray_scan, test_ray_dense): started
once per session when one of them asks, 2 CPUs, loopback only, no dashboard, no usage report
(``lar.distributed.cluster.start_local_cluster``: seconds on an idle machine, tens of seconds
when the cores are shared, tried again when Ray's own start-up deadline is missed), and stopped at the end."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    pytest.importorskip("ray")
    from lar.distributed.cluster import start_local_cluster

    ray, stop = start_local_cluster(num_cpus=2)
    yield ray
    stop()
