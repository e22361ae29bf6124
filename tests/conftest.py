"""Shared fixtures: the compute backends (numpy always, CuPy when a GPU is present)."""
import os

import numpy as np
import pytest

import raymod as rm
from raymod.context import gpu_available


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def ctx(request):
    """Every backend test runs on rm.cpu(0) and, where CuPy sees a GPU, on rm.gpu(0)."""
    if request.param == "gpu":
        if not gpu_available():
            pytest.skip("no CuPy or no CUDA device: GPU backend not tested here")
        return rm.gpu(0)
    return rm.cpu(0)


@pytest.fixture
def rng():
    """A seeded numpy generator for test data."""
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def ray_cluster():
    """One loopback-only local Ray cluster for the whole test session (raymod's helper).

    Multi-node: tests add and remove raylets on it (``rm.cluster.local_cluster()``). It keeps
    Ray's dashboard (init's default; about 1 GB of resident memory): the State API behind
    tests/cluster/test_visible_cluster.py needs it."""
    # pytest-xdist starts one cluster per process at the same moment: each asks for its own
    # dashboard port (two probing Ray's usual one at once would both pick it)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    info = rm.cluster.init(num_cpus=8, multi_node=True,
                           dashboard_port=rm.cluster.local.DASHBOARD_PORT + 10 * index)
    yield info
    rm.cluster.shutdown()


@pytest.fixture
def close_modules():
    """Collects modules on workers and stops their actors after the test (frees CPU slots)."""
    modules = []
    yield modules.append
    for mod in modules:
        mod.close()
