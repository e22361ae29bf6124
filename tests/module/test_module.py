"""Module: lifecycle, bind/reshape, parameters, optimizer and kvstore choice, states, I/O.

Follows the behaviours of MXNet 1.9.1's tests/python/unittest/test_module.py (spec section 1).
"""
from collections import namedtuple

import numpy as np
import pytest

import raymod as rm
from raymod.base import MXNetError
from raymod.io import DataBatch, DataDesc, NDArrayIter
from raymod.module import BaseModule, Module, Stage, StageError

TWO = [rm.cpu(0), rm.cpu(1)]


def _fc(num_hidden=20, name="fc"):
    return rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=num_hidden, name=name)


def _mlp():
    x = rm.sym.Activation(_fc(8, "fc1"), act_type="tanh")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(x, num_hidden=3, name="fc2"),
                                name="softmax")


def _data(rows=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 5)).astype(np.float32)
    return x, x[:, :3].argmax(axis=1).astype(np.float32)


def _ready(net=None, context=rm.cpu(), batch=10, optimizer="sgd",
           optimizer_params=(("learning_rate", 0.01),)):
    """A bound, initialized module; with an optimizer unless ``optimizer`` is None."""
    mod = Module(net or _mlp(), context=context)
    mod.bind([("data", (batch, 5))], [("softmax_label", (batch,))])
    mod.init_params()
    if optimizer is not None:
        mod.init_optimizer(optimizer=optimizer, optimizer_params=optimizer_params)
    return mod


# ---- lifecycle -----------------------------------------------------------------------------

def test_flags_follow_one_stage():
    mod = Module(_mlp())
    assert mod.stage is Stage.CREATED
    assert (mod.binded, mod.params_initialized, mod.optimizer_initialized) == (False,) * 3
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    assert mod.stage is Stage.BOUND and mod.binded and mod.for_training
    mod.init_params()
    assert mod.stage is Stage.PARAMS_READY
    assert mod.output_shapes == [("softmax_output", (4, 3))]
    assert mod.output_names == ["softmax_output"] and mod.label_names == ["softmax_label"]
    mod.init_optimizer()
    assert mod.stage is Stage.OPTIMIZER_READY and mod.optimizer_initialized


def test_assigning_the_flags_moves_the_stage_as_mxnet_subclasses_expect():
    # MXNet subclasses (own bind, _reset_bind, load) assign the three flags
    mod = _ready()
    assert mod.stage is Stage.OPTIMIZER_READY
    mod._reset_bind()  # what bind(force_rebind=True) of such a subclass calls
    assert mod.stage is Stage.PARAMS_LOADED and not mod.binded
    assert mod.optimizer_initialized  # MXNet keeps the optimizer over a rebind
    with pytest.raises(StageError, match="call bind before forward"):
        mod.forward(DataBatch([np.ones((10, 5), np.float32)]))
    mod.binded = True
    assert mod.stage is Stage.OPTIMIZER_READY
    mod.optimizer_initialized = False
    assert mod.stage is Stage.PARAMS_READY
    mod.params_initialized = False
    assert mod.stage is Stage.BOUND
    fresh = Module(_mlp())
    with pytest.raises(StageError, match="call bind before setting optimizer_initialized"):
        fresh.optimizer_initialized = True
    assert fresh.stage is Stage.CREATED
    fresh.params_initialized = True
    assert fresh.stage is Stage.PARAMS_LOADED


@pytest.mark.parametrize("call, message", [
    (lambda m: m.forward(DataBatch([np.ones((4, 5), np.float32)])), "call bind before forward"),
    (lambda m: m.init_params(), "call bind before init_params"),
    (lambda m: m.get_params(), "call bind before get_params"),
    (lambda m: m.predict(np.ones((2, 5), np.float32)), "call bind before predict"),
])
def test_calls_before_bind_name_the_missing_call(call, message):
    with pytest.raises(StageError, match=message):
        call(Module(_mlp()))


def test_calls_before_init_params_and_init_optimizer_name_the_missing_call():
    mod = Module(_mlp())
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    with pytest.raises(StageError, match=r"call init_params \(or set_params\) before init_opt"):
        mod.init_optimizer()
    mod.init_params()
    with pytest.raises(StageError, match="call init_optimizer before update"):
        mod.update()
    with pytest.raises(StageError, match="inputs_need_grad=True"):
        mod.get_input_grads()


def test_repeated_setup_calls_warn_and_keep_state(caplog):
    mod = _ready()
    with pytest.warns(UserWarning, match="already initialized"):
        mod.init_params()
    mod.bind([("data", (3, 5))])
    assert mod.data_shapes[0].shape == (10, 5)
    assert "Already bound" in caplog.text


# ---- bind ----------------------------------------------------------------------------------

def test_bind_with_an_array_as_shape_is_a_type_error_and_stays_unbound():
    mod = Module(_fc(), label_names=None)
    with pytest.raises(TypeError, match="tuple of ints"):
        mod.bind([("data", np.array([10, 10]))])
    assert not mod.binded
    mod.bind([("data", (10, 10))])
    assert mod.binded


def test_bind_rejects_names_the_module_does_not_expect_before_changing_anything():
    mod = Module(_fc(), label_names=None)
    with pytest.raises(ValueError, match=r"provide \['x'\] but the module's data_names are "
                                         r"\['data'\]"):
        mod.bind([("x", (10, 10))])
    assert not mod.binded
    with pytest.raises(ValueError, match="'nope' is not an argument"):
        Module(_fc(), data_names=["nope"])
    with pytest.warns(UserWarning, match="softmax_label"):
        Module(_fc())


def test_failed_rebind_keeps_the_previous_binding():
    mod = _ready(optimizer_params=(("learning_rate", 0.1),))
    with pytest.raises(TypeError):
        mod.bind([("data", (2.5, 5))], force_rebind=True)
    assert mod.stage is Stage.OPTIMIZER_READY and mod.data_shapes[0].shape == (10, 5)


def test_float16_outputs_stay_float16_on_two_devices():
    net = rm.sym.Activation(rm.sym.Variable("data"), act_type="relu", __layout__="TNC")
    mod = Module(net, ("data",), None, context=TWO)
    dshape = (3, 8, 7)
    mod.bind(data_shapes=[DataDesc("data", dshape, np.float16, layout="TNC")])
    mod.init_params()
    mod.forward(DataBatch(data=[np.ones(dshape, np.float16)], label=None))
    mod.backward([np.ones(dshape, np.float16)])
    assert all(out.dtype == np.float16 for out in mod.get_outputs())


def test_layout_tnc_splits_the_batch_axis_over_two_devices():
    net = rm.sym.Activation(rm.sym.Variable("data"), act_type="relu", __layout__="TNC")
    mod = Module(net, ("data",), None, context=TWO)
    dshape = (3, 8, 7)
    mod.bind(data_shapes=[DataDesc("data", dshape, layout="TNC")])
    mod.init_params()
    mod.forward(DataBatch(data=[np.ones(dshape, np.float32)], label=None))
    mod.backward([np.ones(dshape, np.float32)])
    assert mod.get_outputs()[0].shape == dshape
    assert [x.shape for x in mod.get_outputs(merge_multi_context=False)[0]] == [(3, 4, 7)] * 2


def test_input_grads_come_in_data_names_order():
    a, b, c = (rm.sym.Variable(n, __layout__="NC") for n in "abc")
    net = Module(a + 2 * b + 3 * c, data_names=["b", "c", "a"], label_names=None, context=TWO)
    net.bind(data_shapes=[["b", (5, 5)], ["c", (5, 5)], ["a", (5, 5)]], label_shapes=None,
             inputs_need_grad=True)
    net.init_params()
    ones = np.ones((5, 5), np.float32)
    net.forward(data_batch=DataBatch(data=[ones, ones, ones]))
    net.backward(out_grads=[ones])
    b_grad, c_grad, a_grad = net.get_input_grads()
    assert (a_grad == 1).all() and (b_grad == 2).all() and (c_grad == 3).all()


def test_shared_module_shares_parameters_and_optimizer():
    first = _ready(context=TWO, batch=8)
    second = Module(_mlp(), context=TWO)
    second.bind([("data", (4, 5))], [("softmax_label", (4,))], shared_module=first)
    assert second.optimizer_initialized and second._updater is first._updater
    assert second._kvstore is first._kvstore
    assert all(x is y for a, b in zip(first._exec_group.param_arrays,
                                       second._exec_group.param_arrays) for x, y in zip(a, b))


# ---- reshape and implicit reshape ------------------------------------------------------------

def test_reshape_keeps_rescale_grad_from_the_bound_batch():
    mod = Module(_fc(), ("data",), None, context=TWO)
    mod.bind(data_shapes=[("data", (7, 20))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 1})
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 7)
    for rows, bias in ((7, -1), (14, -3)):
        if rows != 7:
            mod.reshape(data_shapes=[("data", (rows, 20))])
        mod.forward(DataBatch(data=[np.ones((rows, 20), np.float32)], label=None))
        mod.backward([np.ones((rows, 20), np.float32)])
        mod.update()
        assert mod.get_outputs()[0].shape == (rows, 20)
        np.testing.assert_allclose(mod.get_params()[0]["fc_bias"], bias, rtol=1e-6)


def _two_input_conv_net():
    d1, d2 = rm.sym.Variable("data1"), rm.sym.Variable("data2")
    p1 = rm.sym.Pooling(rm.sym.Convolution(d1, kernel=(2, 2), num_filter=2, stride=(2, 2)),
                        kernel=(2, 2), stride=(1, 1), pool_type="avg")
    p2 = rm.sym.Pooling(rm.sym.Convolution(d2, kernel=(3, 3), num_filter=3),
                        kernel=(2, 2), stride=(1, 1), pool_type="max")
    total = rm.sym.sum(rm.sym.flatten(p1), axis=1) + rm.sym.sum(rm.sym.flatten(p2), axis=1)
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(total, num_hidden=10), name="softmax")


def test_forward_reshapes_implicitly_then_score_and_predict_after_rebind():
    rng = np.random.default_rng(0)
    mod = Module(_two_input_conv_net(), data_names=["data1", "data2"])
    mod.bind([("data1", (10, 3, 16, 16)), ("data2", (10, 3, 8, 8))],
             [("softmax_label", (10,))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.01})
    for n, s1, s2 in [(10, (16, 16), (8, 8)), (3, (16, 16), (8, 8)), (20, (16, 16), (8, 8)),
                      (20, (24, 24), (8, 12)), (5, (12, 10), (10, 6))]:
        batch = DataBatch(data=[rng.uniform(0, 9, (n, 3) + s1).astype(np.float32),
                                rng.uniform(5, 15, (n, 3) + s2).astype(np.float32)],
                          label=[np.ones(n, np.float32)])
        mod.forward(batch)
        assert mod.get_outputs()[0].shape == (n, 10)
        mod.backward()
        mod.update()
    assert mod._optimizer.rescale_grad == pytest.approx(0.1)
    it = NDArrayIter([rng.uniform(0, 9, (30, 3, 10, 10)).astype(np.float32),
                      rng.uniform(15, 25, (30, 3, 8, 12)).astype(np.float32)],
                     [np.ones(30, np.float32)], batch_size=5)
    assert len(mod.score(it, "acc")) == 1
    with pytest.warns(UserWarning, match="label_shapes"):
        mod.bind([("data1", (1, 3, 10, 10)), ("data2", (1, 3, 8, 12))], for_training=False,
                 force_rebind=True)
    pred = NDArrayIter([rng.uniform(0, 9, (10, 3, 10, 10)).astype(np.float32),
                        rng.uniform(15, 25, (10, 3, 8, 12)).astype(np.float32)])
    assert mod.predict(pred).shape == (10, 10)


def test_implicit_reshape_keeps_bound_names_dtypes_and_parameters():
    mod = _ready(batch=4, optimizer=None)
    before = {k: v.copy() for k, v in mod._exec_group.execs[0].arg_dict.items()
              if k.startswith("fc")}
    x, y = _data(6)
    batch = next(iter(NDArrayIter({"_0_data": x.astype(np.float64)}, y, batch_size=6)))
    mod.forward(batch, is_train=False)
    assert mod.get_outputs()[0].shape == (6, 3) and mod.get_outputs()[0].dtype == np.float32
    assert mod.data_shapes == [("data", (6, 5))] and mod.output_shapes[0][1] == (6, 3)
    for k, v in before.items():
        np.testing.assert_array_equal(mod._exec_group.execs[0].arg_dict[k], v, err_msg=k)


def test_forward_takes_any_object_with_data_and_predict_takes_a_bare_array():
    mod = _ready(batch=4)
    Batch = namedtuple("Batch", ["data"])
    mod.forward(Batch([np.ones((1, 5), np.float32)]))
    assert mod.get_outputs()[0].shape == (1, 3)
    x, _ = _data(6)
    out = mod.predict(x)
    assert out.shape == (6, 3)
    np.testing.assert_allclose(out, mod.predict(NDArrayIter(x, batch_size=6)), rtol=1e-6)
    with pytest.raises(ValueError, match="2 data arrays"):
        mod.forward(DataBatch([x, x]))


def test_predict_strips_padding_and_can_keep_batches_apart():
    mod = _ready(batch=4)
    x, y = _data(10)
    it = NDArrayIter(x, y, batch_size=4)  # last batch: 2 padding rows
    merged = mod.predict(it)
    assert merged.shape == (10, 3)
    per_batch = mod.predict(it, merge_batches=False)
    assert [len(b) for b in per_batch] == [1, 1, 1]
    assert [b[0].shape[0] for b in per_batch] == [4, 4, 2]
    assert isinstance(mod.predict(it, always_output_list=True), list)
    assert mod.predict(it, num_batch=1).shape == (4, 3)
    got = [(outs[0].shape[0], i) for outs, i, _ in mod.iter_predict(it)]
    assert got == [(4, 0), (4, 1), (2, 2)]
    with pytest.raises(ValueError, match="DataIter or an array"):
        mod.predict([x])


def test_module_without_parameters_runs_update():
    net = rm.sym.Dropout(rm.sym.Variable("data"), p=0.5)
    mod = Module(net, label_names=None)
    mod.bind(data_shapes=[("data", (10, 10))])
    mod.init_params()
    mod.init_optimizer()
    mod.forward_backward(DataBatch([np.ones((10, 10), np.float32)]))
    mod.update()
    assert mod.get_outputs()[0].shape == (10, 10)
    assert mod.get_params() == ({}, {})


def test_module_without_parameters_on_two_devices_gets_a_kvstore():
    mod = Module(rm.sym.Dropout(rm.sym.Variable("data"), p=0.5), label_names=None, context=TWO)
    mod.bind(data_shapes=[("data", (4, 3))])
    mod.init_params()
    mod.init_optimizer()
    mod.forward_backward(DataBatch([np.ones((4, 3), np.float32)]))
    mod.update()


# ---- states --------------------------------------------------------------------------------

def test_state_names_are_set_by_set_states():
    stack = rm.rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(rm.rnn.LSTMCell(num_hidden=8, prefix="lstm_l%d_" % i))
    begin = stack.begin_state(func=rm.sym.Variable)
    _, states = stack.unroll(4, begin_state=begin, inputs=rm.sym.Variable("data"))
    mod = Module(rm.sym.Group(states), label_names=None, state_names=[s.name for s in begin])
    mod.bind(data_shapes=[("data", (5, 4))], label_shapes=None, for_training=False)
    mod.init_params()
    batch = DataBatch(data=[np.zeros((5, 4), np.float32)], label=[])
    mod.set_states(value=1)
    assert all((s == 1).all() for s in mod.get_states())
    mod.forward(batch)
    out = mod.get_outputs(merge_multi_context=False)
    out1 = mod.get_outputs()
    mod.set_states(states=out)
    mod.forward(batch)
    for x1, x2 in zip(out1, mod.get_outputs()):
        assert not np.allclose(x1, x2, rtol=1e-3)
    with pytest.raises(ValueError, match="exactly one"):
        mod.set_states()


# ---- parameters ------------------------------------------------------------------------------

def _set_params_module():
    x = rm.sym.Activation(_fc(2, "fc_0"), act_type="sigmoid")
    x = rm.sym.Activation(rm.sym.FullyConnected(x, num_hidden=2, name="fc_1"),
                          act_type="sigmoid")
    mod = Module(rm.sym.LinearRegressionOutput(x, name="softmax"), context=[rm.cpu()])
    mod.bind([("data", (1, 2))], [("softmax_label", (1, 2))])
    return mod


def test_set_params_missing_and_extra():
    mod = _set_params_module()
    f = np.float32
    correct = {"fc_0_weight": np.array([[.15, .20], [.25, .30]], f),
               "fc_0_bias": np.array([.35, .35], f),
               "fc_1_weight": np.array([[.40, .45], [.50, .55]], f),
               "fc_1_bias": np.array([.60, .60], f)}
    missing = {k: v for k, v in correct.items() if k != "fc_1_bias"}
    extra = dict(correct, fc_2_weight=np.array([.6, .6], f))
    missing_extra = dict(missing, fc_2_weight=np.array([.6, .6], f))
    mod.set_params(force_init=True, arg_params=correct, aux_params={})
    np.testing.assert_array_equal(mod.get_params()[0]["fc_1_weight"], correct["fc_1_weight"])
    mod.set_params(force_init=True, arg_params=missing, aux_params={}, allow_missing=True)
    with pytest.raises(RuntimeError, match="fc_1_bias"):
        mod.set_params(force_init=True, arg_params=missing, aux_params={}, allow_missing=False)
    mod.set_params(force_init=True, arg_params=extra, aux_params={}, allow_missing=True,
                   allow_extra=True)
    with pytest.raises(ValueError, match="fc_2_weight"):
        mod.set_params(force_init=True, arg_params=extra, aux_params={}, allow_missing=True)
    with pytest.raises(RuntimeError):  # missing is checked before extra
        mod.set_params(force_init=True, arg_params=missing_extra, aux_params={})
    with pytest.raises(ValueError):
        mod.set_params(force_init=True, arg_params=missing_extra, aux_params={},
                       allow_missing=True)
    np.testing.assert_array_equal(mod.get_params()[0]["fc_1_bias"], correct["fc_1_bias"])


def test_init_params_default_uniform_biases_zero_and_variable_init_wins():
    weight = rm.sym.Variable("fc_weight", init=rm.init.Constant(2.0))
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), weight=weight, num_hidden=3, name="fc")
    net = rm.sym.FullyConnected(net, num_hidden=2, name="out")
    mod = Module(net, label_names=None)
    mod.bind([("data", (2, 4))])
    mod.init_params(rm.init.Uniform(0.01))
    arg, _ = mod.get_params()
    assert (arg["fc_weight"] == 2).all() and (arg["fc_bias"] == 0).all()
    assert np.abs(arg["out_weight"]).max() <= 0.01 and arg["out_weight"].any()


def test_init_params_with_given_values_and_allow_missing():
    mod = Module(_mlp())
    mod.bind([("data", (2, 5))], [("softmax_label", (2,))])
    given = {"fc1_weight": np.full((8, 5), 0.5, np.float32)}
    with pytest.raises(RuntimeError, match="missing"):
        mod.init_params(arg_params=given)
    assert not mod.params_initialized
    mod.init_params(rm.init.One(), arg_params=given, allow_missing=True)
    arg, _ = mod.get_params()
    assert (arg["fc1_weight"] == 0.5).all() and (arg["fc2_weight"] == 1).all()
    with pytest.raises(MXNetError, match="shape"):
        mod.init_params(arg_params={**arg, "fc1_weight": np.zeros((2, 2), np.float32)},
                        force_init=True)


def test_fixed_params_are_not_updated():
    mod = Module(_mlp(), fixed_param_names=["fc1_weight"])
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 1.0})
    before = {k: v.copy() for k, v in mod.get_params()[0].items()}
    x, y = _data(4)
    mod.forward_backward(DataBatch([x], [y]))
    mod.update()
    after = mod.get_params()[0]
    assert np.array_equal(before["fc1_weight"], after["fc1_weight"])
    assert not np.array_equal(before["fc2_weight"], after["fc2_weight"])


def test_save_params_and_load_params(tmp_path):
    mod = _ready()
    mod.save_params(str(tmp_path / "p.params"))
    other = _ready()
    other.load_params(str(tmp_path / "p.params"))
    for k, v in mod.get_params()[0].items():
        np.testing.assert_array_equal(other.get_params()[0][k], v)


def test_two_devices_average_params_and_match_one_device():
    x, y = _data(8)
    mods = [_ready(context=ctx, batch=8, optimizer=None) for ctx in ([rm.cpu()], TWO)]
    mods[1].set_params(*mods[0].get_params())  # before init_optimizer: the kvstore copies them
    for mod in mods:
        mod.init_optimizer(optimizer_params={"learning_rate": 0.5})
        for _ in range(3):
            mod.forward_backward(DataBatch([x], [y]))
            mod.update()
    for k, v in mods[0].get_params()[0].items():
        np.testing.assert_allclose(mods[1].get_params()[0][k], v, rtol=1e-5, atol=1e-6)


# ---- optimizer and kvstore -------------------------------------------------------------------

def test_one_device_updates_locally_with_enumerated_names():
    mod = _ready(optimizer="sgd")
    assert mod._kvstore is None and mod._update_on_kvstore is False
    assert mod._optimizer.idx2name == dict(enumerate(mod._exec_group.param_names))
    assert mod._optimizer.rescale_grad == pytest.approx(0.1)
    own = rm.optimizer.SGD(rescale_grad=0.1,
                           param_idx2name=dict(enumerate(mod._exec_group.param_names)))
    mod2 = _ready(optimizer=own)
    assert mod2._optimizer is own and mod2._optimizer.idx2name == mod._optimizer.idx2name


def test_two_devices_use_a_local_kvstore_that_runs_the_optimizer():
    mod = _ready(context=TWO)
    assert mod._kvstore.type == "local" and mod._update_on_kvstore
    assert mod._updater is None
    assert mod._optimizer.idx2name == dict(enumerate(mod._exec_group.param_names))


def test_update_on_kvstore_off_gives_per_device_update_indices(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    mod = _ready(context=TWO, optimizer_params={"learning_rate": 0.5})
    assert mod._kvstore is not None and not mod._update_on_kvstore
    names = mod._exec_group.param_names
    assert mod._optimizer.idx2name == {2 * i + k: n for i, n in enumerate(names)
                                       for k in range(2)}
    x, y = _data(10)
    mod.forward_backward(DataBatch([x], [y]))
    mod.update()
    copies = mod._exec_group.param_arrays[0]
    np.testing.assert_allclose(copies[0], copies[1], rtol=1e-6)


def test_bad_kvstore_and_optimizer_arguments_fail_before_any_change():
    mod = _ready(optimizer=None)
    with pytest.raises(ValueError, match="unknown kvstore type 'bogus'"):
        mod.init_optimizer(kvstore="bogus")
    with pytest.raises(TypeError, match="kvstore must be"):
        mod.init_optimizer(kvstore=3)
    with pytest.raises(ValueError, match="unknown optimizer 'sgdd'"):
        mod.init_optimizer(optimizer="sgdd")
    assert not mod.optimizer_initialized


def test_optimizer_instance_with_other_rescale_grad_warns():
    mod = _ready(optimizer=None)
    with pytest.warns(UserWarning, match="rescale_grad"):
        mod.init_optimizer(optimizer=rm.optimizer.SGD(learning_rate=0.1))


def _step(mod, seed):
    x, y = _data(8, seed)
    mod.forward_backward(DataBatch([x], [y]))
    mod.update()


@pytest.mark.parametrize("context", [[rm.cpu()], TWO], ids=["1dev", "2dev"])
def test_checkpoint_with_optimizer_states_resumes_exactly(tmp_path, context):
    params = {"learning_rate": 0.1, "momentum": 0.9}
    mod = _ready(context=context, batch=8, optimizer_params=params)
    for seed in range(3):
        _step(mod, seed)
    prefix = str(tmp_path / "ck")
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    resumed = Module.load(prefix, 3, load_optimizer_states=True, context=context)
    resumed.bind([("data", (8, 5))], [("softmax_label", (8,))])
    resumed.init_optimizer(optimizer_params=params)
    assert resumed.symbol.tojson() == mod.symbol.tojson()
    updater = mod._kvstore._updater if mod._update_on_kvstore else mod._updater
    loaded = resumed._kvstore._updater if resumed._update_on_kvstore else resumed._updater
    assert set(updater.states) == set(loaded.states)
    for k in updater.states:
        np.testing.assert_array_equal(np.asarray(loaded.states[k]), updater.states[k])
    for seed in range(3, 6):
        _step(mod, seed)
        _step(resumed, seed)
    for k, v in mod.get_params()[0].items():
        np.testing.assert_array_equal(resumed.get_params()[0][k], v, err_msg=k)


def test_rebind_after_updates_carries_the_latest_weights():
    mod = _ready(optimizer_params={"learning_rate": 1.0})
    _step(mod, 0)
    weights = {k: v.copy() for k, v in mod._exec_group.execs[0].arg_dict.items()
               if k.endswith("weight")}
    with pytest.warns(UserWarning, match="label_shapes"):
        mod.bind([("data", (3, 5))], for_training=False, force_rebind=True)
    for k, v in weights.items():
        np.testing.assert_array_equal(mod._exec_group.execs[0].arg_dict[k], v)
    assert mod.optimizer_initialized


def test_base_module_stub_has_no_states():
    assert BaseModule().symbol is None
