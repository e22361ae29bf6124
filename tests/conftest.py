"""Shared fixtures: the compute backends (numpy always; CuPy on a GPU, else CuPy's stand-in)."""
import os
import sys
from pathlib import Path

import numpy as np
import pytest


def _real_cupy_sees_a_device() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, or no CUDA driver/device
        return False


# Without a usable real CuPy, the strict stand-in (tests/cupy_standin.py) plays ``cupy``, so the
# CuPy code path runs here. It must be in sys.modules before raymod first imports cupy.
# RAYMOD_CUPY_STANDIN=0 turns it off (the GPU halves then skip, as before).
CUPY_STANDIN = (os.environ.get("RAYMOD_CUPY_STANDIN", "1") != "0"
                and not _real_cupy_sees_a_device())
if CUPY_STANDIN:
    for _name in [n for n in sys.modules if n == "cupy" or n.startswith("cupy.")]:
        del sys.modules[_name]
    import cupy_standin

    cupy_standin.install()

import raymod as rm  # noqa: E402 - after cupy is settled
from raymod.context import gpu_available  # noqa: E402

# The folders whose GPU halves run on the stand-in: every op and the executors. Elsewhere a GPU
# test needs a real device's features (several devices, Ray workers given num_gpus).
_TESTS = Path(__file__).parent
STANDIN_FOLDERS = (_TESTS / "ops", _TESTS / "parallel", _TESTS / "test_executor.py",
                   _TESTS / "test_operator.py", _TESTS / "kvstore" / "test_kvstore_local.py")


def _runs_on_standin(path: Path) -> bool:
    return any(path == folder or folder in path.parents for folder in STANDIN_FOLDERS)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def ctx(request):
    """Every backend test runs on rm.cpu(0) and on rm.gpu(0): real CuPy where a GPU is, else
    the CuPy stand-in in the folders of ``STANDIN_FOLDERS``."""
    if request.param == "gpu":
        if not gpu_available():
            pytest.skip("no CuPy or no CUDA device: GPU backend not tested here")
        if CUPY_STANDIN and not _runs_on_standin(Path(str(request.node.path))):
            pytest.skip("needs a real GPU (the CuPy stand-in runs only ops and executors)")
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
    pytest.importorskip("ray", reason="Ray is not installed (bench/gpu_check.sh's GPU machine)")
    # pytest-xdist starts one cluster per process at the same moment: each asks for its own
    # dashboard port (two probing Ray's usual one at once would both pick it)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    # the CuPy stand-in lives in this process only: for Ray's workers it is no GPU
    info = rm.cluster.init(num_cpus=8, num_gpus=0 if CUPY_STANDIN else None, multi_node=True,
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
