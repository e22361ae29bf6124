"""KVServers lost outside a training step: during ``init_optimizer`` (before any snapshot:
the set-up runs again on a new server) and before ``get_params`` (restored from the
driver's snapshot, the steps since replayed). Each run ends where the run without the loss
ends."""
import numpy as np
import pytest
import ray

import raymod as rm
import raymod.model
from raymod.cluster import moments

from actors import wait_until_dead
from nets import argmax_rows, mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

STEPS_PER_EPOCH = 10


def data():
    return argmax_rows(STEPS_PER_EPOCH)


def fit(close, workers=2, epochs=2, kvstore="dist_sync", on_batch=None,
        steps=STEPS_PER_EPOCH):
    """``epochs`` of ``steps`` batches, on ``workers`` (None: in this process)."""
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(argmax_rows(steps), num_epoch=epochs, kvstore=kvstore, batch_end_callback=on_batch,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier())
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


def assert_close(a, b, tol=1e-5):
    for name in a:
        err = np.abs(a[name] - b[name]).max() / max(np.abs(a[name]).max(), 1e-3)
        assert err < tol, f"{name}: max relative difference {err:.2e}"


@pytest.fixture(scope="module")
def reference():
    rm.random.seed(1)
    mod = rm.mod.Module(mlp())
    mod.fit(data(), num_epoch=2, optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier())
    return mod.get_params()[0]


def test_server_lost_in_the_middle_of_init_optimizer(close_modules, monkeypatch, reference):
    """The server dies after it got the optimizer, before the initial values: a new one is
    started, the whole set-up runs again, and training goes on as if nothing happened."""
    original, killed = raymod.model._initialize_kvstore, []

    def kill_then_initialize(kv, *args):
        if not killed:
            killed.append(kv.servers[0])
            ray.kill(kv.servers[0], no_restart=True)
        return original(kv, *args)

    monkeypatch.setattr(raymod.model, "_initialize_kvstore", kill_then_initialize)
    mod, got = fit(close_modules)
    assert killed and mod._kvstore.servers[0] is not killed[0]
    assert_close(reference, got)
    recovered = [e for e in mod._pool.events if e["event"] == "kvserver_recovered"]
    assert [(e["during"], e["shards"], e["snapshot_step"]) for e in recovered] == \
        [("init_optimizer", [0], None)]
    history = list(mod._pool.controller.history)
    assert history[0]["event"] == "ServerDied(init_optimizer)"
    assert (history[0]["from"], history[0]["to"]) == ("starting", "starting")
    assert history[0]["actions"] == ["RestoreServers", "Retry"]
    assert mod._pool.controller.phase is rm.cluster.controller.Phase.RUNNING


def test_server_dead_before_init_optimizer(close_modules, reference):
    """A store whose server died before the module used it (e.g. its node went away at
    start-up): init_optimizer replaces it instead of failing in set_optimizer."""
    kv = rm.kv.create("dist_sync")
    ray.kill(kv.servers[0], no_restart=True)
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(), workers=2)
    close_modules(mod)
    try:
        mod.fit(data(), num_epoch=2, kvstore=kv,
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                initializer=rm.init.Xavier())
        assert_close(reference, mod.get_params()[0])
    finally:
        kv.close()


@pytest.mark.parametrize("run_ahead", [1, None])
def test_server_lost_after_fit_is_restored_for_get_params(close_modules, reference, run_ahead):
    """get_params after the server died: restored from the last snapshot, the steps since
    replayed, so the values read are the trained ones."""
    mod, _ = fit(close_modules, workers=rm.Workers(2, run_ahead=run_ahead))
    server = mod._kvstore.servers[0]
    ray.kill(server, no_restart=True)
    wait_until_dead(server)  # ray.kill is asynchronous: a read right after may be answered
    # what Module.get_params calls when the workers have trained since the last read
    args, aux = {}, {}
    mod._exec_group.get_params(args, aux)
    assert_close(reference, args)
    recovered = [e for e in mod._pool.events if e["event"] == "kvserver_recovered"]
    assert [e["during"] for e in recovered] == ["get_params"]
    assert recovered[0]["steps_replayed"] == 2 * STEPS_PER_EPOCH - 1 - recovered[0]["snapshot_step"]


def test_score_survives_a_worker_lost_before_its_forward(close_modules, reference):
    """score / predict: a worker found dead by forward is forgotten by the controller and
    the live workers run the forward again; the score is the in-process one."""
    mod, _ = fit(close_modules, workers=rm.Workers(1, 2))
    local = rm.mod.Module(mlp())
    it = data()
    local.bind(it.provide_data, it.provide_label, for_training=False)
    local.set_params(*mod.get_params())
    expected = dict(local.score(data(), "acc"))
    ray.kill(mod._pool.workers[max(mod._pool.ranks)], no_restart=True)
    assert dict(mod.score(data(), "acc")) == pytest.approx(expected, abs=1e-6)
    assert [e["event"] for e in mod._pool.events].count("lost") == 1
    assert any(h["event"] == "WorkerDied(call)" for h in mod._pool.controller.history)


def test_periodic_snapshots_do_not_stop_the_workers(close_modules, monkeypatch, reference):
    """With workers running ahead, the servers take the periodic recovery snapshot when
    they finish the due step and the driver fetches it later: the driver takes one itself
    (stopping the windows) only after direct writes (set-up, fit's set_params per epoch)."""
    from raymod.cluster.remote_group import RayExecutorGroup
    monkeypatch.setattr("raymod.cluster.snapshots.SNAPSHOT_EVERY", 7)
    taken, adopted = [], []
    take, adopt = RayExecutorGroup._take_snapshot, RayExecutorGroup._adopt_snapshot

    def take_snapshot(group):
        st = group.state
        taken.append(st.snapshot is None or st.kv.writes != st.snapshot_writes)
        take(group)

    def adopt_snapshot(group, last):
        due = group.state.snapshot_due
        adopt(group, last)
        if due is not None and group.state.snapshot and group.state.snapshot[0] == due:
            adopted.append(due)

    monkeypatch.setattr(RayExecutorGroup, "_take_snapshot", take_snapshot)
    monkeypatch.setattr(RayExecutorGroup, "_adopt_snapshot", adopt_snapshot)
    mod, got = fit(close_modules, workers=rm.Workers(2, run_ahead=4), epochs=2)
    assert_close(reference, got)
    assert taken and all(taken), taken  # never just because the period came round
    assert adopted and all((step + 1) % 7 == 0 for step in adopted), adopted



def test_restore_replays_no_step_beyond_the_live_shards(close_modules):
    """Without standbys, a shard lost as a window starts is restored from the snapshot and
    only the steps a live shard finished are replayed one by one; the rest of the window
    runs as windows again. The run ends where the run in one process ends."""
    steps, window = 30, 12
    _, want = fit(close_modules, None, kvstore=None, steps=steps)
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)  # as the README spells it
    launched = []

    def on_moment(name, context):
        if name != "window.launched":
            return
        launched.append(context["steps"])
        if len(launched) == 2:  # kill shard 1 as the second window starts; wait for its end
            ray.kill(kv.servers[1], no_restart=True)
            wait_until_dead(kv.servers[1])

    previous = moments.listen(on_moment)
    try:
        mod, got = fit(close_modules, rm.Workers(2, run_ahead=window), kvstore=kv, steps=steps)
    finally:
        moments.listen(previous)
        kv.close()
    assert_close(want, got)
    recovered = [e for e in mod._pool.events if e["event"] == "kvserver_recovered"]
    assert [(e["shards"], e["standby_promoted"]) for e in recovered] == [([1], False)]
    window_end = sum(launched[:2]) - 1
    replayed_to = recovered[0]["snapshot_step"] + recovered[0]["steps_replayed"]
    # the live shard stopped within a few steps of the window's start, not at its end
    assert replayed_to < window_end - 2, (recovered[0], launched)
