"""SVRGModule driven step by step as MXNet 1.9.1's test_contrib_svrg_module.py drives it:
integer data from ``np.random.randint``, ``forward``/``backward``/``update`` before the first
``update_full_grads`` (the full gradient is zero until then, as MXNet initialises it), and
``_accumulate_kvstore`` handing each device its share of the summed full gradient."""
import numpy as np
import pytest

import raymod as rm
from raymod.module.svrg_module import SVRGModule

LABEL = "lin_reg_label"


def _linear_regression():
    fc = rm.sym.FullyConnected(data=rm.sym.Variable("data"), name="fc1", num_hidden=1)
    return rm.sym.LinearRegressionOutput(data=fc, label=rm.sym.Variable(LABEL), name="lro")


def _int_data(rows, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randint(1, 5, [rows, 2])  # int64, as in MXNet's test
    return x, x.dot(np.array([1.0, 2.0]))


def _setup(rows=1000, batch=32, init=None):
    x, y = _int_data(rows)
    it = rm.io.NDArrayIter(x, y, batch_size=batch, shuffle=True, label_name=LABEL, seed=0)
    mod = SVRGModule(symbol=_linear_regression(), data_names=["data"], label_names=[LABEL],
                     update_freq=2)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=init or rm.init.Uniform(0.01))
    return it, mod


def test_integer_data_binds_as_float32_as_mxnets_iterator_gives():
    it, mod = _setup()
    assert it.provide_data[0].dtype == np.float32
    assert mod.get_params()[0]["fc1_weight"].dtype == np.float32


def test_fit_on_integer_data_learns_the_weights():
    it, mod = _setup()
    metric = rm.metric.create("mse")
    with pytest.warns(UserWarning, match="already initialized"):  # as MXNet's fit warns
        mod.fit(it, eval_metric=metric, optimizer="sgd",
                optimizer_params=(("learning_rate", 0.025),), num_epoch=30, kvstore="local")
    assert metric.get()[1] < 1e-3
    np.testing.assert_allclose(mod.get_params()[0]["fc1_weight"], [[1.0, 2.0]], atol=0.05)


def test_full_gradient_of_a_manual_pass_equals_update_full_grads():
    it, mod = _setup(rows=10, batch=5, init=rm.init.One())
    mod.init_optimizer(kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),))
    mod._mod_aux.set_params(*mod.get_params())
    total = np.zeros((1, 2), np.float32)
    for batch in it:  # training forward/backward before any full-gradient pass
        mod.forward(batch)
        mod.backward()
        total += mod._exec_group.grad_arrays[0][0]
    it.reset()
    mod.update_full_grads(it)
    np.testing.assert_allclose(mod._param_dict[0]["fc1_weight"], total / 2, rtol=1e-6)


def test_update_right_after_init_optimizer_leaves_weights():
    mod = SVRGModule(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=1, name="fc"),
                     data_names=["data"], label_names=None, update_freq=2)
    mod.bind(data_shapes=[("data", (1, 1))])
    mod.init_params()
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    assert [sorted(d) for d in mod._param_dict] == [["fc_bias", "fc_weight"]]
    before = {k: v.copy() for k, v in mod.get_params()[0].items()}
    mod.update()  # zero gradients, zero full gradient: nothing moves
    for name, value in mod.get_params()[0].items():
        np.testing.assert_array_equal(value, before[name])


def test_step_by_step_on_two_devices_then_reshape():
    sym = rm.sym.FullyConnected(data=rm.sym.Variable("data"), num_hidden=4, name="fc")
    mod = SVRGModule(sym, data_names=["data"], label_names=None,
                     context=[rm.cpu(0), rm.cpu(1)], update_freq=2)
    mod.bind(data_shapes=[("data", (3, 4))])
    mod.init_params()
    mod._mod_aux.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 1.0})
    mod.forward(rm.io.DataBatch(data=[np.ones((3, 4), np.float32)], label=None))
    mod.backward([np.ones((3, 4), np.float32)])
    mod.update()
    assert mod.get_outputs()[0].shape == (3, 4)
    mod.reshape(data_shapes=[("data", (2, 4))])
    mod.forward(rm.io.DataBatch(data=[np.ones((2, 4), np.float32)], label=None))
    mod.backward([np.ones((2, 4), np.float32)])
    mod.update()
    assert mod.get_outputs()[0].shape == (2, 4)


def test_accumulate_kvstore_gives_each_device_its_share():
    it, mod = _setup()
    mod.init_optimizer(kvstore=rm.kv.create("local"), optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),))
    parts = [np.ones((1, 2), np.float32) for _ in range(4)]
    mod._accumulate_kvstore("fc1_weight", parts)
    assert len(mod._param_dict) == mod._ctx_len == 1
    np.testing.assert_array_equal(parts[0], 4)  # the pulled sum
    np.testing.assert_array_equal(mod._param_dict[0]["fc1_weight"], parts[0])
