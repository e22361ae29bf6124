"""SequentialModule: a chain of modules trains as the one network it spells out."""
import logging

import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch
from raymod.module import Stage, StageError

BATCH = 20


def _data(rows=200, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8)).astype(np.float32)
    y = (x[:, :4].argmax(axis=1)).astype(np.float32)
    return x, y


def _features():
    data = rm.sym.Variable("data")
    return rm.sym.Activation(rm.sym.FullyConnected(data, num_hidden=16, name="fc1"),
                             act_type="relu", name="relu1")


def _head(data=None):
    data = rm.sym.Variable("data") if data is None else data
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(data, num_hidden=4, name="fc2"),
                                name="softmax")


def _start_params(seed=3):
    rng = np.random.default_rng(seed)
    shapes = {"fc1_weight": (16, 8), "fc1_bias": (16,), "fc2_weight": (4, 16), "fc2_bias": (4,)}
    return {k: (0.3 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}


def _chain():
    return (rm.mod.SequentialModule()
            .add(rm.mod.Module(_features(), label_names=None))
            .add(rm.mod.Module(_head()), take_labels=True, auto_wiring=True))


def _fit(mod, epochs=2, **kw):
    x, y = _data()
    it = rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=5)
    metric = rm.metric.create("acc")
    mod.fit(it, num_epoch=epochs, arg_params={k: v.copy() for k, v in _start_params().items()},
            eval_metric=metric, optimizer_params={"learning_rate": 0.1, "momentum": 0.9,
                                                  "wd": 1e-3}, **kw)
    return mod.get_params()[0], metric.get_global()[1]


def assert_params_close(a, b, tol=1e-5):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=tol, atol=tol, err_msg=name)


def test_two_stage_chain_trains_to_the_one_symbol_module_params():
    one, acc_one = _fit(rm.mod.Module(_head(_features())))
    seq = _chain()
    chained, acc_seq = _fit(seq)
    assert_params_close(chained, one)
    assert acc_seq == pytest.approx(acc_one, abs=1e-12)
    assert seq.stage is Stage.OPTIMIZER_READY
    # score, predict and output shapes come from the last module
    x, y = _data()
    it = rm.io.NDArrayIter(x, y, batch_size=BATCH)
    assert seq.output_shapes == [("softmax_output", (BATCH, 4))]
    assert seq.data_names == ["data"] and seq.output_names == ["softmax_output"]
    probs = seq.predict(it)
    assert probs.shape == (200, 4)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert dict(seq.score(it, "acc"))["accuracy"] == pytest.approx(
        float((probs.argmax(axis=1) == y).mean()))


def test_forward_backward_chain_gives_the_one_symbol_gradients():
    x, y = _data(BATCH)
    batch = DataBatch([x], [y])
    params = _start_params()
    one = rm.mod.Module(_head(_features()))
    one.bind([("data", x.shape)], [("softmax_label", y.shape)], inputs_need_grad=True)
    one.init_params(arg_params=params)
    seq = _chain()
    seq.bind([("data", x.shape)], [("softmax_label", y.shape)], inputs_need_grad=True)
    seq.init_params(arg_params=params)
    for mod in (one, seq):
        mod.forward(batch, is_train=True)
        mod.backward()
    np.testing.assert_allclose(seq.get_outputs()[0], one.get_outputs()[0], rtol=1e-6)
    np.testing.assert_allclose(seq.get_input_grads()[0], one.get_input_grads()[0],
                               rtol=1e-5, atol=1e-7)
    first, second = seq._modules
    grads = dict(zip(one._exec_group.param_names, one._exec_group.grad_arrays))
    for mod in (first, second):
        for name, block in zip(mod._exec_group.param_names, mod._exec_group.grad_arrays):
            np.testing.assert_allclose(block[0], grads[name][0], rtol=1e-5, atol=1e-7)
    # the caller's batch is not rewired by the chain
    assert batch.data[0] is x


def test_set_params_and_get_params_cover_every_module():
    seq = _chain()
    seq.bind([("data", (BATCH, 8))], [("softmax_label", (BATCH,))])
    seq.init_params()
    params = _start_params(9)
    seq.set_params(params, {})
    got, aux = seq.get_params()
    assert aux == {}
    assert_params_close(got, params, tol=0)
    with pytest.raises(ValueError, match=r"arg_params has \['extra'\], which no module"):
        seq.set_params(dict(params, extra=np.zeros(1, np.float32)), {})
    seq.set_params(dict(params, extra=np.zeros(1, np.float32)), {}, allow_extra=True)


def test_labels_only_reach_modules_that_take_them():
    seq = (rm.mod.SequentialModule()
           .add(rm.mod.Module(_features(), label_names=None))
           .add(rm.mod.Module(_head()), auto_wiring=True))
    with pytest.warns(UserWarning, match=r"label_shapes provide \[\] but the module's "
                                         r"label_names are \['softmax_label'\]"):
        seq.bind([("data", (BATCH, 8))], [("softmax_label", (BATCH,))])
    assert seq.label_shapes is None  # nobody takes labels
    assert seq._modules[1].label_shapes is None


@pytest.mark.parametrize("build, error, message", [
    (lambda: rm.mod.SequentialModule().add(rm.mod.Module(_head()), take_label=True),
     ValueError, r"unknown options \['take_label'\]"),
    (lambda: rm.mod.SequentialModule().add("not a module"), TypeError,
     "takes a module"),
])
def test_add_rejects_bad_arguments(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_bind_errors_name_the_problem_and_change_nothing():
    with pytest.raises(ValueError, match="the chain is empty"):
        rm.mod.SequentialModule().bind([("data", (BATCH, 8))])
    two_in = rm.sym.FullyConnected(rm.sym.Variable("a") + rm.sym.Variable("b"), num_hidden=2,
                                   name="fcx")
    seq = (rm.mod.SequentialModule().add(rm.mod.Module(_features(), label_names=None))
           .add(rm.mod.Module(two_in, data_names=["a", "b"], label_names=None),
                auto_wiring=True))
    with pytest.raises(ValueError, match=r"it has 2 data inputs \['a', 'b'\] but the module "
                                         "before gives 1 arrays"):
        seq.bind([("data", (BATCH, 8))])
    assert not seq.binded
    with pytest.raises(ValueError, match="shared_module=...\\) is not supported"):
        _chain().bind([("data", (BATCH, 8))], shared_module=_chain())
    def fc():
        return rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=4, name="fcd")

    dup = (rm.mod.SequentialModule().add(rm.mod.Module(fc(), label_names=None))
           .add(rm.mod.Module(fc(), label_names=None), auto_wiring=True))
    dup.bind([("data", (BATCH, 4))])
    with pytest.raises(ValueError, match="parameter 'fcd_weight' is in module 0"):
        dup.init_params()


def test_stage_errors_and_add_undoing_the_setup():
    seq = _chain()
    with pytest.raises(StageError, match="call bind before forward"):
        seq.forward(DataBatch([np.zeros((BATCH, 8), np.float32)]))
    seq.bind([("data", (BATCH, 8))], [("softmax_label", (BATCH,))])
    seq.init_params()
    seq.init_optimizer()
    assert seq.optimizer_initialized
    # adding a module undoes the setup, as in MXNet
    seq.add(rm.mod.PythonLossModule(data_names=["softmax_output"]))
    assert seq.stage is Stage.CREATED


def test_fit_logs_epochs_through_base_module(caplog):
    with caplog.at_level(logging.INFO):
        _fit(_chain(), epochs=1)
    assert any("Epoch[0] Train-accuracy=" in r.getMessage() for r in caplog.records)


def test_an_optimizer_instance_is_copied_per_module():
    # Adam's per-index update counts and the index -> name table (wd only on weights) must
    # stay per module: the chain then trains as the one-symbol module does
    def adam():
        return rm.optimizer.Adam(learning_rate=0.01, wd=0.01, rescale_grad=1.0 / BATCH)

    one, _ = _fit(rm.mod.Module(_head(_features())), optimizer=adam())
    given = adam()
    seq = _chain()
    chained, _ = _fit(seq, optimizer=given)
    assert_params_close(chained, one)
    first, second = (m._optimizer for m in seq._modules)
    assert first is given and second is not given
    assert sorted(first.idx2name.values()) == ["fc1_bias", "fc1_weight"]
    assert sorted(second.idx2name.values()) == ["fc2_bias", "fc2_weight"]
