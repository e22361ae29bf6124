"""Module.init_optimizer with an Optimizer instance, as MXNet 1.9.1 handles it: the
instance's empty ``idx2name`` is filled from the module (MXNet's index rules for one or more
devices), its ``rescale_grad`` is left as given (with a warning when it is not
1/batch_size), and a non-empty ``idx2name`` is kept."""
import numpy as np
import pytest

import raymod as rm

PARAMS = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def _module(contexts):
    data = rm.sym.Variable("data")
    net = rm.sym.FullyConnected(data, num_hidden=3, name="fc1")
    net = rm.sym.FullyConnected(net, num_hidden=2, name="fc2")
    net = rm.sym.SoftmaxOutput(net, name="softmax")
    mod = rm.mod.Module(net, context=contexts)
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    mod.init_params()
    return mod


@pytest.mark.parametrize("contexts", [[rm.cpu(0)], [rm.cpu(0), rm.cpu(1)]])
def test_instance_gets_idx2name_and_keeps_its_rescale_grad(contexts):
    mod = _module(contexts)
    sgd = rm.optimizer.SGD(learning_rate=0.1, wd=0.1)
    with pytest.warns(UserWarning, match=r"rescale_grad.*\(1.0 vs. 0.25\)"):
        mod.init_optimizer(optimizer=sgd)
    assert mod._optimizer is sgd
    # one device: local updates; two: update_on_kvstore. Both index parameters in order.
    assert sgd.idx2name == dict(enumerate(PARAMS))
    assert sgd.rescale_grad == 1.0
    # as MXNet: the multipliers made at construction stay (no bias wd_mult 0 here)
    assert [sgd._get_wd(i) for i in range(4)] == [0.1] * 4


def test_instance_on_two_devices_without_kvstore_updates(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    mod = _module([rm.cpu(0), rm.cpu(1)])
    sgd = rm.optimizer.SGD(rescale_grad=0.25)
    mod.init_optimizer(optimizer=sgd)
    assert not mod._update_on_kvstore
    # index i*num_devices + k -> name, device-major as MXNet fills it
    assert list(sgd.idx2name.items()) == [(0, "fc1_weight"), (2, "fc1_bias"),
                                          (4, "fc2_weight"), (6, "fc2_bias"),
                                          (1, "fc1_weight"), (3, "fc1_bias"),
                                          (5, "fc2_weight"), (7, "fc2_bias")]
    batch = rm.io.DataBatch([np.ones((4, 5), np.float32)], [np.zeros(4, np.float32)])
    mod.forward_backward(batch)
    mod.update()  # the updater runs with the filled indices


def test_a_given_idx2name_is_kept():
    mod = _module([rm.cpu(0)])
    sgd = rm.optimizer.SGD(param_idx2name={0: "x"}, rescale_grad=0.25)
    mod.init_optimizer(optimizer=sgd)
    assert sgd.idx2name == {0: "x"}
