"""Sparse training against MXNet 1.9.1: the linear_classification and factorization_machine
networks, lazy SGD with momentum and lazy Adam, from the same initial values on the same csr
batches (tools/make_mxnet_sparse_fixture.py wrote MXNet's trajectory)."""
import json
import os

import numpy as np
import pytest

import raymod as rm
from raymod.sparse import CSRArray

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mxnet",
                       "sparse_training.json")
with open(FIXTURE) as f:
    CASES = json.load(f)["cases"]


def linear(width):
    x = rm.sym.Variable("data", stype="csr")
    w = rm.sym.Variable("weight", shape=(width, 2), stype="row_sparse")
    b = rm.sym.Variable("bias", shape=(2,))
    return rm.sym.SoftmaxOutput(rm.sym.broadcast_add(rm.sym.dot(x, w), b), name="softmax")


def fm(width, k=3):
    x = rm.sym.Variable("data", stype="csr")
    v = rm.sym.Variable("v", shape=(width, k), stype="row_sparse")
    w = rm.sym.Variable("w", shape=(width, 1), stype="row_sparse")
    w0 = rm.sym.Variable("w0", shape=(1,))
    w1 = rm.sym.broadcast_add(rm.sym.dot(x, w), w0)
    bd_sum = rm.sym.dot(rm.sym.square(x), rm.sym._square_sum(v, axis=1, keepdims=True))
    w_all = rm.sym.Concat(w1, 0.5 * rm.sym.square(rm.sym.dot(x, v)), dim=1)
    model = rm.sym.sum(w_all, axis=1, keepdims=True) - 0.5 * bd_sum
    return rm.sym.LogisticRegressionOutput(model, rm.sym.Variable("softmax_label"))


@pytest.mark.parametrize("case", CASES, ids=[f"{c['net']}-{c['optimizer']}" for c in CASES])
def test_parameters_after_the_steps_equal_mxnets(case):
    width, batch = case["width"], case["batch"]
    linear_net = case["net"] == "linear"
    label_shape = (batch,) if linear_net else (batch, 1)
    mod = rm.mod.Module(linear(width) if linear_net else fm(width))
    mod.bind([("data", (batch, width))], [("softmax_label", label_shape)])
    mod.init_params(arg_params={n: np.asarray(v, np.float32)
                                for n, v in case["initial"].items()})
    mod.init_optimizer(optimizer=case["optimizer"], optimizer_params=case["params"])
    for b in case["batches"]:
        x = CSRArray(np.asarray(b["data"], np.float32), b["indices"], b["indptr"],
                     (batch, width))
        label = np.asarray(b["label"], np.float32).reshape(label_shape)
        mod.forward_backward(rm.io.DataBatch([x], [label]))
        mod.update()
    got = mod.get_params()[0]
    for name, want in case["final"].items():
        np.testing.assert_allclose(got[name], np.asarray(want, np.float32), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    # the lazy rule really ran: some row never in a batch kept its initial value
    touched = np.unique(np.concatenate([b["indices"] for b in case["batches"]]))
    untouched = np.setdiff1d(np.arange(width), touched)
    table = "weight" if linear_net else "v"
    if untouched.size:
        np.testing.assert_array_equal(got[table][untouched],
                                      np.asarray(case["initial"][table], np.float32)[untouched])
