"""Spare workers (``Workers(spares=N)``): actors started and set up ahead of need, idle, that
take a lost worker's place at the next step boundary, with no process start, import or bind
on the way; the pool then starts a new spare. The run stays on the failure-free trajectory."""
import time

import numpy as np
import pytest
import ray

import raymod as rm

from actors import wait_until_dead
from nets import argmax_rows, mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

STEPS_PER_EPOCH = 20
RUN_AHEAD = 2
#: seconds a test gives a spare to start (actors start slowly on a loaded machine)
SPARE_SECONDS = 60


def fit(close, workers=None, on_batch=None):
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(argmax_rows(STEPS_PER_EPOCH), num_epoch=2, batch_end_callback=on_batch,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier())
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


def wait_for_spare(pool):
    """Block (bounded) until the pool has a spare ready; returns its rank."""
    deadline = time.monotonic() + SPARE_SECONDS
    while not pool.spares:
        assert time.monotonic() < deadline, f"no spare ready within {SPARE_SECONDS} s"
        time.sleep(0.05)
        pool.poll()
    return min(pool.spares)


def test_spare_takes_a_lost_workers_place_at_the_next_boundary(close_modules):
    _, reference = fit(close_modules)
    seen = {"spare": None, "killed": None, "kill_step": None, "joined_step": None}

    def on_batch(param):
        pool = param.locals["self"]._pool
        step = param.epoch * STEPS_PER_EPOCH + param.nbatch
        if step == 5:
            seen["spare"] = wait_for_spare(pool)
            seen["killed"] = pool.ranks[0]
            seen["kill_step"] = step
            ray.kill(pool.workers[seen["killed"]], no_restart=True)
        elif seen["spare"] in pool.workers and seen["joined_step"] is None:
            seen["joined_step"] = step

    mod, got = fit(close_modules, rm.Workers(2, 2, spares=1, run_ahead=RUN_AHEAD),
                   on_batch=on_batch)
    for name in reference:
        err = np.abs(reference[name] - got[name]).max() / np.abs(reference[name]).max()
        assert err < 1e-5, f"{name}: max relative difference {err:.2e}"
    events = mod._pool.events
    joins = [e for e in events if e["event"] == "join"]
    lost = [e for e in events if e["event"] == "lost"]
    assert [e["rank"] for e in lost] == [seen["killed"]]
    # the place was filled by the spare that was ready before the loss, not a new process
    after = [e for e in joins if e["time"] >= lost[0]["time"]]
    assert after and after[0]["rank"] == seen["spare"] and after[0].get("spare") is True
    # within the windows in flight at the kill plus the one that saw the loss
    assert seen["joined_step"] is not None
    assert seen["joined_step"] - seen["kill_step"] <= 3 * RUN_AHEAD + 1, seen
    # a new spare was asked for in its place (a new rank, started or ready)
    pool = mod._pool
    newest = max([*pool.spares, *pool.workers, *(rank for rank, _ in pool._starting.values())])
    assert newest > seen["spare"]


def test_spares_are_stopped_with_the_module(close_modules):
    mod = rm.mod.Module(mlp(), workers=rm.Workers(1, 1, spares=2))
    mod.bind(data_shapes=[("data", (40, 16))], label_shapes=[("softmax_label", (40,))])
    pool = mod._pool
    wait_for_spare(pool)
    deadline = time.monotonic() + SPARE_SECONDS
    while len(pool.spares) < 2:
        assert time.monotonic() < deadline, "the second spare did not start"
        time.sleep(0.05)
        pool.poll()
    handles = [h for h, _, _ in pool.spares.values()]
    assert len(pool) == 1  # spares take no slices
    pool.shutdown()
    for handle in handles:
        wait_until_dead(handle)


@pytest.mark.parametrize("spares", [-1, True, 1.5])
def test_bad_spares_is_refused_by_name(spares):
    with pytest.raises(ValueError, match=r"Workers\(spares=\.\.\.\) must be an int >= 0"):
        rm.Workers(2, spares=spares)
