import ast
import json
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import assert_almost_equal, bind, op_symbol

FIXTURE = Path(__file__).parent.parent / "fixtures" / "mxnet" / "svm_output.json"


def reference_grad(x, label, margin=1.0, reg=1.0, use_linear=False):
    """The one-vs-all SVM gradient written out: target t = +1 on the labelled class, -1
    elsewhere; slack s = margin - t * x; L1 (hinge C*max(0, s)): -t*C*[s > 0];
    L2 (squared hinge C*max(0, s)^2): -2*t*C*max(0, s). Classes on the last axis."""
    k = x.shape[-1]
    flat = x.reshape(-1, k).astype(np.float64)
    t = np.where(label.reshape(-1, 1).astype(np.int64) == np.arange(k), 1.0, -1.0)
    s = margin - t * flat
    grad = -t * reg * (s > 0) if use_linear else -2 * t * reg * np.maximum(s, 0)
    return grad.reshape(x.shape)


def run(ctx, data, label, grad_req="write", grad_init=None, **attrs):
    ex = bind(op_symbol("SVMOutput", ["data", "label"], **attrs), {"data": data, "label": label},
              ctx, no_grad=["label"], grad_req=grad_req)
    if grad_init is not None:
        ex.grad_dict["data"][...] = ex.grad_dict["data"].dtype.type(grad_init)
    out = as_numpy(ex.forward(is_train=True)[0])
    ex.backward()  # a loss head: no head gradient needed
    return out, as_numpy(ex.grad_dict["data"])


@pytest.mark.parametrize("use_linear", [False, True])
@pytest.mark.parametrize("margin,reg", [(1.0, 1.0), (1.5, 0.5), (0.25, 3.0)])
def test_svm_output_matches_the_written_out_gradient(ctx, rng, use_linear, margin, reg):
    x = rng.standard_normal((6, 4)) * 1.5
    label = rng.integers(0, 4, 6).astype(np.float64)
    out, grad = run(ctx, x, label, margin=margin, regularization_coefficient=reg,
                    use_linear=use_linear)
    assert_almost_equal(out, x)  # identity forward
    expected = reference_grad(x, label, margin, reg, use_linear)
    assert_almost_equal(grad, expected)
    assert (expected != 0).any() and (expected == 0).any()  # both sides of the margin seen


def test_svm_output_l2_gradient_is_derivative_of_squared_hinge(rng):
    x, label = rng.standard_normal((3, 4)), np.array([0, 3, 1.0])
    t = np.where(label[:, None] == np.arange(4), 1.0, -1.0)
    _, grad = run(rm.cpu(), x, label, margin=0.7, regularization_coefficient=2.0)

    def loss(z):  # summed over the batch: loss heads emit per-sample gradients
        return (2.0 * np.maximum(0, 0.7 - t * z) ** 2).sum()
    eye = np.eye(x.size).reshape((x.size,) + x.shape) * 1e-6
    numeric = np.array([(loss(x + e) - loss(x - e)) / 2e-6 for e in eye]).reshape(x.shape)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-8)


def _fixture():
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("case", _fixture()["cases"], ids=lambda c: c["name"])
def test_svm_output_against_mxnet(ctx, case):
    dtype = np.dtype(case["dtype"])
    x, label = np.array(case["data"], dtype), np.array(case["label"], dtype)
    out, grad = run(ctx, x, label, **case["attrs"])
    assert out.dtype == grad.dtype == dtype
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(grad, np.array(case["grad"], dtype))  # bit for bit


def test_svm_output_grad_req_add_accumulates(ctx):
    # MXNet 1.9.1's kernel ignores grad_req and overwrites (recorded in the fixture);
    # raymod adds, as grad_req='add' means (docs/differences.md)
    fix = _fixture()
    case = next(c for c in fix["cases"] if c["name"] == fix["grad_req_add"]["case"])
    x, label = np.array(case["data"], np.float32), np.array(case["label"], np.float32)
    _, grad = run(ctx, x, label, grad_req="add", grad_init=1.0)
    np.testing.assert_array_equal(fix["grad_req_add"]["grad"], case["grad"])
    assert_almost_equal(grad, np.array(case["grad"], np.float32) + 1.0)


def test_svm_output_shapes_and_label_name():
    fix = _fixture()
    svm = rm.sym.SVMOutput(data=rm.sym.Variable("data"), name="svm")
    assert svm.list_arguments() == fix["list_arguments"] == ["data", "svm_label"]
    assert svm.list_outputs() == fix["list_outputs"]
    for dshape, expected in fix["infer_shape"].items():
        args, outs, aux = svm.infer_shape(data=ast.literal_eval(dshape))
        assert [list(s) for s in args] == expected["args"]
        assert [list(s) for s in outs] == expected["outs"] and aux == []
    assert svm.infer_shape_partial(data=(5, 0))[0] == [(5, 0), (5,)]
    assert svm.infer_type(data=np.float64)[0] == [np.float64, np.float64]
    with pytest.raises(ShapeError, match=r"SVMOutput 'svm'.*label.*\(4, 1\).*\(4,\)"):
        svm.infer_shape(data=(4, 3), svm_label=(4, 1))
    with pytest.raises(ShapeError, match=r"SVMOutput 'svm'.*batch and a class axis.*\(4,\)"):
        svm.infer_shape(data=(4,))


@pytest.mark.parametrize("key,value", [("margin", "wide"), ("regularization_coefficient", "x"),
                                       ("use_linear", "maybe")])
def test_svm_output_bad_attributes_name_the_attribute(key, value):
    with pytest.raises(AttributeValueError, match=rf"SVMOutput: attribute '{key}'.*{value}"):
        rm.sym.SVMOutput(data=rm.sym.Variable("data"), **{key: value})


@pytest.mark.filterwarnings("ignore:Parameters already initialized")
def test_svm_output_mlp_learns_with_module_fit():
    rng = np.random.default_rng(0)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    label = np.repeat(np.arange(3), 20)
    x = (centers[label] + 0.3 * rng.standard_normal((60, 2))).astype(np.float32)
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=8, name="fc1")
    net = rm.sym.FullyConnected(rm.sym.Activation(net, act_type="relu"), num_hidden=3,
                                name="fc2")
    net = rm.sym.SVMOutput(data=net, name="svm", margin=1.0, use_linear=True)
    it = rm.io.NDArrayIter(x, label.astype(np.float32), batch_size=20, shuffle=True,
                           label_name="svm_label")
    mod = rm.mod.Module(net, label_names=["svm_label"], context=rm.cpu())
    rm.random.seed(1)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(rm.init.Xavier())
    before = mod.score(it, "acc")[0][1]
    it.reset()  # score leaves the iterator at its end, as MXNet
    mod.fit(it, num_epoch=15, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "rescale_grad": 1 / 20})
    after = mod.score(it, "acc")[0][1]
    assert after > before and after >= 0.95, (before, after)
