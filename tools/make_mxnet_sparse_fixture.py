"""Write MXNet 1.9.1's sparse training trajectories to tests/fixtures/mxnet/sparse_training.json.

Runs under real MXNet, not raymod's environment:

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install "mxnet==1.9.1" "numpy<1.24"
    OMP_NUM_THREADS=1 /tmp/mxvenv/bin/python tools/make_mxnet_sparse_fixture.py

Two of MXNet's example/sparse networks at small widths, from given initial values, trained
for a few steps by ``Module`` (forward_backward, update) in one process:

- ``linear``: ``dot(csr data, row_sparse weight) + bias`` into SoftmaxOutput (the
  linear_classification example's network with MXNet's own loss), 12 features.
- ``fm``: the factorization_machine example's network (``_square_sum`` of a row_sparse
  factor table, ``dot`` of squared csr data, LogisticRegressionOutput), 10 features, 3
  factors.

Each runs with lazy SGD with momentum and weight decay, and with lazy Adam. Recorded: the csr
batches (data, indices, indptr), labels, the initial parameters and the parameters after the
steps, as nested lists (float32 values are exact in JSON). Draws are seeded.
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
    return mx.sym.SoftmaxOutput(mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), b),
                                name="softmax"), {"weight": (width, 2), "bias": (2,)}


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
    return (mx.sym.LogisticRegressionOutput(data=model, label=mx.sym.Variable("softmax_label")),
            {"v": (width, k), "w": (width, 1), "w0": (1,)})


NETS = {"linear": (linear, 12), "fm": (fm, 10)}


def batches(rng, width):
    out = []
    for _ in range(STEPS):
        dense = (rng.random((BATCH, width)) < 0.3) * rng.standard_normal((BATCH, width))
        dense[0, -1] = 0.5  # at least one entry
        rows, cols = np.nonzero(dense)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=BATCH))])
        label = (rng.random(BATCH) < 0.5).astype(np.float32)
        out.append({"data": dense[rows, cols].astype(np.float32).tolist(),
                    "indices": cols.tolist(), "indptr": indptr.tolist(),
                    "label": label.tolist()})
    return out


def run(net_name, opt_name, seed):
    rng = np.random.default_rng(seed)
    build, width = NETS[net_name]
    sym, shapes = build(width)
    init = {n: (rng.standard_normal(s) * 0.3).astype(np.float32) for n, s in shapes.items()}
    data = batches(rng, width)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"])
    label_shape = (BATCH,) if net_name == "linear" else (BATCH, 1)
    mod.bind([("data", (BATCH, width))], [("softmax_label", label_shape)])
    mod.init_params(arg_params={n: mx.nd.array(v) for n, v in init.items()})
    mod.init_optimizer(optimizer=opt_name, optimizer_params=OPTIMIZERS[opt_name])
    for b in data:
        csr = mx.nd.sparse.csr_matrix((b["data"], b["indices"], b["indptr"]),
                                      shape=(BATCH, width))
        label = mx.nd.array(np.asarray(b["label"], np.float32).reshape(label_shape))
        mod.forward_backward(mx.io.DataBatch([csr], [label]))
        mod.update()
    final = {n: a.tostype("default").asnumpy().tolist() for n, a in mod.get_params()[0].items()}
    return {"net": net_name, "optimizer": opt_name, "params": OPTIMIZERS[opt_name],
            "width": width, "batch": BATCH, "batches": data,
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
