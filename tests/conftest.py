"""Shared fixtures: the compute backends (numpy always; CuPy on a GPU, else CuPy's stand-in)."""
import os
import sys
import time
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
    tests/cluster/test_visible_cluster.py needs it. pytest-xdist starts one per process, at
    the same moment, beside whatever other clusters run on the machine: Ray's dashboard binds
    8265 or the next free port itself, every other port is the kernel's choice, and a start
    that times out under load is tried again (``rm.cluster.init``)."""
    pytest.importorskip("ray", reason="Ray is not installed (bench/gpu_check.sh's GPU machine)")
    # the CuPy stand-in lives in this process only: for Ray's workers it is no GPU
    info = rm.cluster.init(num_cpus=8, num_gpus=0 if CUPY_STANDIN else None, multi_node=True)
    yield info
    rm.cluster.shutdown()


#: how long after a test its killed actors may take to give their resources back (s)
LEAK_WAIT_S = float(os.environ.get("RAYMOD_LEAK_WAIT_S", "30"))
#: resources the leak check leaves out: memory moves with objects, not with actors
_UNCOUNTED = ("memory", "object_store_memory")


def cluster_held() -> dict:
    """What the connected cluster's resources have in use: name -> amount (none: {})."""
    import ray
    total, free = ray.cluster_resources(), ray.available_resources()
    held = {name: total[name] - free.get(name, 0.0) for name in total
            if name not in _UNCOUNTED and not name.startswith("node:")}
    return {name: amount for name, amount in held.items() if amount > 1e-6}


def held_beyond(before: dict, wait_s: float) -> dict:
    """Wait up to ``wait_s`` for the cluster's resources in use to be back to ``before``
    (what was in use when the test began, e.g. by a module's fixture); returns what is held
    beyond it then ({}: nothing, at once when nothing is)."""
    deadline = time.monotonic() + wait_s
    while True:
        beyond = {name: amount - before.get(name, 0.0) for name, amount in cluster_held().items()}
        beyond = {name: amount for name, amount in beyond.items() if amount > 1e-6}
        if not beyond or time.monotonic() >= deadline:
            return beyond
        time.sleep(0.2)


def live_actors() -> list[str]:
    """The cluster's live actors, one ``class name (namespace, pid, resources)`` each."""
    try:
        import ray
        from ray.util.state import list_actors
        # the connected cluster's address: left to find one, the State API refuses when
        # several clusters run on the machine
        actors = list_actors(address=ray.get_runtime_context().gcs_address,
                             filters=[("state", "=", "ALIVE")], detail=True, timeout=15,
                             raise_on_missing_output=False)
    except Exception as err:  # noqa: BLE001 - no State API (no dashboard): say so
        return [f"(could not list them: {type(err).__name__}: {err})"]
    return [f"{a.class_name} {a.name or a.actor_id[:12]} (namespace {a.ray_namespace}, "
            f"pid {a.pid}, {a.required_resources or {}})" for a in actors]


@pytest.fixture(autouse=True)
def _cluster_left_as_found(request):
    """After each test on the session cluster, its resources must be back to what they were
    before the test (all free, unless a module's fixture holds some), within LEAK_WAIT_S
    seconds for killed actors to be reaped; else the test fails, naming the live actors.

    The wait also keeps the next test from finding CPUs still held by this one's actors.
    A leak is reported once: the next test is measured from what it found.
    """
    if "ray_cluster" not in request.fixturenames:
        yield
        return
    import ray
    before = cluster_held() if ray.is_initialized() else None
    yield
    if before is None or not ray.is_initialized():
        return  # the test stopped the cluster itself
    beyond = held_beyond(before, LEAK_WAIT_S)
    if beyond:
        actors = live_actors()
        pytest.fail(f"{request.node.nodeid} left the session Ray cluster's resources {beyond} "
                    f"in use {LEAK_WAIT_S:g} s after it ended (in use before it: "
                    f"{before or 'none'}); live actors ({len(actors)}): "
                    f"{'; '.join(actors) or 'none'}. Close its modules (close_modules) or "
                    f"ray.kill its actors", pytrace=False)


@pytest.fixture
def close_modules():
    """Collects modules on workers and stops their actors after the test (frees CPU slots)."""
    modules = []
    yield modules.append
    for mod in modules:
        mod.close()
