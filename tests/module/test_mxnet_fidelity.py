"""Behaviours where raymod once differed from MXNet 1.9.1 on the same script (issue 22).

Each test states what MXNet gives and failed on raymod before its fix.
"""
import numpy as np
import pytest

import raymod as rm
from raymod.base import MXNetError
from raymod.io import DataBatch, NDArrayIter
from raymod.module import Module


def _square_error_module(batch=3):
    """``make_loss(square(data - label))``: an output that depends on the labels."""
    data, label = rm.sym.Variable("data"), rm.sym.Variable("label")
    mod = Module(rm.sym.make_loss(rm.sym.square(data - label)), data_names=["data"],
                 label_names=["label"])
    mod.bind([("data", (batch, 1))], [("label", (batch, 1))])
    mod.init_params()
    return mod


def test_inference_forward_loads_the_batchs_labels():
    # MXNet loads labels whenever the batch has them: (3 - 1)^2 = 4, not (3 - 2)^2 = 1
    # from the labels of the earlier training forward
    mod = _square_error_module()
    ones, twos, threes = (np.full((3, 1), v, np.float32) for v in (1, 2, 3))
    mod.forward(DataBatch([threes], [twos]), is_train=True)
    np.testing.assert_array_equal(mod.get_outputs()[0].ravel(), [1, 1, 1])
    mod.forward(DataBatch([threes], [ones]), is_train=False)
    np.testing.assert_array_equal(mod.get_outputs()[0].ravel(), [4, 4, 4])


def test_predict_and_score_see_their_own_labels():
    mod = _square_error_module()
    mod.forward(DataBatch([np.zeros((3, 1), np.float32)], [np.full((3, 1), 9, np.float32)]),
                is_train=True)
    it = NDArrayIter(np.full((3, 1), 3, np.float32), np.ones((3, 1), np.float32),
                     batch_size=3, label_name="label")
    np.testing.assert_array_equal(mod.predict(it).ravel(), [4, 4, 4])
    (_, loss), = mod.score(it, rm.metric.Loss())
    assert loss == pytest.approx(4.0)


def _mlp_on(features):
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=8, name="fc1")
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(net, num_hidden=3, name="fc2"),
                               name="softmax")
    mod = Module(net)
    mod.bind([("data", (4, features))], [("softmax_label", (4,))])
    mod.init_params(rm.init.Uniform(0.5))
    return mod


def test_predict_with_other_features_is_refused_naming_the_parameter():
    # MXNet refuses a reshape that changes a parameter's shape; raymod used to bind fc1_weight
    # as (8, 7), keep the first 40 values and fill the rest with zeros
    mod = _mlp_on(5)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    before = mod.predict(x)
    with pytest.raises(MXNetError, match=r"'fc1_weight' from \(8, 5\) to \(8, 7\)"):
        mod.predict(np.ones((4, 7), np.float32))
    # nothing changed: the same parameters, the same bound shapes, the same answers
    assert mod.get_params()[0]["fc1_weight"].shape == (8, 5)
    assert mod.data_shapes[0].shape == (4, 5)
    np.testing.assert_array_equal(mod.predict(x), before)


def test_reshape_to_another_batch_size_still_works():
    mod = _mlp_on(5)
    mod.reshape([("data", (6, 5))], [("softmax_label", (6,))])
    assert mod.predict(np.ones((6, 5), np.float32)).shape == (6, 3)
