"""Sparse training against MXNet 1.9.1: the networks of its four example/sparse programs
(linear_classification, factorization_machine, wide_deep, matrix_factorization) at small
sizes, lazy SGD with momentum and lazy Adam, from the same initial values on the same batches
(tools/make_mxnet_sparse_fixture.py wrote MXNet's trajectory)."""
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


#: as in tools/make_mxnet_sparse_fixture.py
WD_EMBED, WD_DIMS, WD_CONT, WD_HIDDEN = 2, (5, 7), 3, (4, 6, 5)
MF_USERS, MF_ITEMS, MF_FACTORS = 9, 11, 4


def wide_deep(width):
    csr = rm.sym.Variable("csr_data", stype="csr")
    weight = rm.sym.Variable("linear_weight", shape=(width, 2), stype="row_sparse")
    linear_out = rm.sym.broadcast_add(rm.sym.dot(csr, weight),
                                      rm.sym.Variable("linear_bias", shape=(2,)))
    dns = rm.sym.Variable("dns_data")
    ids = rm.sym.split(rm.sym.slice(dns, begin=(0, 0), end=(None, WD_EMBED)),
                       num_outputs=WD_EMBED, squeeze_axis=1)
    features = [rm.sym.slice(dns, begin=(0, WD_EMBED), end=(None, WD_EMBED + WD_CONT))]
    for i in range(WD_EMBED):
        features.append(rm.sym.Embedding(
            ids[i], rm.sym.Variable(f"embed_{i}_weight", stype="row_sparse"),
            input_dim=WD_DIMS[i], output_dim=WD_HIDDEN[0], sparse_grad=True))
    hidden = rm.sym.concat(*features, dim=1)
    for i, units in enumerate(WD_HIDDEN[1:]):  # named as the fixture's (not counted)
        hidden = rm.sym.Activation(rm.sym.FullyConnected(hidden, num_hidden=units,
                                                         name=f"fc{i + 1}"), "relu")
    deep_out = rm.sym.FullyConnected(hidden, num_hidden=2, name="fc3")
    return rm.sym.SoftmaxOutput(linear_out + deep_out, rm.sym.Variable("softmax_label"),
                                name="model")


def mf(_width):
    def tower(name, rows):
        ids = rm.sym.Embedding(rm.sym.Variable(name),
                               rm.sym.Variable(f"{name}_weight", stype="row_sparse"),
                               input_dim=rows, output_dim=MF_FACTORS, sparse_grad=True)
        return rm.sym.FullyConnected(rm.sym.Activation(ids, act_type="relu"), num_hidden=5,
                                     name=f"{name}_fc")
    pred = rm.sym.Flatten(rm.sym.sum(tower("user", MF_USERS) * tower("item", MF_ITEMS), axis=1))
    return rm.sym.LinearRegressionOutput(pred, label=rm.sym.Variable("score"))


NETS = {"linear": linear, "fm": fm, "wide_deep": wide_deep, "mf": mf}
#: per network, a table and the batch inputs whose entries are its row ids
TABLE_ROWS = {"linear": ("weight", lambda b: b["data"]["data"]["csr"][1]),
              "fm": ("v", lambda b: b["data"]["data"]["csr"][1]),
              "wide_deep": ("embed_1_weight", lambda b: [r[1] for r in b["data"]["dns_data"]
                                                         ["dense"]]),
              "mf": ("item_weight", lambda b: b["data"]["item"]["dense"])}


def array(spec):
    shape = tuple(spec["shape"])
    if "csr" in spec:
        data, indices, indptr = spec["csr"]
        return CSRArray(np.asarray(data, np.float32), indices, indptr, shape)
    return np.asarray(spec["dense"], np.float32).reshape(shape)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['net']}-{c['optimizer']}" for c in CASES])
def test_parameters_after_the_steps_equal_mxnets(case):
    first = case["batches"][0]
    mod = rm.mod.Module(NETS[case["net"]](case["width"]), data_names=case["data_names"],
                        label_names=case["label_names"])
    mod.bind([(n, tuple(first["data"][n]["shape"])) for n in case["data_names"]],
             [(n, tuple(first["label"][n]["shape"])) for n in case["label_names"]])
    mod.init_params(arg_params={n: np.asarray(v, np.float32)
                                for n, v in case["initial"].items()})
    mod.init_optimizer(optimizer=case["optimizer"], optimizer_params=case["params"])
    for b in case["batches"]:
        mod.forward_backward(rm.io.DataBatch([array(b["data"][n]) for n in case["data_names"]],
                                             [array(b["label"][n])
                                              for n in case["label_names"]]))
        mod.update()
    got = mod.get_params()[0]
    for name, want in case["final"].items():
        np.testing.assert_allclose(got[name], np.asarray(want, np.float32), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    # the lazy rule really ran: some row never in a batch kept its initial value
    table, rows_of = TABLE_ROWS[case["net"]]
    touched = np.unique(np.concatenate([np.asarray(rows_of(b), int) for b in case["batches"]]))
    untouched = np.setdiff1d(np.arange(len(case["initial"][table])), touched)
    assert untouched.size, f"every row of {table} is touched: the lazy rule is not tested"
    np.testing.assert_array_equal(got[table][untouched],
                                  np.asarray(case["initial"][table], np.float32)[untouched])
