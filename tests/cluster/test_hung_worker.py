"""A worker that stops answering (SIGSTOP) is found by the step deadline, killed and replaced;
its slices are recomputed and the run ends on the failure-free trajectory."""
import os
import signal

import numpy as np
import pytest

import raymod as rm

from nets import mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

STEPS_PER_EPOCH = 12
DEADLINE = 4.0


def fit(close, on_batch=None, workers=None):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((STEPS_PER_EPOCH * 30, 16)).astype(np.float32)
    y = (x[:, :10].argmax(axis=1)).astype(np.float32)
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    close(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=30, shuffle=True, seed=2), num_epoch=2,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier(), batch_end_callback=on_batch, kvstore="dist_sync")
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


@pytest.mark.parametrize("run_ahead", [1, 4])
def test_a_stopped_worker_is_replaced_within_its_deadline(close_modules, run_ahead):
    _, reference = fit(close_modules)
    stopped = {}

    def on_batch(param):
        pool = param.locals["self"].pool
        if param.epoch == 0 and param.nbatch == 3 and "rank" not in stopped:
            rank = pool.ranks[-1]
            stopped.update(rank=rank, pid=pool.info[rank]["pid"])
            os.kill(stopped["pid"], signal.SIGSTOP)
        stopped["pool"] = pool

    try:
        mod, got = fit(close_modules, on_batch,
                       rm.Workers(2, 3, step_timeout=DEADLINE, run_ahead=run_ahead))
    finally:
        if stopped.get("pid"):
            try:  # the deadline should have killed it; never leave a stopped process behind
                os.kill(stopped["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    for name in reference:
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-5, atol=1e-6)
    lost = [e for e in stopped["pool"].events if e["event"] == "lost"]
    assert [e["rank"] for e in lost] == [stopped["rank"]]
    assert stopped["rank"] not in stopped["pool"].workers


def test_default_deadline_replaces_a_stopped_worker_in_seconds_and_close_reaps_it(
        close_modules):
    """No step_timeout: millisecond steps give the 5 s floor, not the first step's 60 s."""
    import psutil
    import time

    _, reference = fit(close_modules)
    stopped = {}

    def on_batch(param):
        pool = param.locals["self"].pool
        if param.epoch == 1 and param.nbatch == 2 and "rank" not in stopped:
            rank = pool.ranks[0]
            stopped.update(rank=rank, pid=pool.info[rank]["pid"], at=time.time(), pool=pool)
            os.kill(stopped["pid"], signal.SIGSTOP)

    mod, got = fit(close_modules, on_batch, rm.Workers(2, 2, run_ahead=4))
    lost = [e for e in stopped["pool"].events if e["event"] == "lost"]
    assert [e["rank"] for e in lost] == [stopped["rank"]]
    assert lost[0]["time"] - stopped["at"] < 15, lost
    for name in reference:
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-5, atol=1e-6)
    mod.close()
    try:  # killed: gone, or a zombie until its parent raylet collects it
        assert psutil.Process(stopped["pid"]).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass
