"""Write MXNet 1.9.1's sparse training trajectories to tests/fixtures/mxnet/sparse_training.json.

Runs under real MXNet, not raymod's environment:

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install "mxnet==1.9.1" "numpy<1.24"
    OMP_NUM_THREADS=1 /tmp/mxvenv/bin/python tools/make_mxnet_sparse_fixture.py

MXNet's four example/sparse networks at small widths, from given initial values, trained
for a few steps by ``Module`` (forward_backward, update) in one process:

- ``linear``: ``dot(csr data, row_sparse weight) + bias`` into SoftmaxOutput (the
  linear_classification example's network with MXNet's own loss), 12 features.
- ``fm``: the factorization_machine example's network (``_square_sum`` of a row_sparse
  factor table, ``dot`` of squared csr data, LogisticRegressionOutput), 10 features, 3
  factors.
- ``wide_deep``: the wide_deep example's network: a csr linear part with a row_sparse
  weight, and a deep part whose dense input's first columns are ids into row_sparse
  ``sparse.Embedding`` tables (sparse_grad), then three FullyConnected layers.
- ``mf``: the matrix_factorization example's network: user and item ids into row_sparse
  Embedding tables (sparse_grad), relu, FullyConnected, inner product, LinearRegressionOutput.

Each runs with lazy SGD with momentum and weight decay, and with lazy Adam. Recorded per
batch: each input (a csr input as data, indices, indptr; a dense one as nested lists) and
label, the initial parameters and the parameters after the steps (float32 values are exact
in JSON). Draws are seeded.
"""
import json
import os

import mxnet as mx
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "mxnet", "sparse_training.json")
BATCH, STEPS = 6, 5
OPTIMIZERS = {"sgd": {"learning_rate": 0.2, "momentum": 0.9, "wd": 0.01},
              "adam": {"learning_rate": 0.05, "wd": 0.01}}


def linear(width):
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("weight", shape=(width, 2), stype="row_sparse")
    b = mx.sym.Variable("bias", shape=(2,))
    net = mx.sym.SoftmaxOutput(mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b),
                               name="softmax")
    return net, {"data": ("csr", width)}, {"softmax_label": ("class", 2)}


def fm(width, k=3):
    x = mx.sym.Variable("data", stype="csr")
    v = mx.sym.Variable("v", shape=(width, k), stype="row_sparse")
    w = mx.sym.Variable("w", shape=(width, 1), stype="row_sparse")
    w0 = mx.sym.Variable("w0", shape=(1,))
    w1 = mx.sym.broadcast_add(mx.sym.dot(x, w), w0)
    v_s = mx.sym._internal._square_sum(data=v, axis=1, keepdims=True)
    bd_sum = mx.sym.dot(x.square(), v_s)
    w2 = mx.sym.dot(x, v)
    w_all = mx.sym.Concat(w1, 0.5 * mx.sym.square(data=w2), dim=1)
    model = w_all.sum(axis=1, keepdims=True) - 0.5 * bd_sum
    net = mx.sym.LogisticRegressionOutput(data=model, label=mx.sym.Variable("softmax_label"))
    return net, {"data": ("csr", width)}, {"softmax_label": ("binary", 1)}


#: wide_deep at a small size: 2 id columns into tables of 5 and 7 rows, 3 continuous
WD_EMBED, WD_DIMS, WD_CONT, WD_HIDDEN = 2, (5, 7), 3, (4, 6, 5)


def wide_deep(width):
    csr = mx.sym.Variable("csr_data", stype="csr")
    weight = mx.sym.Variable("linear_weight", shape=(width, 2), stype="row_sparse")
    linear_out = mx.sym.broadcast_add(mx.sym.sparse.dot(csr, weight),
                                      mx.sym.Variable("linear_bias", shape=(2,)))
    dns = mx.sym.Variable("dns_data")
    ids = mx.sym.split(mx.sym.slice(dns, begin=(0, 0), end=(None, WD_EMBED)),
                       num_outputs=WD_EMBED, squeeze_axis=1)
    features = [mx.sym.slice(dns, begin=(0, WD_EMBED), end=(None, WD_EMBED + WD_CONT))]
    for i, column in enumerate(ids):
        table = mx.sym.Variable(f"embed_{i}_weight", stype="row_sparse")
        features.append(mx.sym.sparse.Embedding(data=column, weight=table,
                                                input_dim=WD_DIMS[i],
                                                output_dim=WD_HIDDEN[0], sparse_grad=True))
    hidden = mx.sym.concat(*features, dim=1)
    # layers named (not counted): the fixture's parameter names hold in any process
    hidden = mx.sym.Activation(mx.sym.FullyConnected(hidden, num_hidden=WD_HIDDEN[1],
                                                     name="fc1"), "relu")
    hidden = mx.sym.Activation(mx.sym.FullyConnected(hidden, num_hidden=WD_HIDDEN[2],
                                                     name="fc2"), "relu")
    deep_out = mx.sym.FullyConnected(hidden, num_hidden=2, name="fc3")
    net = mx.sym.SoftmaxOutput(linear_out + deep_out, mx.sym.Variable("softmax_label"),
                               name="model")
    return (net, {"csr_data": ("csr", width), "dns_data": ("wide_deep", WD_EMBED + WD_CONT)},
            {"softmax_label": ("class", 2)})


#: matrix factorization at a small size: 9 users, 11 items, 4 factors, 5 hidden
MF_USERS, MF_ITEMS, MF_FACTORS = 9, 11, 4


def mf(_width):
    user_weight = mx.sym.Variable("user_weight", stype="row_sparse")
    item_weight = mx.sym.Variable("item_weight", stype="row_sparse")
    user = mx.sym.Embedding(mx.sym.Variable("user"), weight=user_weight, sparse_grad=True,
                            input_dim=MF_USERS, output_dim=MF_FACTORS)
    item = mx.sym.Embedding(mx.sym.Variable("item"), weight=item_weight, sparse_grad=True,
                            input_dim=MF_ITEMS, output_dim=MF_FACTORS)
    user = mx.sym.FullyConnected(mx.sym.Activation(user, act_type="relu"), num_hidden=5,
                                 name="user_fc")
    item = mx.sym.FullyConnected(mx.sym.Activation(item, act_type="relu"), num_hidden=5,
                                 name="item_fc")
    pred = mx.sym.Flatten(mx.sym.sum(user * item, axis=1))
    net = mx.sym.LinearRegressionOutput(pred, label=mx.sym.Variable("score"))
    return net, {"user": ("ids", MF_USERS), "item": ("ids", MF_ITEMS)}, {"score": ("score", 0)}


NETS = {"linear": (linear, 12), "fm": (fm, 10), "wide_deep": (wide_deep, 12), "mf": (mf, 0)}


def make_input(rng, kind, size):
    """One batch of an input: ``{"csr": [data, indices, indptr], "shape": ...}`` or
    ``{"dense": nested lists, "shape": ...}``."""
    if kind == "csr":
        dense = (rng.random((BATCH, size)) < 0.3) * rng.standard_normal((BATCH, size))
        dense[0, -1] = 0.5  # at least one entry
        dense[:, 1] = 0  # a row of the table no batch touches: the lazy rule keeps it
        rows, cols = np.nonzero(dense)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=BATCH))])
        return {"csr": [dense[rows, cols].astype(np.float32).tolist(), cols.tolist(),
                        indptr.tolist()], "shape": [BATCH, size]}
    if kind == "wide_deep":  # id columns, then continuous ones
        # the tables' last rows are never read: lazy updates leave them as they were
        ids = np.stack([rng.integers(0, n - 1, BATCH) for n in WD_DIMS], axis=1)
        value = np.concatenate([ids, rng.standard_normal((BATCH, WD_CONT))], axis=1)
    elif kind == "ids":
        value = rng.integers(0, size - 1, BATCH)
    elif kind == "class":
        value = rng.integers(0, size, BATCH)
    elif kind == "binary":
        value = (rng.random((BATCH, 1)) < 0.5)
    else:  # a score
        value = rng.uniform(1, 5, BATCH)
    value = np.asarray(value, np.float32)
    return {"dense": value.tolist(), "shape": list(value.shape)}


def to_mx(spec):
    if "csr" in spec:
        return mx.nd.sparse.csr_matrix(tuple(spec["csr"]), shape=tuple(spec["shape"]))
    return mx.nd.array(np.asarray(spec["dense"], np.float32))


def run(net_name, opt_name, seed):
    rng = np.random.default_rng(seed)
    build, width = NETS[net_name]
    sym, inputs, labels = build(width)
    mod = mx.mod.Module(sym, data_names=list(inputs), label_names=list(labels))
    data = [{"data": {n: make_input(rng, *k) for n, k in inputs.items()},
             "label": {n: make_input(rng, *k) for n, k in labels.items()}}
            for _ in range(STEPS)]
    first = data[0]
    mod.bind([(n, tuple(s["shape"])) for n, s in first["data"].items()],
             [(n, tuple(s["shape"])) for n, s in first["label"].items()])
    arg_shapes, _, _ = sym.infer_shape(**{n: tuple(s["shape"])
                                          for part in first.values() for n, s in part.items()})
    shapes = {n: s for n, s in zip(sym.list_arguments(), arg_shapes)
              if n not in inputs and n not in labels}
    init = {n: (rng.standard_normal(s) * 0.3).astype(np.float32) for n, s in shapes.items()}
    mod.init_params(arg_params={n: mx.nd.array(v) for n, v in init.items()})
    mod.init_optimizer(optimizer=opt_name, optimizer_params=OPTIMIZERS[opt_name])
    for b in data:
        mod.forward_backward(mx.io.DataBatch([to_mx(b["data"][n]) for n in inputs],
                                             [to_mx(b["label"][n]) for n in labels]))
        mod.update()
    final = {n: a.tostype("default").asnumpy().tolist() for n, a in mod.get_params()[0].items()}
    return {"net": net_name, "optimizer": opt_name, "params": OPTIMIZERS[opt_name],
            "width": width, "batch": BATCH, "data_names": list(inputs),
            "label_names": list(labels), "batches": data,
            "initial": {n: v.tolist() for n, v in init.items()}, "final": final}


def main():
    cases = [run(net, opt, seed) for seed, (net, opt) in
             enumerate((n, o) for n in NETS for o in OPTIMIZERS)]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"mxnet": mx.__version__, "cases": cases}, f)
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
