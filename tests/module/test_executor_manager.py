"""rm.executor_manager: MXNet's legacy data-parallel manager over the executor group."""
from types import SimpleNamespace

import numpy as np
import pytest

import raymod as rm
from raymod import executor_manager as em
from raymod.io import DataBatch, DataDesc
from raymod.model import _create_kvstore, _initialize_kvstore, _update_params_on_kvstore

CTX = [rm.cpu(0), rm.cpu(1)]


def _net():
    fc = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3, name="fc")
    return rm.sym.SoftmaxOutput(fc, name="softmax")


def _source(batch=8, features=5):
    return SimpleNamespace(batch_size=batch,
                           provide_data=[DataDesc("data", (batch, features))],
                           provide_label=[DataDesc("softmax_label", (batch,))])


def _manager(net=None, work_load_list=None, batch=8, **kw):
    net = net or _net()
    args = net.list_arguments()
    params = [a for a in args if a not in ("data", "softmax_label")]
    return em.DataParallelExecutorManager(net, CTX, _source(batch), args, params,
                                          net.list_auxiliary_states(),
                                          work_load_list=work_load_list, **kw)


def _xy(batch=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, 5)).astype(np.float32)
    return x, rng.integers(0, 3, batch).astype(np.float32)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# values MXNet 1.9.1's executor_manager._split_input_slice gives
@pytest.mark.parametrize("batch, loads, expected", [
    (7, [1, 1], [(0, 4), (4, 7)]),
    (10, [1, 2, 2], [(0, 2), (2, 6), (6, 10)]),
    (9, [0.5, 0.5, 1], [(0, 2), (2, 4), (4, 9)]),
])
def test_split_input_slice(batch, loads, expected):
    assert [(s.start, s.stop) for s in em._split_input_slice(batch, loads)] == expected


def test_split_input_slice_refuses_empty_splits():
    with pytest.raises(ValueError, match="Too many slices"):
        em._split_input_slice(3, [1, 1, 1, 1])


def test_check_arguments_names_the_duplicate():
    data = rm.sym.Variable("data")
    twice = (rm.sym.FullyConnected(data, num_hidden=2, name="fc") +
             rm.sym.FullyConnected(data, num_hidden=2, name="fc"))
    with pytest.raises(ValueError, match="duplicated argument name 'fc_weight'"):
        em._check_arguments(twice)
    em._check_arguments(_net())


def test_load_data_cuts_rows_per_device_and_checks_the_batch():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = [np.zeros((2, 2), np.float32), np.zeros((4, 2), np.float32)]
    whole = np.zeros(3, np.float32)
    em._load_data(DataBatch([x]), [[(slice(0, 2), parts[0]), (slice(2, 6), parts[1])]])
    np.testing.assert_array_equal(parts[0], x[:2])
    np.testing.assert_array_equal(parts[1], x[2:])
    em._load_label(DataBatch([x], [np.array([1, 2, 3], np.float32)]), [whole])
    np.testing.assert_array_equal(whole, [1, 2, 3])
    with pytest.raises(ValueError, match="batch size mismatch, expected 6 rows, got 5"):
        em._load_data(DataBatch([x[:5]]), [[(slice(0, 2), parts[0]), (slice(2, 6), parts[1])]])


def test_forward_backward_and_copy_to_against_hand_formulas():
    mgr = _manager(work_load_list=[1, 3])
    assert [(s.start, s.stop) for s in mgr.slices] == [(0, 2), (2, 8)]
    assert [e.arg_dict["data"].shape for e in mgr.execgrp.train_execs] == [(2, 5), (6, 5)]
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    mgr.set_params({"fc_weight": w, "fc_bias": b}, {})
    x, y = _xy()
    mgr.load_data_batch(DataBatch([x], [y]))
    mgr.forward(is_train=True)
    mgr.backward()
    p = _softmax(x @ w.T + b)
    for exe, part in zip(mgr.execgrp.train_execs, mgr.slices):
        np.testing.assert_allclose(exe.outputs[0], p[part], rtol=1e-5, atol=1e-6)
    # SoftmaxOutput's gradient is softmax - onehot per row; each device holds its rows' sum
    g = p.copy()
    g[np.arange(8), y.astype(int)] -= 1
    names = mgr.param_names
    grads = dict(zip(names, mgr.grad_arrays))
    for k, part in enumerate(mgr.slices):
        np.testing.assert_allclose(grads["fc_weight"][k], g[part].T @ x[part], rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(grads["fc_bias"][k], g[part].sum(axis=0), rtol=1e-5,
                                   atol=1e-6)
    acc = rm.metric.create("acc")
    mgr.update_metric(acc, [y])
    assert acc.get()[1] == pytest.approx(float((p.argmax(axis=1) == y).mean()))
    pre = rm.metric.create("acc")
    mgr.update_metric(pre, [[y[part]] for part in mgr.slices], pre_sliced=True)
    assert pre.get() == acc.get()
    # copy_to: the device average, in place, in the target's dtype
    mgr.param_arrays[0][0][...] = 1.0
    mgr.param_arrays[0][1][...] = 3.0
    target = {"fc_weight": np.zeros((3, 5), np.float64), "fc_bias": np.zeros(3, np.float32)}
    before = target["fc_weight"]
    mgr.copy_to(target, {})
    assert target["fc_weight"] is before
    np.testing.assert_array_equal(target["fc_weight"], 2.0)
    np.testing.assert_allclose(target["fc_bias"], b)


def test_manager_trains_to_the_module_params():
    steps, lr = 6, 0.2
    rng = np.random.default_rng(3)
    start = {"fc_weight": rng.standard_normal((3, 5)).astype(np.float32),
             "fc_bias": np.zeros(3, np.float32)}
    batches = [DataBatch(*map(lambda a: [a], _xy(seed=s))) for s in range(steps)]

    mod = rm.mod.Module(_net(), context=CTX)
    mod.bind(_source().provide_data, _source().provide_label)
    mod.init_params(arg_params={k: v.copy() for k, v in start.items()})
    mod.init_optimizer(kvstore="local", optimizer_params={"learning_rate": lr,
                                                          "momentum": 0.9})
    for batch in batches:
        mod.forward_backward(batch)
        mod.update()

    mgr = _manager()
    mgr.set_params(start, {})
    arg_params = {k: v.copy() for k, v in start.items()}
    kv, on_kvstore = _create_kvstore("local", len(CTX), arg_params)
    assert on_kvstore
    kv.set_optimizer(rm.optimizer.create("sgd", learning_rate=lr, momentum=0.9,
                                         rescale_grad=1.0 / 8))
    _initialize_kvstore(kv, mgr.param_arrays, arg_params, mgr.param_names, on_kvstore)
    for batch in batches:
        mgr.load_data_batch(batch)
        mgr.forward(is_train=True)
        mgr.backward()
        _update_params_on_kvstore(mgr.param_arrays, mgr.grad_arrays, kv, mgr.param_names)
    mgr.copy_to(arg_params, {})
    expected = mod.get_params()[0]
    for name in expected:
        np.testing.assert_allclose(arg_params[name], expected[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def _bucket_net(length):
    data = rm.sym.Variable("data")
    pooled = rm.sym.sum(data, axis=1)
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(pooled, num_hidden=3, name="fc"),
                                name="softmax")


def test_sym_gen_buckets_share_parameters():
    src = SimpleNamespace(batch_size=4, default_bucket_key=5,
                          provide_data=[DataDesc("data", (4, 5, 2))],
                          provide_label=[DataDesc("softmax_label", (4,))])
    net = _bucket_net(5)
    mgr = em.DataParallelExecutorManager(net, CTX, src, net.list_arguments(),
                                         ["fc_weight", "fc_bias"], [], sym_gen=_bucket_net)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    mgr.set_params({"fc_weight": w, "fc_bias": np.zeros(3, np.float32)}, {})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    y = np.array([0, 1, 2, 0], np.float32)
    batch = DataBatch([x], [y], bucket_key=3, provide_data=[DataDesc("data", (4, 3, 2))],
                      provide_label=[DataDesc("softmax_label", (4,))])
    mgr.load_data_batch(batch)
    assert mgr.curr_execgrp is mgr.execgrp_bucket[3] and len(mgr.execgrp_bucket) == 2
    for own, default in zip(mgr.curr_execgrp.param_arrays, mgr.execgrp.param_arrays):
        assert all(a is b for a, b in zip(own, default))
    mgr.forward(is_train=False)
    out = np.concatenate([e.outputs[0] for e in mgr.curr_execgrp.train_execs])
    np.testing.assert_allclose(out, _softmax(x.sum(axis=1) @ w.T), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="not supported with sym_gen"):
        mgr.install_monitor(rm.mon.Monitor(1))


def test_install_monitor_and_argument_errors():
    mgr = _manager()
    mon = rm.mon.Monitor(1, pattern="fc.*")
    mgr.install_monitor(mon)
    mgr.set_params({"fc_weight": np.ones((3, 5), np.float32),
                    "fc_bias": np.zeros(3, np.float32)}, {})
    mon.tic()
    x, y = _xy()
    mgr.load_data_batch(DataBatch([x], [y]))
    mgr.forward()
    names = {name for _, name, _ in mon.toc()}
    assert any(n.startswith("fc") for n in names)
    with pytest.raises(ValueError, match=r"work_load_list must be a list with one entry per "
                                         r"context \(2\), got \[1\]"):
        _manager(work_load_list=[1])
    with pytest.raises(RuntimeError, match="forward needs load_data_batch first"):
        _manager().forward()
