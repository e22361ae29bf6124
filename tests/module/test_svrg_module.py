"""SVRGModule: the snapshot module, full gradients, the SVRG step, fit, checkpoints, quality.

Follows MXNet 1.9.1's test_contrib_svrg_module.py (spec section 5), including the tests
skipped upstream, and checks that the full gradient is recomputed from scratch (MXNet's
accumulator is not cleared between refreshes).
"""
import time

import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch, NDArrayIter
from raymod.module import Module, StageError
from raymod.module.fit_checkpoint import FitCheckpointer
from raymod.module.svrg_module import FullGradPartial, SVRGModule
from raymod.optimizer import SGD
from raymod.optimizer.svrg import FULL_GRAD_PREFIX, _SVRGOptimizer, full_grad_key

TWO = [rm.cpu(0), rm.cpu(1)]
LABEL = "lin_reg_label"


def _net(num_hidden=1):
    fc = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=num_hidden, name="fc")
    return rm.sym.LinearRegressionOutput(fc, rm.sym.Variable(LABEL), name="lro")


def _data(rows=45, cols=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = (x @ np.arange(1, cols + 1) + 0.3 * rng.standard_normal(rows)).astype(np.float32)
    return x, y


def _iter(x, y, batch=10, shuffle=False):
    return NDArrayIter(x, y, batch_size=batch, shuffle=shuffle, label_name=LABEL, seed=0)


def _module(context=rm.cpu(), batch=10, cols=3, lr=0.1, kvstore="local", **opt_params):
    """A bound, initialized SVRGModule with an optimizer."""
    mod = SVRGModule(_net(), label_names=[LABEL], context=context, update_freq=2)
    mod.bind([("data", (batch, cols))], [(LABEL, (batch,))])
    mod.init_params(initializer=rm.init.Uniform(0.5))
    mod.init_optimizer(kvstore=kvstore, optimizer_params={"learning_rate": lr, **opt_params})
    return mod


def _batch_grads(params, x, y):
    """Summed LinearRegressionOutput gradients of one batch, with a plain executor."""
    ex = _net().simple_bind(rm.cpu(), data=x.shape, **{LABEL: y.shape})
    ex.copy_params_from(params)
    ex.forward(is_train=True, data=x, **{LABEL: y})
    ex.backward()
    return {k: ex.grad_dict[k].copy() for k in params}


def _fresh_mean(params, x, y, batch=10):
    """Mean over batches (padding counted as MXNet does) of each batch's summed gradient."""
    sums, count = None, 0.0
    for batch_ in _iter(x, y, batch):
        g = _batch_grads(params, batch_.data[0], batch_.label[0])
        sums = g if sums is None else {k: sums[k] + g[k] for k in g}
        count += 1 - (batch_.pad or 0) / batch
    return {k: v / count for k, v in sums.items()}


def _copy(params):
    return {k: v.copy() for k, v in params.items()}


# ---- construction and binding -----------------------------------------------------------------

@pytest.mark.parametrize("freq, error", [(None, TypeError), (1.5, TypeError), ("2", TypeError),
                                         (True, TypeError), (0, ValueError), (-3, ValueError)])
def test_update_freq_must_be_a_positive_int_checked_first(freq, error):
    with pytest.raises(error, match=f"update_freq.*{freq}"):
        SVRGModule("not a symbol", update_freq=freq)  # the symbol is never looked at


def test_aux_module_exists_after_construction_and_bind_binds_both():
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2)
    assert isinstance(mod._mod_aux, Module) and not mod._mod_aux.binded
    assert mod.update_freq == 2
    mod.bind([("data", (10, 3))], [(LABEL, (10,))])
    assert mod.binded and mod._mod_aux.binded


def test_bind_with_bad_shapes_is_a_type_error_and_both_stay_unbound():
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2)
    with pytest.raises(TypeError):
        mod.bind([("data", np.ones((10, 3)))], [(LABEL, (10,))])
    assert not mod.binded and not mod._mod_aux.binded


def test_inference_bind_leaves_the_snapshot_module_unbound():
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=1)
    mod.bind([("data", (5, 3))], [(LABEL, (5,))], for_training=False)
    mod.init_params()
    assert not mod._mod_aux.binded
    assert mod.predict(np.ones((5, 3), np.float32)).shape == (5, 1)


def test_reserved_names_and_compression_are_refused():
    w = rm.sym.Variable(FULL_GRAD_PREFIX + "w")
    net = rm.sym.LinearRegressionOutput(
        rm.sym.FullyConnected(rm.sym.Variable("data"), weight=w, num_hidden=1, no_bias=True),
        rm.sym.Variable(LABEL))
    with pytest.raises(ValueError, match="reserved"):
        SVRGModule(net, label_names=[LABEL], update_freq=1)
    with pytest.raises(ValueError, match="compression"):
        SVRGModule(_net(), label_names=[LABEL], update_freq=1,
                   compression_params={"type": "2bit", "threshold": 0.5})


# ---- optimizer --------------------------------------------------------------------------------

def test_init_optimizer_installs_the_svrg_wrapper_around_modules_optimizer():
    mod = _module(batch=10, lr=0.25)
    svrg = mod._optimizer
    assert isinstance(svrg, _SVRGOptimizer) and isinstance(svrg.default_opt, SGD)
    assert svrg.lr == 0.25 and svrg.rescale_grad == pytest.approx(0.1)
    assert svrg.idx2name == dict(enumerate(mod._exec_group.param_names))
    mod.init_optimizer(optimizer=SGD(learning_rate=0.5, rescale_grad=0.1), force_init=True)
    assert mod._optimizer.default_opt.lr == 0.5


def test_two_devices_get_full_gradient_keys_in_the_kvstore():
    mod = _module(TWO)
    assert mod._update_on_kvstore
    out = np.zeros((1, 3), np.float32)
    mod._kvstore.pull(full_grad_key("fc_weight"), out=out)  # initialised (to zeros)
    np.testing.assert_array_equal(out, 0)


def test_accumulate_kvstore_sums_devices_and_gives_each_its_share():
    mod = _module(TWO)
    values = [np.ones((1, 3), np.float32), np.full((1, 3), 3, np.float32)]
    shares = mod._accumulate_kvstore("fc_weight", values)
    np.testing.assert_array_equal(values[0], 4)  # pulled total
    for share in shares:
        np.testing.assert_array_equal(share, 2)  # total / num_devices, summed again on update


# ---- full gradients ---------------------------------------------------------------------------

def test_update_full_grads_is_the_mean_of_batch_summed_gradients_at_the_snapshot():
    x, y = _data(45)  # 5 batches of 10, the last padded by 5: count 4.5
    mod = _module()
    params = _copy(mod.get_params()[0])
    mod.update_full_grads(_iter(x, y))
    expected = _fresh_mean(params, x, y)
    for name in params:
        np.testing.assert_allclose(mod._param_dict[0][name], expected[name], rtol=1e-5)
        np.testing.assert_array_equal(mod._mod_aux.get_params()[0][name], params[name])


def test_second_refresh_is_a_fresh_mean_not_mxnets_stale_accumulation():
    x, y = _data(45)
    mod, it = _module(lr=0.05), _iter(x, y)
    mod.update_full_grads(it)
    first = _copy(mod._param_dict[0])
    it.reset()
    for batch in it:
        mod.forward_backward(batch)
        mod.update()
    params = _copy(mod.get_params()[0])
    mod.update_full_grads(it)
    fresh = _fresh_mean(params, x, y)
    for name in params:
        np.testing.assert_allclose(mod._param_dict[0][name], fresh[name], rtol=1e-5, atol=1e-6)
        stale = fresh[name] + first[name] / 4.5  # what MXNet 1.9.1 stores
        assert np.abs(stale - mod._param_dict[0][name]).max() > 1e-2
    np.testing.assert_array_equal(mod._mod_aux.get_params()[0]["fc_weight"],
                                  params["fc_weight"])


def test_partials_over_parts_of_the_data_combine_to_the_whole_pass():
    x, y = _data(45)
    mod = _module()
    mod.update_full_grads(_iter(x, y))
    whole = _copy(mod._param_dict[0])
    batches = list(_iter(x, y))
    parts = [mod._full_grad_partial(batches[:2]), mod._full_grad_partial(batches[2:])]
    combined = SVRGModule._combine_full_grad_partials(parts)
    assert combined.count == 4.5 and (FullGradPartial() + parts[0]).count == parts[0].count
    mod._set_full_grads(combined)
    for name, value in whole.items():
        np.testing.assert_allclose(mod._param_dict[0][name], value, rtol=1e-5)
    with pytest.raises(ValueError, match="no batches"):
        mod._set_full_grads(FullGradPartial())


def test_two_devices_share_mu_so_that_their_sum_is_mu():
    x, y = _data(45)
    one, two = _module(), _module(TWO)
    two.set_params(*one.get_params())
    one.update_full_grads(_iter(x, y))
    two.update_full_grads(_iter(x, y))
    for name, mu in one._param_dict[0].items():
        np.testing.assert_allclose(two._param_dict[0][name] + two._param_dict[1][name], mu,
                                   rtol=1e-5)


# ---- the SVRG step ----------------------------------------------------------------------------

def _svrg_step_by_hand(params, snapshot, mu, x, y, lr):
    g_w, g_snap = _batch_grads(params, x, y), _batch_grads(snapshot, x, y)
    return {k: params[k] - lr / len(x) * (g_w[k] - g_snap[k] + mu[k]) for k in params}


@pytest.mark.parametrize("context, on_kvstore", [([rm.cpu()], "1"), (TWO, "1"), (TWO, "0")],
                         ids=["1dev-local-updater", "2dev-kvstore", "2dev-device-updater"])
def test_update_follows_the_svrg_rule(context, on_kvstore, monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", on_kvstore)
    x, y = _data(40)
    mod, it = _module(context, lr=0.1), _iter(x, y)
    snapshot = _copy(mod.get_params()[0])
    mod.update_full_grads(it)
    mu = _fresh_mean(snapshot, x, y)
    it.reset()
    batches = list(it)
    mod.forward_backward(batches[0])
    mod.update()  # w == w~ here: the step is mu alone
    params = _copy(mod.get_params()[0])
    for name, value in _svrg_step_by_hand(snapshot, snapshot, mu, *_xy(batches[0]), 0.1).items():
        np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-6)
    mod.forward_backward(batches[1])
    mod.update()
    expected = _svrg_step_by_hand(params, snapshot, mu, *_xy(batches[1]), 0.1)
    for name, value in mod.get_params()[0].items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-5, atol=1e-6)


def _xy(batch):
    return batch.data[0], batch.label[0]


def test_training_forward_needs_snapshot_parameters_and_update_repeats_the_rule():
    x, y = _data(20)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=1)
    mod.bind([("data", (10, 3))], [(LABEL, (10,))])
    mod.init_params()
    with pytest.raises(StageError, match="init_optimizer before update_full_grads"):
        mod.update_full_grads(_iter(x, y))
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1})
    batch = DataBatch([x[:10]], [y[:10]])
    with pytest.raises(StageError, match="snapshot module has no parameters.*update_full_grads"):
        mod.forward_backward(batch)
    mod.forward(batch, is_train=False)  # inference needs no snapshot
    mod.update_full_grads(_iter(x, y))
    mod.forward_backward(batch)
    g = _copy(dict(zip(mod._exec_group.param_names,
                       (a[0] for a in mod._exec_group.grad_arrays))))
    snap = _copy(dict(zip(mod._exec_group.param_names,
                          (a[0] for a in mod._mod_aux._exec_group.grad_arrays))))
    mu, w = _copy(mod._param_dict[0]), _copy(mod.get_params()[0])
    mod.update()
    mod.update()  # as MXNet: the rule is applied in place again, on the rewritten gradient
    for name, value in mod.get_params()[0].items():
        first = g[name] - snap[name] + mu[name]
        second = first - snap[name] + mu[name]
        np.testing.assert_allclose(value, w[name] - 0.01 * (first + second), rtol=1e-5,
                                   atol=1e-6)


def test_fixed_parameters_get_no_full_gradient_and_stay():
    x, y = _data(20)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=1, fixed_param_names=["fc_bias"])
    it = _iter(x, y)
    mod.fit(it, eval_metric="mse", num_epoch=2, optimizer_params={"learning_rate": 0.1},
            arg_params={"fc_bias": np.full(1, 0.5, np.float32)}, allow_missing=True)
    assert set(mod._param_dict[0]) == {"fc_weight"}
    np.testing.assert_array_equal(mod.get_params()[0]["fc_bias"], 0.5)


# ---- reshape, prepare, checkpoints ------------------------------------------------------------

def test_reshape_on_two_devices_reshapes_both_and_keeps_rescale_grad():
    x, y = _data(40, cols=20)
    mod = _module(TWO, batch=7, cols=20, lr=1.0)
    mod.update_full_grads(_iter(x[:21], y[:21], batch=7))
    mod.forward_backward(DataBatch([x[:7]], [y[:7]]))
    mod.update()
    assert mod.get_outputs()[0].shape == (7, 1)
    mod.reshape([("data", (14, 20))], [(LABEL, (14,))])
    assert mod._exec_group.batch_size == mod._mod_aux._exec_group.batch_size == 14
    mod.forward_backward(DataBatch([x[:14]], [y[:14]]))
    mod.update()
    assert mod.get_outputs()[0].shape == (14, 1)
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 7)


def test_prepare_reaches_both_modules():
    mod = _module()
    calls = []
    mod._mod_aux.prepare = lambda batch, sparse_row_id_fn=None: calls.append(batch)
    mod.prepare("batch")
    assert calls == ["batch"]


@pytest.mark.parametrize("context", [[rm.cpu()], TWO], ids=["1dev", "2dev"])
def test_checkpoint_with_optimizer_states_round_trips(tmp_path, context):
    x, y = _data(40)
    mod = SVRGModule(_net(), label_names=[LABEL], context=context, update_freq=2)
    mod.fit(_iter(x, y), eval_metric="mse", num_epoch=2,
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    prefix = str(tmp_path / "svrg")
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    loaded = SVRGModule.load(prefix, 2, load_optimizer_states=True, label_names=[LABEL],
                             context=context, update_freq=3)
    assert isinstance(loaded, SVRGModule) and loaded.update_freq == 3
    loaded.bind([("data", (10, 3))], [(LABEL, (10,))])
    loaded.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    assert loaded.symbol.tojson() == mod.symbol.tojson()
    for name, value in mod.get_params()[0].items():
        np.testing.assert_array_equal(loaded.get_params()[0][name], value)
    saved = mod._kvstore._updater if mod._update_on_kvstore else mod._updater
    restored = loaded._kvstore._updater if loaded._update_on_kvstore else loaded._updater
    assert set(saved.states) == set(restored.states)
    for key, state in saved.states.items():
        if state is not None:
            np.testing.assert_array_equal(np.asarray(restored.states[key]), state)
    assert restored.optimizer.default_opt.num_update == saved.optimizer.default_opt.num_update
    mod.save_checkpoint(prefix, 3)
    with pytest.raises(FileNotFoundError, match="optimizer states"):
        SVRGModule.load(prefix, 3, load_optimizer_states=True, label_names=[LABEL],
                        update_freq=1)


# ---- fit ----------------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:Parameters already initialized")
def test_fit_refreshes_full_gradients_every_update_freq_epochs():
    x, y = _data(20)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2)
    refreshed = []
    original = mod.update_full_grads
    mod.update_full_grads = lambda data: (refreshed.append(len(refreshed)), original(data))
    epochs = []
    mod.fit(_iter(x, y), eval_metric="mse", num_epoch=5,
            batch_end_callback=lambda p: epochs.append((p.epoch, len(refreshed))))
    assert [n for e, n in epochs if e == 0] == [1, 1] and epochs[-1] == (4, 3)  # 0, 2, 4
    refreshed.clear()
    mod.fit(_iter(x, y), eval_metric="mse", begin_epoch=3, num_epoch=5, force_init=True)
    assert len(refreshed) == 1  # epoch 4 only: mu from the first fit is still there
    mod.init_optimizer(force_init=True)  # clears mu
    mod.fit(_iter(x, y), eval_metric="mse", begin_epoch=3, num_epoch=4)
    assert len(refreshed) == 2  # epoch 3: no full gradient yet


def test_fit_learns_y_equals_x_dot_1_2():
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (200, 2)).astype(np.float32)
    y = (x @ np.array([1.0, 2.0])).astype(np.float32)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2)
    mod.fit(_iter(x, y, batch=20, shuffle=True), eval_metric="mse", num_epoch=100,
            optimizer="sgd", optimizer_params={"learning_rate": 0.025})
    pred = mod.predict(_iter(x, y, batch=20))
    assert float(np.mean((pred[:, 0] - y) ** 2)) < 1e-5


# ---- quality: SVRG against SGD on noisy least squares -------------------------------------------

def _least_squares_problem(rows=20000, cols=90, noise=0.4, seed=0):
    """y = X w* + noise with correlated columns: X = Z L, L^T L = Q diag(eig) Q^T + 0.1 * 11^T
    (random rotation Q, eig in [0.3, 1.5], a shared factor): pairwise correlations around
    0.1 (up to ~0.3), Hessian eigenvalues ~0.3 to ~10, so lr 0.025 is stable for SGD."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((cols, cols)))
    cov = (q * np.geomspace(0.3, 1.5, cols)) @ q.T + 0.1 * np.ones((cols, cols))
    x = (rng.standard_normal((rows, cols)) @ np.linalg.cholesky(cov).T).astype(np.float32)
    y = (x @ rng.standard_normal(cols) + noise * rng.standard_normal(rows)).astype(np.float32)
    return x, y


def _excess_mse(mod, x1, best):
    """MSE(w) - MSE(w_ls) = ||X_1 (w - w_ls)||^2 / n, exact at the least-squares optimum."""
    arg = mod.get_params()[0]
    w = np.concatenate([arg["fc_weight"].ravel(), arg["fc_bias"].ravel()]).astype(np.float64)
    diff = x1 @ (w - best)
    return float(diff @ diff) / len(x1)


def test_svrg_ends_far_below_sgd_at_the_same_learning_rate():
    x, y = _least_squares_problem()
    x1 = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])  # with the bias column
    # lstsq on the normal equations (cond(X)^2 = 16 here): the same optimum, far faster
    best = np.linalg.lstsq(x1.T @ x1, x1.T @ y.astype(np.float64), rcond=None)[0]
    excess = {}
    for name, make in (("svrg", lambda: SVRGModule(_net(), label_names=[LABEL], update_freq=2)),
                       ("sgd", lambda: Module(_net(), label_names=[LABEL]))):
        rm.random.seed(0)
        mod = make()
        mod.fit(_iter(x, y, batch=100, shuffle=True), eval_metric="mse", num_epoch=10,
                optimizer="sgd", optimizer_params={"learning_rate": 0.025})
        excess[name] = _excess_mse(mod, x1, best)
    assert excess["svrg"] * 100 <= excess["sgd"], excess
    assert excess["svrg"] < 1e-7 and excess["sgd"] > 1e-4, excess


# ---- on Ray workers -----------------------------------------------------------------------------

def _fit_svrg(x, y, workers, epochs, close, batch=100, lr=0.025, metric="mse"):
    rm.random.seed(0)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2, workers=workers)
    if workers:
        close(mod)
    mod.fit(_iter(x, y, batch=batch, shuffle=True), eval_metric=metric, num_epoch=epochs,
            optimizer="sgd", optimizer_params={"learning_rate": lr})
    return mod


@pytest.mark.ray
def test_on_two_workers_matches_one_process(ray_cluster, close_modules):
    x, y = _least_squares_problem(rows=2000, cols=12)
    metrics = [rm.metric.MSE(), rm.metric.MSE()]
    mods = [_fit_svrg(x, y, w, 4, close_modules, metric=m) for w, m in zip((None, 2), metrics)]
    # the training metric sees the outputs at w, not at the snapshot
    assert metrics[1].get()[1] == pytest.approx(metrics[0].get()[1], rel=1e-4)
    (a, _), (b, _) = (m.get_params() for m in mods)
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5 * np.abs(a[name]).max(),
                                   err_msg=name)
    full_a, full_b = mods[0]._param_dict[0], mods[1]._param_dict[0]
    scale = max(np.abs(v).max() for v in full_a.values())
    for name in full_b:  # the last full gradient, summed on the workers (in float64)
        np.testing.assert_allclose(full_b[name], full_a[name], atol=1e-5 * scale, err_msg=name)


@pytest.mark.ray
def test_on_two_workers_ends_far_below_sgd(ray_cluster, close_modules):
    x, y = _least_squares_problem()
    x1 = np.hstack([x.astype(np.float64), np.ones((len(x), 1))])
    best = np.linalg.lstsq(x1.T @ x1, x1.T @ y.astype(np.float64), rcond=None)[0]
    svrg = _excess_mse(_fit_svrg(x, y, 2, 10, close_modules), x1, best)
    rm.random.seed(0)
    sgd = Module(_net(), label_names=[LABEL])
    sgd.fit(_iter(x, y, batch=100, shuffle=True), eval_metric="mse", num_epoch=10,
            optimizer="sgd", optimizer_params={"learning_rate": 0.025})
    assert svrg * 100 <= _excess_mse(sgd, x1, best) and svrg < 1e-7


def _assert_same_svrg_run(reference, got):
    """The same last full gradient mu and the same parameters as the reference run."""
    for name, mu in reference._param_dict[0].items():
        np.testing.assert_allclose(got._param_dict[0][name], mu, rtol=1e-6, atol=1e-9,
                                   err_msg=name)
    a, b = reference.get_params()[0], got.get_params()[0]
    for name in a:
        np.testing.assert_allclose(b[name], a[name], atol=1e-5 * np.abs(a[name]).max())


@pytest.mark.ray
def test_worker_killed_during_the_full_gradient_pass(ray_cluster, close_modules, monkeypatch):
    import ray
    from raymod.cluster.remote_group import RayExecutorGroup
    x, y = _least_squares_problem(rows=2000, cols=12)
    reference = _fit_svrg(x, y, rm.Workers(2, 3), 3, close_modules)
    original, killed = RayExecutorGroup._assign, []

    def assign_then_kill(group, tasks):
        plan = original(group, tasks)
        if not killed and len(tasks) == 2000 // 100:  # the full pass of whole batches
            rank = sorted(plan)[1]
            ray.kill(group.pool.workers[rank], no_restart=True)
            killed.append(rank)
        return plan

    monkeypatch.setattr(RayExecutorGroup, "_assign", assign_then_kill)
    got = _fit_svrg(x, y, rm.Workers(2, 3), 3, close_modules)
    assert killed
    _assert_same_svrg_run(reference, got)


@pytest.mark.ray
@pytest.mark.parametrize("when", ["pass", "mu"])
def test_server_lost_during_the_full_gradient_pass(ray_cluster, close_modules, monkeypatch,
                                                   when):
    """The KVServer dies as the second epoch's full-gradient pass starts ("pass") or when
    its mu is pushed ("mu"): the servers go back to the snapshot taken as the pass began,
    and the run ends where the run without the loss ends."""
    import ray
    from raymod.cluster.remote_group import RayExecutorGroup
    x, y = _least_squares_problem(rows=2000, cols=12)
    reference = _fit_svrg(x, y, 2, 3, close_modules)
    passes, killed = [], []

    def kill(group):
        if len(passes) == 2 and not killed:  # update_freq=2: the second pass (epoch 2)
            killed.append(group.state.kv.servers[0])
            ray.kill(killed[0], no_restart=True)
            # ray.kill returns before the actor is gone: wait, so that the very next call
            # (the pass's or mu's, not a later snapshot's) is the one that finds it dead
            for _ in range(200):
                try:
                    ray.get(killed[0].progress.remote(), timeout=5)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    break
                time.sleep(0.05)

    original_pass, original_mu = RayExecutorGroup._full_gradient, RayExecutorGroup.set_full_gradient

    def full_gradient(group, batches):
        passes.append(1)
        if when == "pass":
            kill(group)
        return original_pass(group, batches)

    def set_full_gradient(group, keys, means):
        if when == "mu":
            kill(group)
        return original_mu(group, keys, means)

    monkeypatch.setattr(RayExecutorGroup, "_full_gradient", full_gradient)
    monkeypatch.setattr(RayExecutorGroup, "set_full_gradient", set_full_gradient)
    got = _fit_svrg(x, y, 2, 3, close_modules)
    assert killed
    recovered = [e for e in got._pool.events if e["event"] == "kvserver_recovered"]
    assert [(e["during"], e["shards"]) for e in recovered] == [("full_gradient", [0])]
    _assert_same_svrg_run(reference, got)


class _DriverLost(Exception):
    """Stands for the driver dying: the module and everything in memory are dropped."""


def _fit_svrg_until(x, y, workers, epochs, close, path, stop_at=None, resume=False):
    """SVRG fit with a checkpoint every 7 steps; raises _DriverLost after step ``stop_at``."""
    rm.random.seed(0)
    mod = SVRGModule(_net(), label_names=[LABEL], update_freq=2, workers=workers)
    if workers:
        close(mod)
    steps = []

    def maybe_die(param):
        steps.append(1)
        if stop_at is not None and len(steps) == stop_at:
            raise _DriverLost()

    mod.fit(_iter(x, y, batch=100, shuffle=True), eval_metric="mse", num_epoch=epochs,
            optimizer="sgd", optimizer_params={"learning_rate": 0.025},
            batch_end_callback=maybe_die, resume=resume,
            checkpoint=rm.CheckpointConfig(str(path), every_n_steps=7))
    return mod


@pytest.mark.parametrize("workers", [None, pytest.param(2, marks=pytest.mark.ray)],
                         ids=["in_process", "2_workers"])
def test_resume_mid_epoch_keeps_the_snapshot_and_full_gradient(workers, tmp_path, request):
    close = request.getfixturevalue("close_modules")
    if workers:
        request.getfixturevalue("ray_cluster")
    x, y = _least_squares_problem(rows=1000, cols=12)  # 10 steps an epoch, update_freq 2
    reference = _fit_svrg_until(x, y, workers, 4, close, tmp_path / "ref")
    with pytest.raises(_DriverLost):  # dies at step 29: epoch 2, after the step-28 checkpoint
        _fit_svrg_until(x, y, workers, 4, close, tmp_path / "run", stop_at=29)
    got = _fit_svrg_until(x, y, workers, 4, close, tmp_path / "run", resume=True)
    # the checkpoint at step 28 (epoch 2, refreshed at 20) carried w~ and mu: no new pass
    saved = FitCheckpointer(rm.CheckpointConfig(str(tmp_path / "run"))).load_latest()
    assert any(k.startswith("snapshot:") for k in saved["extra"])
    a, b = reference.get_params()[0], got.get_params()[0]
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=0, atol=1e-5 * np.abs(a[name]).max(),
                                   err_msg=name)
    for name, mu in reference._param_dict[0].items():
        np.testing.assert_allclose(got._param_dict[0][name], mu, rtol=1e-6, atol=1e-9)
