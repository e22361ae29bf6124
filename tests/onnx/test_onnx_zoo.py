"""ONNX export of MXNet's example networks: the file passes onnx.checker and onnxruntime's
outputs equal raymod's ``Module.forward`` / ``predict`` on the same parameters.

Networks, parameters and inputs come from the model-zoo fixtures (``tests/fixtures/mxnet/zoo``,
made by the recipe of ``tests/zoo/params.py``), at their batch (1 or 2). Besides each network's
output (the softmax of SoftmaxOutput), the layer feeding the head is compared too, since the
probabilities of a random network can hide differences in the logits.
"""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs raymod[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the ONNX checks run onnxruntime")

import raymod as rm  # noqa: E402
from raymod.onnx import UnsupportedOperatorError  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(os.path.dirname(HERE), "fixtures", "mxnet", "zoo")
TOL = 1e-4

_spec = importlib.util.spec_from_file_location(
    "_raymod_onnx_zoo_params", os.path.join(os.path.dirname(HERE), "zoo", "params.py"))
params = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(params)

with open(os.path.join(ZOO, "index.json")) as _f:
    INDEX = json.load(_f)["networks"]

# every zoo network made only of operators ONNX expresses; HEAVY ones (tens of millions of
# weights, 10 s to a minute each) run with RAYMOD_ONNX_ALL_ZOO=1 (their operators are covered
# by the others and by tests/onnx/test_onnx_ops.py)
NETS = ["lenet", "mlp", "vgg11_bn", "googlenet", "inception_bn_small", "resnet18_imagenet",
        "resnet20_cifar", "mobilenet", "mobilenetv2", "vaegan_discriminator1",
        "vaegan_generator", "vaegan_kl_loss", "factorization_machine", "wide_deep",
        "lstm_bucketing"]
HEAVY = ["alexnet", "vgg11", "resnet_v1_18_imagenet", "resnet_v1_20_cifar", "fcn32s", "fcn8s",
         "resnext50", "inception_v3", "inception_v4", "inception_resnet_v2"]


def _network(net: str):
    """(symbol, arg_params, aux_params, inputs, label shapes) of a zoo network, at the
    fixture's batch (1 or 2)."""
    e = INDEX[net]
    sym = rm.sym.load(os.path.join(ZOO, e["symbol_file"]))
    given = {i["name"]: i for i in e["inputs"]}
    labels = {n: tuple(spec["shape"]) for n, spec in given.items() if n.endswith("label")}
    arg = {n: params.make_param(n, s) for n, s in e["arg_shapes"].items() if n not in given}
    aux = {n: params.make_param(n, s) for n, s in e["aux_shapes"].items()}
    inputs = {}
    for name, spec in given.items():
        if name in labels:
            continue
        shape = spec["shape"]
        if "recipe" in spec:
            inputs[name] = params.make_input(name, shape, spec["recipe"])
        else:
            with np.load(os.path.join(ZOO, e["npz_file"])) as z:
                inputs[name] = z[spec["npz"]].astype(np.float32)
    return sym, arg, aux, inputs, labels


def _raymod_outputs(sym, arg, aux, inputs, labels: dict) -> list[np.ndarray]:
    labels = {n: s for n, s in labels.items() if n in sym.list_arguments()}
    mod = rm.mod.Module(sym, data_names=list(inputs), label_names=list(labels))
    mod.bind(data_shapes=[(n, v.shape) for n, v in inputs.items()],
             label_shapes=list(labels.items()) or None, for_training=False)
    mod.set_params(arg, aux, allow_missing=False, allow_extra=True)
    mod.forward(rm.io.DataBatch(data=list(inputs.values())), is_train=False)
    return [np.asarray(o) for o in mod.get_outputs()]


def _onnx_outputs(path: str, inputs: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def _assert_close(ours, theirs, what: str) -> None:
    assert len(ours) == len(theirs), what
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape, f"{what}: shape {b.shape} vs raymod's {a.shape}"
        scale = max(1.0, float(np.abs(a).max()))
        err = float(np.abs(a - b).max())
        assert err <= TOL * scale, f"{what}: max |onnxruntime - raymod| = {err:.3g}"


def _with_logits(sym):
    """``sym`` grouped with the input of its loss head (the logits of a SoftmaxOutput)."""
    head = sym.topo()[-1]
    children = sym.get_children()
    if head.op is None or not head.op.is_loss or children is None:
        return sym
    return rm.sym.Group([sym, children[0]])


@pytest.mark.parametrize("net", NETS + [pytest.param(n, marks=pytest.mark.skipif(
    not os.environ.get("RAYMOD_ONNX_ALL_ZOO"), reason="large weights (tens of seconds); "
    "set RAYMOD_ONNX_ALL_ZOO=1")) for n in HEAVY])
def test_zoo_network_exports_and_matches(net, tmp_path):
    sym, arg, aux, inputs, labels = _network(net)
    sym = _with_logits(sym)
    path = str(tmp_path / f"{net}.onnx")
    assert rm.onnx.export_model(sym, [arg, aux], [v.shape for v in inputs.values()],
                                onnx_file_path=path) == path
    onnx.checker.check_model(path)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(inputs)
    ours = _raymod_outputs(sym, arg, aux, inputs, labels)
    _assert_close(ours, session.run(None, inputs), net)


def test_predict_equals_onnxruntime_on_a_batch(tmp_path):
    # Module.predict over an iterator (two batches of 3) against one dynamic-batch ONNX run
    sym, arg, aux, _, _ = _network("lenet")
    x = params.make_input("data", (6, 1, 28, 28), {"kind": "uniform", "low": -1.0, "high": 1.0})
    path = str(tmp_path / "lenet.onnx")
    rm.onnx.export_model(sym, {**{f"arg:{k}": v for k, v in arg.items()}}, [(3, 1, 28, 28)],
                         onnx_file_path=path, dynamic=True)
    mod = rm.mod.Module(sym, data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", (3, 1, 28, 28))],
             label_shapes=[("softmax_label", (3,))], for_training=False)
    mod.set_params(arg, aux)
    ours = np.asarray(mod.predict(rm.io.NDArrayIter(x, batch_size=3)))
    _assert_close([ours], _onnx_outputs(path, {"data": x}), "lenet predict, batch 6")


def test_unsupported_operator_is_named(tmp_path):
    sym, arg, aux, inputs, _ = _network("lenet_stn")
    path = tmp_path / "stn.onnx"
    with pytest.raises(UnsupportedOperatorError, match=r"SpatialTransformer \(node '[^']+'\)"):
        rm.onnx.export_model(sym, [arg, aux], [v.shape for v in inputs.values()],
                             onnx_file_path=str(path))
    assert not path.exists()
