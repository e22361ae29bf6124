"""Write MXNet 1.9.1's SVMOutput results to tests/fixtures/mxnet/svm_output.json.

Runs under real MXNet, not raymod's environment:

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install "mxnet==1.9.1" "numpy<1.24"
    OMP_NUM_THREADS=1 /tmp/mxvenv/bin/python tools/make_svm_output_fixture.py

Each case binds ``SVMOutput(data, name='svm')`` with the given attributes, runs
``forward(is_train=True)`` and ``backward()`` (no head gradient: a loss head) and records the
inputs, the output and the data gradient as nested lists (float32 values are exact in JSON).
Draws are seeded, so a rerun writes the same file. It also records shape inference and what
``grad_req='add'`` does (MXNet's kernel overwrites the gradient).
"""
import json
import os

import mxnet as mx
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "mxnet", "svm_output.json")

# (name, data shape, dtype, attrs as MXNet strings, label override or None)
CASES = [
    ("l2_default", (4, 3), "float32", {}, None),
    ("l2_margin_reg", (4, 3), "float32",
     {"margin": "1.5", "regularization_coefficient": "0.5"}, None),
    ("l1_default", (4, 3), "float32", {"use_linear": "True"}, None),
    ("l1_margin_reg", (5, 4), "float32",
     {"margin": "0.5", "regularization_coefficient": "2.0", "use_linear": "True"}, None),
    # class axis last; label 1.7 truncates to 1, -0.5 to 0; 5 and -1 match no class
    ("l2_3d_odd_labels", (2, 3, 4), "float32",
     {"margin": "2.0", "regularization_coefficient": "0.25"},
     [[1.7, 5.0, -0.5], [-1.0, 3.0, 2.0]]),
    ("l1_float64", (3, 5), "float64",
     {"margin": "0.75", "regularization_coefficient": "3.0", "use_linear": "1"}, None),
]


def run(data, label, attrs, grad_req="write", grad_init=0.0):
    sym = mx.sym.SVMOutput(data=mx.sym.Variable("data"), name="svm", **attrs)
    grad = mx.nd.full(data.shape, grad_init, dtype=data.dtype)
    ex = sym.bind(mx.cpu(), {"data": mx.nd.array(data, dtype=data.dtype),
                             "svm_label": mx.nd.array(label, dtype=data.dtype)},
                  args_grad={"data": grad}, grad_req={"data": grad_req, "svm_label": "null"})
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward()
    return out, ex.grad_dict["data"].asnumpy()


def main():
    rng = np.random.RandomState(20240601)
    cases = []
    for name, shape, dtype, attrs, label in CASES:
        data = (rng.standard_normal(shape) * 1.5).astype(dtype)
        if label is None:
            label = rng.randint(0, shape[-1], shape[:-1])
        label = np.asarray(label, dtype=dtype)
        out, grad = run(data, label, attrs)
        assert np.array_equal(out, data)
        cases.append({"name": name, "attrs": attrs, "dtype": dtype, "data": data.tolist(),
                      "label": label.tolist(), "grad": grad.tolist()})
    first = cases[0]
    data = np.array(first["data"], dtype="float32")
    _, added = run(data, np.array(first["label"], dtype="float32"), {}, "add", grad_init=1.0)
    sym = mx.sym.SVMOutput(data=mx.sym.Variable("data"), name="svm")
    shapes = {}
    for dshape in [(4, 3), (2, 3, 4)]:
        args, outs, _ = sym.infer_shape(data=dshape)
        shapes[str(dshape)] = {"args": [list(s) for s in args], "outs": [list(s) for s in outs]}
    doc = {"mxnet": mx.__version__, "numpy": np.__version__,
           "list_arguments": sym.list_arguments(), "list_outputs": sym.list_outputs(),
           "infer_shape": shapes, "cases": cases,
           "grad_req_add": {"case": first["name"], "grad_init": 1.0, "grad": added.tolist()}}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
