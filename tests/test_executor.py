"""Executor behaviours MXNet 1.9.1 code relies on: backward after an inference forward,
outputs that exist from bind on, and ``reshape`` returning views of the original arrays."""
import numpy as np
import pytest

import raymod as rm
from raymod.base import MXNetError
from raymod.context import as_numpy

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


# each test runs on cpu and gpu (CuPy, or its stand-in): values are compared on the host
def assert_array_equal(actual, expected):
    np.testing.assert_array_equal(as_numpy(actual), as_numpy(expected))


def assert_allclose(actual, expected, **tolerances):
    np.testing.assert_allclose(as_numpy(actual), as_numpy(expected), **tolerances)


def on(ctx, value):
    """``value`` on ``ctx``'s device (a CuPy array refuses a host array written into it)."""
    return ctx.xp.asarray(value)


def test_backward_after_inference_forward_of_dropout_passes_gradients_through(ctx):
    # MXNet 1.9.1: inference Dropout is the identity, and so is its gradient
    ex = rm.sym.Dropout(rm.sym.Variable("data"), p=0.5).simple_bind(ctx, data=(3, 4))
    out = ex.forward(is_train=False, data=X)[0]
    assert_array_equal(out, X)
    ex.backward([np.full((3, 4), 2.0, np.float32)])
    assert_array_equal(ex.grad_dict["data"], np.full((3, 4), 2.0))


def test_backward_after_inference_forward_matches_training_forward_for_deterministic_ops(ctx):
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2, name="fc")
    ex = net.simple_bind(ctx, data=(3, 4))
    ex.arg_dict["fc_weight"][...] = on(ctx, np.linspace(-1, 1, 8).reshape(2, 4))
    ex.arg_dict["fc_bias"][...] = on(ctx, [0.5, -0.5])
    head = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    ex.forward(is_train=True, data=X)
    ex.backward([head])
    trained = {k: v.copy() for k, v in ex.grad_dict.items()}
    ex.forward(is_train=False, data=X)
    ex.backward([head])
    for name, grad in trained.items():
        assert_allclose(ex.grad_dict[name], grad, rtol=1e-6)


def test_backward_after_inference_forward_of_batch_norm_is_the_inference_gradient(ctx):
    # the inference forward normalises with the moving statistics, which are constants
    net = rm.sym.BatchNorm(rm.sym.Variable("data"), fix_gamma=False, eps=1e-3, name="bn")
    ex = net.simple_bind(ctx, data=(3, 4))
    gamma, beta = np.array([1.0, 2.0, 0.5, -1.0]), np.array([0.1, 0.2, 0.3, 0.4])
    mean, var = np.array([1.0, 5.0, 6.0, 7.0]), np.array([2.0, 4.0, 9.0, 16.0])
    ex.arg_dict["bn_gamma"][...] = on(ctx, gamma)
    ex.arg_dict["bn_beta"][...] = on(ctx, beta)
    ex.aux_dict["bn_moving_mean"][...] = on(ctx, mean)
    ex.aux_dict["bn_moving_var"][...] = on(ctx, var)
    out = ex.forward(is_train=False, data=X)[0]
    inv_std = 1 / np.sqrt(var + 1e-3)
    assert_allclose(out, (X - mean) * inv_std * gamma + beta, rtol=1e-5)
    head = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    ex.backward([head])
    assert_allclose(ex.grad_dict["data"], head * gamma * inv_std, rtol=1e-5)
    assert_allclose(ex.grad_dict["bn_gamma"],
                               (head * (X - mean) * inv_std).sum(0), rtol=1e-5)
    assert_allclose(ex.grad_dict["bn_beta"], head.sum(0), rtol=1e-5)
    # the moving statistics were not touched
    assert_array_equal(ex.aux_dict["bn_moving_mean"], mean)


def test_an_executor_with_nothing_to_differentiate_keeps_nothing_for_backward(ctx):
    # BatchNorm saves its centred data for backward: a whole activation per layer, which an
    # inference-only executor must not hold between calls
    net = rm.sym.BatchNorm(rm.sym.Variable("data"), fix_gamma=False, name="bn")
    for grad_req, kept in (("null", False), ("write", True)):
        ex = net.simple_bind(ctx, data=(3, 4), grad_req=grad_req)
        for is_train in (False, True):
            ex.forward(is_train=is_train, data=X)
            assert any(s is not None for s in ex._saved) == kept


def test_backward_needs_some_forward_first(ctx):
    ex = rm.sym.Dropout(rm.sym.Variable("data"), p=0.5).simple_bind(ctx, data=(3, 4))
    with pytest.raises(MXNetError, match="forward"):
        ex.backward([np.ones((3, 4), np.float32)])


def test_outputs_exist_before_the_first_forward(ctx):
    data = rm.sym.Variable("data")
    net = rm.sym.Group([rm.sym.FullyConnected(data, num_hidden=2, name="fc"), data])
    ex = net.simple_bind(ctx, data=(3, 4), type_dict={"data": np.float64})
    assert [o.shape for o in ex.outputs] == [(3, 2), (3, 4)]
    assert [o.dtype for o in ex.outputs] == [np.float64, np.float64]
    assert ex.outputs[1] is ex.arg_dict["data"]  # a variable head is its argument array
    assert list(ex.output_dict) == ["fc_output", "data"]


def _fc_softmax(ctx):
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2, name="fc")
    net = rm.sym.SoftmaxOutput(net, name="sm")
    ex = net.simple_bind(ctx, data=(4, 3))
    ex.arg_dict["data"][...] = on(ctx, np.arange(12).reshape(4, 3))
    ex.arg_dict["fc_weight"][...] = 1
    return ex


def test_reshape_to_a_smaller_batch_returns_views_of_the_original_arrays(ctx):
    ex = _fc_softmax(ctx)
    small = ex.reshape(partial_shaping=True, data=(2, 3))
    assert_array_equal(small.arg_dict["data"], [[0, 1, 2], [3, 4, 5]])
    small.arg_dict["data"][...] = -1  # writes land in the original, as in MXNet
    assert_array_equal(ex.arg_dict["data"][:2], -np.ones((2, 3)))
    assert small.arg_dict["fc_weight"] is ex.arg_dict["fc_weight"]
    assert small.grad_dict["fc_weight"] is ex.grad_dict["fc_weight"]
    assert np.shares_memory(small.arg_dict["sm_label"], ex.arg_dict["sm_label"])
    assert small.arg_dict["sm_label"].shape == (2,)
    out = small.forward(is_train=True)[0]
    assert out.shape == (2, 2)
    small.backward()
    assert small.grad_dict["data"].shape == (2, 3)


def test_reshape_shares_the_outputs_memory_in_both_directions(ctx):
    # MXNet 1.9.1's test_reshape: the smaller executor's outputs are the first rows of the
    # original's, before and after either one runs
    fc = rm.sym.FullyConnected(rm.sym.Variable("x"), num_hidden=4)
    ex = fc.simple_bind(ctx, x=(5, 4), grad_req="null")
    ex.arg_arrays[0][:] = 1
    ex.arg_arrays[1][:] = 1
    ex.arg_arrays[2][:] = 0
    small = ex.reshape(x=(3, 4))
    small.forward(is_train=False)
    assert_array_equal(small.outputs[0], np.full((3, 4), 4))
    assert_array_equal(ex.outputs[0][:3], np.full((3, 4), 4))
    ex.arg_arrays[1][:] = 2
    ex.forward(is_train=False)
    assert_array_equal(ex.outputs[0], np.full((5, 4), 8))
    assert_array_equal(small.outputs[0], np.full((3, 4), 8))
    assert np.shares_memory(small.outputs[0], ex.outputs[0])


def test_reshape_checks_as_mxnet(ctx):
    ex = _fc_softmax(ctx)
    # the label's shape follows the batch but was not given
    with pytest.raises(MXNetError, match="sm_label.*partial_shaping=True"):
        ex.reshape(data=(2, 3))
    both = ex.reshape(data=(2, 3), sm_label=(2,))
    assert np.shares_memory(both.arg_dict["data"], ex.arg_dict["data"])
    with pytest.raises(MXNetError, match="data.*larger.*allow_up_sizing=True"):
        ex.reshape(partial_shaping=True, data=(8, 3))
    big = ex.reshape(partial_shaping=True, allow_up_sizing=True, data=(8, 3))
    assert big.arg_dict["data"].shape == (8, 3)
    assert not np.shares_memory(big.arg_dict["data"], ex.arg_dict["data"])
    assert big.arg_dict["fc_weight"] is ex.arg_dict["fc_weight"]


def test_reshape_of_a_parameter_is_a_view_of_its_first_elements(ctx):
    ex = _fc_softmax(ctx)
    ex.arg_dict["fc_weight"][...] = on(ctx, np.arange(6).reshape(2, 3))
    narrow = ex.reshape(partial_shaping=True, data=(4, 2))
    assert_array_equal(narrow.arg_dict["fc_weight"], [[0, 1], [2, 3]])
    assert np.shares_memory(narrow.arg_dict["fc_weight"], ex.arg_dict["fc_weight"])


@pytest.mark.parametrize("kernel", [(3, 3), (1, 1)], ids=["im2col", "pointwise"])
@pytest.mark.parametrize("shared", [False, True], ids=["one_reader", "weight_read_twice"])
def test_parameter_gradients_written_in_place_match_accumulated_ones(ctx, shared, kernel):
    """Convolution and FullyConnected write a parameter's gradient straight into its grad
    array when nothing else reads the parameter; 'add' and a weight shared by two layers go
    through the executor's sum. Both give the same values."""
    data, w = rm.sym.Variable("data"), rm.sym.Variable("w")
    pad = tuple(k // 2 for k in kernel)
    net = rm.sym.Convolution(data, weight=w, kernel=kernel, pad=pad, num_filter=2, name="c1")
    if shared:
        net = rm.sym.Convolution(net, weight=w, kernel=kernel, pad=pad, num_filter=2,
                                 name="c2")
    net = rm.sym.FullyConnected(rm.sym.Flatten(net), num_hidden=3, name="fc")
    rng = np.random.default_rng(0)
    values = {"data": rng.standard_normal((2, 2, 5, 5)), "w": rng.standard_normal((2, 2) + kernel),
              "c1_bias": rng.standard_normal(2), "fc_weight": rng.standard_normal((3, 50)),
              "fc_bias": rng.standard_normal(3)}
    if shared:
        values["c2_bias"] = rng.standard_normal(2)
    head = on(ctx, rng.standard_normal((2, 3)).astype(np.float32))
    grads = {}
    for req in ("write", "add"):
        exe = net.simple_bind(ctx, grad_req=req, data=(2, 2, 5, 5))
        for name, value in values.items():
            exe.arg_dict[name][:] = on(ctx, value.astype(np.float32))
        bound = dict(exe.grad_dict)
        for name in exe.grad_dict:
            exe.grad_dict[name][:] = 0
        exe.forward(is_train=True)
        exe.backward(head)
        assert all(exe.grad_dict[n] is bound[n] for n in bound)  # the same arrays
        grads[req] = {n: as_numpy(g).copy() for n, g in exe.grad_dict.items()}
    for name, value in grads["write"].items():
        np.testing.assert_allclose(value, grads["add"][name], rtol=1e-5, atol=1e-6)
        assert np.abs(value).sum() > 0, name
