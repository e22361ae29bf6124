"""Module on Ray worker actors gives what the same training gives in one process."""
import numpy as np
import pytest

import raymod as rm
from raymod.cluster import remote_group, windows

import nets

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]



def mlp():
    return nets.mlp(32, 16)


def lenet():
    data = rm.sym.Variable("data")
    c1 = rm.sym.Convolution(data, kernel=(5, 5), num_filter=6, name="conv1")
    p1 = rm.sym.Pooling(rm.sym.Activation(c1, act_type="tanh"), pool_type="max",
                        kernel=(2, 2), stride=(2, 2))
    c2 = rm.sym.Convolution(p1, kernel=(3, 3), num_filter=8, name="conv2")
    p2 = rm.sym.Pooling(rm.sym.Activation(c2, act_type="tanh"), pool_type="max",
                        kernel=(2, 2), stride=(2, 2))
    f1 = rm.sym.Activation(rm.sym.FullyConnected(rm.sym.Flatten(p2), num_hidden=32, name="fc1"),
                           act_type="tanh")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(f1, num_hidden=10, name="fc2"),
                                name="softmax")


def data(shape, n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n,) + shape).astype(np.float32)
    y = (x.reshape(n, -1)[:, :10].argmax(axis=1)).astype(np.float32)
    return x, y


def train(net, x, y, workers, close, epochs=2, kvstore="local", batch=60, **fit):
    rm.random.seed(7)
    it = rm.io.NDArrayIter(x, y, batch_size=batch, shuffle=True, seed=11)
    mod = rm.mod.Module(net, workers=workers)
    if workers is not None:
        close(mod)
    metric = rm.metric.create("acc")
    fit.setdefault("optimizer_params", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})
    mod.fit(it, num_epoch=epochs, kvstore=kvstore, initializer=rm.init.Xavier(),
            eval_metric=metric, **fit)
    args, aux = mod.get_params()
    return {k: v.copy() for k, v in args.items()}, metric.get_global()[1], mod


def assert_close(a, b, tol):
    for name in a:
        scale = max(np.abs(a[name]).max(), 1e-3)
        err = np.abs(a[name] - b[name]).max() / scale
        assert err < tol, f"{name}: max relative difference {err:.2e}"


@pytest.mark.parametrize("workers, plans", [(2, "inline"), (4, "object store")])
def test_mlp_on_workers_matches_one_process(workers, plans, close_modules, monkeypatch):
    x, y = data((20,))
    ref, ref_acc, _ = train(mlp(), x, y, None, close_modules)
    sent = []  # what each window call carried as its plan
    if plans == "object store":  # as a window of long shuffled batches would travel
        monkeypatch.setattr(windows, "INLINE_PLAN_BYTES", 0)
    shares = remote_group.RayExecutorGroup._plans

    def recording(*args):
        sent.append(shares(*args))
        return sent[-1]

    monkeypatch.setattr(remote_group.RayExecutorGroup, "_plans", recording)
    reports = []
    got, acc, mod = train(mlp(), x, y, workers, close_modules, kvstore="dist_sync",
                          batch_end_callback=memory_reports(reports))
    assert_close(ref, got, 1e-5)
    assert acc == pytest.approx(ref_acc)
    assert mod._kvstore.type == "dist_sync" and mod._kvstore.num_workers == workers
    kinds = {"object store" if isinstance(blob, list) else "inline"
             for share in sent for blob, _, _ in share.values()}
    assert kinds == {plans}
    # on the servers' machine nothing was copied: every parameter was read in place from
    # the server's block and every gradient computed into the block its push named
    assert reports == [{"params": 6, "params_in_place": 6, "grads_in_place": 6}] * workers


def memory_reports(into: list):
    """A batch-end callback that records the workers' memory reports at the third batch."""
    def look(param):
        if param.nbatch == 3 and param.epoch == 1:
            into.extend(param.locals["self"].pool.call_all("memory_report").values())
    return look


@pytest.mark.parametrize("workers", [2, 4])
def test_lenet_on_workers_matches_one_process(workers, close_modules):
    x, y = data((1, 12, 12), n=240)
    ref, _, _ = train(lenet(), x, y, None, close_modules, batch=40)
    got, _, _ = train(lenet(), x, y, workers, close_modules, batch=40)
    assert_close(ref, got, 1e-5)


def test_workers_updating_locally_match_servers_updating(close_modules, monkeypatch):
    x, y = data((20,))
    ref, _, _ = train(mlp(), x, y, None, close_modules)
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    reports = []
    got, _, mod = train(mlp(), x, y, 2, close_modules, batch_end_callback=memory_reports(reports))
    assert mod._update_on_kvstore is False
    assert_close(ref, got, 1e-5)
    # the optimizer runs on the workers: parameters are theirs, gradients still go in place
    assert reports == [{"params": 6, "params_in_place": 0, "grads_in_place": 6}] * 2


def test_batches_sent_by_value_match_row_ranges(close_modules):
    x, y = data((20,))
    ref, _, _ = train(mlp(), x, y, None, close_modules)

    class Plain(rm.io.NDArrayIter):  # hides the row source: batches travel by value
        def next(self):
            batch = super().next()
            batch.source = None
            return batch

    rm.random.seed(7)
    it = Plain(x, y, batch_size=60, shuffle=True, seed=11)
    mod = rm.mod.Module(mlp(), workers=2)
    close_modules(mod)
    mod.fit(it, num_epoch=2, initializer=rm.init.Xavier(),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4})
    assert_close(ref, mod.get_params()[0], 1e-5)


def test_manual_forward_backward_update_and_outputs(close_modules):
    x, y = data((20,), n=120)
    batch = rm.io.DataBatch([x[:60]], [y[:60]])
    mods = []
    for workers in (None, 3):
        rm.random.seed(3)
        mod = rm.mod.Module(mlp(), workers=workers)
        if workers:
            close_modules(mod)
        mod.bind([("data", (60, 20))], [("softmax_label", (60,))])
        mod.init_params(rm.init.Xavier())
        mod.init_optimizer(kvstore="dist_sync" if workers else "local",
                           optimizer_params={"learning_rate": 0.5})
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
        mod.forward(batch, is_train=False)
        metric = rm.metric.create("acc")
        mod.update_metric(metric, batch.label)
        mods.append((mod.get_outputs()[0], metric.get()[1], mod.get_params()[0]))
    (out_a, acc_a, p_a), (out_b, acc_b, p_b) = mods
    assert out_b.shape == (60, 10)
    np.testing.assert_allclose(out_a, out_b, rtol=1e-5, atol=1e-6)
    assert acc_a == acc_b
    assert_close(p_a, p_b, 1e-5)


def test_predict_and_score_run_on_the_workers(close_modules):
    x, y = data((20,))
    ref_params, _, ref_mod = train(mlp(), x, y, None, close_modules, epochs=1)
    _, _, mod = train(mlp(), x, y, 2, close_modules, epochs=1)
    it = rm.io.NDArrayIter(x[:130], y[:130], batch_size=60)
    np.testing.assert_allclose(mod.predict(it), ref_mod.predict(it), rtol=1e-4, atol=1e-5)
    assert mod.score(it, "acc")[0][1] == pytest.approx(ref_mod.score(it, "acc")[0][1])


def test_dist_async_applies_each_push_and_trains(close_modules):
    x, y = data((20,))
    sync, sync_acc, _ = train(mlp(), x, y, 2, close_modules, epochs=3)
    got, acc, mod = train(mlp(), x, y, 2, close_modules, epochs=3, kvstore="dist_async")
    assert mod._kvstore.type == "dist_async"
    # with momentum, two updates of half a batch are not one update of the whole batch
    assert max(np.abs(sync[k] - got[k]).max() for k in sync) > 1e-4
    assert acc > 0.5 and acc > sync_acc - 0.1  # 10 classes: chance is 0.1


def test_bad_workers_and_kvstore_arguments():
    with pytest.raises(ValueError, match="max_workers"):
        rm.Workers(4, 2)
    with pytest.raises(TypeError, match="workers"):
        rm.mod.Module(mlp(), workers=2.5)
    with pytest.raises(ValueError, match="unknown kvstore type 'nope'"):
        rm.mod.Module(mlp()).fit(rm.io.NDArrayIter(*data((20,)), batch_size=60), num_epoch=1,
                                 kvstore="nope")
    assert rm.Workers.coerce("2:8") == rm.Workers(2, 8)


def test_checkpoint_with_server_optimizer_states_resumes_exactly(tmp_path, close_modules):
    x, y = data((20,), n=240)
    prefix = str(tmp_path / "mlp")
    kwargs = dict(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})

    def fit(mod, begin, end, kvstore="dist_sync"):
        it = rm.io.NDArrayIter(x, y, batch_size=60)  # unshuffled: resumable data order
        mod.fit(it, begin_epoch=begin, num_epoch=end, kvstore=kvstore,
                initializer=rm.init.Xavier(), optimizer_params=kwargs["optimizer_params"])
        return {k: v.copy() for k, v in mod.get_params()[0].items()}

    rm.random.seed(7)
    whole = rm.mod.Module(mlp(), workers=2)
    close_modules(whole)
    uninterrupted = fit(whole, 0, 4)
    rm.random.seed(7)
    first = rm.mod.Module(mlp(), workers=2)
    close_modules(first)
    fit(first, 0, 2)
    first.save_checkpoint(prefix, 2, save_optimizer_states=True)
    first.close()
    # the momentum lives on the servers; the file has it in the in-process format
    states = rm.optimizer.Updater(rm.optimizer.create("sgd"))
    states.set_states(open(f"{prefix}-0002.states", "rb").read())
    assert set(states.states) == {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
                                  "fc3_weight", "fc3_bias"}
    resumed = rm.mod.Module.load(prefix, 2, load_optimizer_states=True, workers=2)
    close_modules(resumed)
    with pytest.warns(UserWarning, match="already initialized"):  # loaded, kept as is
        assert_close(uninterrupted, fit(resumed, 2, 4), 1e-5)
    # and the same files continue in one process, whose local updater indexes states by
    # position rather than by name
    local = rm.mod.Module.load(prefix, 2, load_optimizer_states=True)
    with pytest.warns(UserWarning, match="already initialized"):
        assert_close(uninterrupted, fit(local, 2, 4, kvstore="local"), 1e-5)
    assert local._kvstore is None and set(local._updater.states) == set(range(6))


def test_monitor_collects_on_the_workers(tmp_path, close_modules):
    # the statistic runs inside the worker actors: it leaves its trace in a file
    trace = tmp_path / "stats.txt"

    def record(array):
        with open(trace, "a") as f:
            f.write(f"{array.shape}\n")
        return float(np.abs(array).mean())

    x, y = data((20,), n=120)
    mod = rm.mod.Module(mlp(), workers=2)
    close_modules(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=60), num_epoch=1,
            monitor=rm.mon.Monitor(1, record, pattern=".*output"))
    lines = trace.read_text().splitlines()
    # 2 steps, each slice's forward reports every op output matching the pattern
    assert len(lines) >= 2 * 3, lines


def test_epoch_end_sync_skipped_when_workers_hold_the_servers_values(close_modules):
    """MXNet's fit calls set_params(get_params()) at every epoch's end; on workers whose
    servers run the optimizer (no auxiliary states) it would write the servers' own values
    back, so it is skipped, except for a subclass with its own set_params."""
    x, y = data((20,), n=240)
    writes = []

    def look(param):  # the kvstore's direct writes as each batch ends
        writes.append(param.locals["self"]._kvstore.writes)

    calls = []

    class Counting(rm.mod.Module):
        def set_params(self, *args, **kwargs):
            calls.append(self._kvstore is not None)
            super().set_params(*args, **kwargs)

    for cls in (rm.mod.Module, Counting):
        rm.random.seed(7)
        mod = cls(mlp(), workers=2)
        close_modules(mod)
        mod.fit(rm.io.NDArrayIter(x, y, batch_size=60), num_epoch=3, batch_end_callback=look,
                initializer=rm.init.Xavier(), optimizer_params={"learning_rate": 0.1})
        if cls is rm.mod.Module:
            assert len(set(writes)) == 1, writes  # nothing written after the set-up
    assert calls.count(True) == 3  # the subclass: once per epoch's end, as in MXNet
