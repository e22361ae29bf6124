"""Hot-standby KVServer shards (``DistKVStore(standby=True)``): a killed primary is replaced
by its standby without restoring the driver's snapshot; a killed standby is replaced while
training goes on; losing a primary and its standby together falls back to the snapshot.
Every run ends where the same training in one process ends (1e-5)."""
import time

import numpy as np
import pytest
import ray

import raymod as rm
from raymod.kvstore.dist import DistKVStore

from nets import argmax_rows, mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

STEPS_PER_EPOCH = 30
#: seconds a test gives the standbys to come up (actors start slowly on a loaded machine)
ATTACH_SECONDS = 60


def data():
    return argmax_rows(STEPS_PER_EPOCH)


def fit(close, kvstore, on_batch=None, epochs=2, workers=rm.Workers(2, run_ahead=2)):
    """Two epochs on workers; windows of 4 steps, so that a kill in a batch-end callback
    strikes with the next windows in flight."""
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    close(mod)
    mod.fit(data(), num_epoch=epochs, kvstore=kvstore, batch_end_callback=on_batch,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9,
                              "lr_scheduler": rm.lr_scheduler.FactorScheduler(7, 0.9, base_lr=0.1)},
            initializer=rm.init.Xavier())
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


@pytest.fixture(scope="module")
def reference():
    rm.random.seed(1)
    mod = rm.mod.Module(mlp())
    mod.fit(data(), num_epoch=2,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9,
                              "lr_scheduler": rm.lr_scheduler.FactorScheduler(7, 0.9, base_lr=0.1)},
            initializer=rm.init.Xavier())
    return mod.get_params()[0]


def assert_close(a, b, tol=1e-5):
    for name in a:
        err = np.abs(a[name] - b[name]).max() / max(np.abs(a[name]).max(), 1e-3)
        assert err < tol, f"{name}: max relative difference {err:.2e}"


def wait_attached(kv, shards, but=()):
    """Block (bounded) until ``shards`` all have standbys attached (other than the actors
    ``but``): the driver attaches them between steps, so this tends them meanwhile."""
    deadline = time.monotonic() + ATTACH_SECONDS
    while not (set(shards) <= set(kv.standbys.attached)
               and not {id(a) for a in kv.standbys.attached.values()} & set(map(id, but))):
        assert time.monotonic() < deadline, \
            f"standbys of {shards} not attached within {ATTACH_SECONDS} s: {kv.standbys.attached}"
        time.sleep(0.05)
        kv.tend_standbys()


def kill_at(kv, plan):
    """A batch-end callback killing actors at global batches: ``plan`` maps a batch number
    to a function of the kvstore giving the actors to kill (standbys attached first)."""
    seen = {"n": 0}

    def on_batch(param):
        n, seen["n"] = seen["n"], seen["n"] + 1
        if n in plan:
            wait_attached(kv, range(len(kv.servers)))
            for actor in plan[n](kv):
                ray.kill(actor, no_restart=True)
    return on_batch


def recoveries(mod):
    return [e for e in mod._pool.events if e["event"] == "kvserver_recovered"]


def test_a_killed_primary_is_replaced_by_its_standby(close_modules, reference):
    """Each shard's primary killed once, at different batches: each time the standby is
    promoted (no snapshot restored) and a new standby is made for it."""
    kv = DistKVStore("dist_sync", num_servers=2, standby=True)
    killed = []

    def primary(shard):
        def pick(kv):
            killed.append(kv.servers[shard])
            return [kv.servers[shard]]
        return pick

    mod, got = fit(close_modules, kv, kill_at(kv, {8: primary(0), 35: primary(1)}))
    assert_close(reference, got)
    got_events = recoveries(mod)
    assert [e["shards"] for e in got_events] == [[0], [1]], got_events
    assert all(e["standby_promoted"] and e["snapshot_step"] is None for e in got_events)
    assert not set(map(id, killed)) & set(map(id, kv.servers))
    wait_attached(kv, [0, 1])  # new standbys for the promoted servers
    assert not {id(a) for a in kv.standbys.attached.values()} & {id(s) for s in kv.servers}


def test_a_killed_standby_is_replaced_and_training_goes_on(close_modules, reference):
    """A standby killed mid-fit: its primary drops it at the next step and goes on; the
    driver starts and attaches another; no server recovery happens."""
    kv = DistKVStore("dist_sync", num_servers=1, standby=True)
    victims = []

    def standby(kv):
        victims.append(kv.standbys.attached[0])
        return victims[-1:]

    mod, got = fit(close_modules, kv, kill_at(kv, {5: standby}))
    assert_close(reference, got)
    assert recoveries(mod) == []
    wait_attached(kv, [0], but=victims)  # the primary dropped it; the driver notices


def test_a_primary_and_its_standby_lost_together_restore_the_snapshot(close_modules,
                                                                       reference):
    kv = DistKVStore("dist_sync", num_servers=1, standby=True)
    mod, got = fit(close_modules, kv,
                   kill_at(kv, {12: lambda kv: [kv.servers[0], kv.standbys.attached[0]]}))
    assert_close(reference, got)
    (event,) = recoveries(mod)
    assert not event["standby_promoted"] and event["snapshot_step"] is not None


def test_standby_is_refused_for_dist_async():
    with pytest.raises(ValueError, match="standby=True needs a dist_sync"):
        DistKVStore("dist_async", standby=True)
    with pytest.raises(ValueError, match="standby must be a bool, got 'yes'"):
        DistKVStore("dist_sync", standby="yes")
