import numpy as np
import pytest

from raymod.base import AttributeValueError, MXNetError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

INDICES = np.array([[-1.0, 0.0], [3.0, 5.7]])  # negative, in range, past the end, fractional


def reference(a, indices, axis, mode):
    n = a.shape[axis]
    idx = np.trunc(indices).astype(int)
    idx = np.clip(idx, 0, n - 1) if mode == "clip" else idx % n
    moved = np.moveaxis(a, axis, 0)[idx]  # (indices..., other axes...)
    return np.moveaxis(moved, list(range(idx.ndim)), list(range(axis % a.ndim,
                                                                 axis % a.ndim + idx.ndim)))


@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take(ctx, rng, mode, axis):
    s = op_symbol("take", ["a", "indices"], axis=axis, mode=mode)
    inputs = {"a": rng.standard_normal((2, 3, 4)), "indices": INDICES}
    check_forward(s, inputs, lambda a, indices: reference(a, indices, axis, mode), ctx)
    check_gradient(s, inputs, ctx, no_grad=["indices"])
    inputs32 = {"a": inputs["a"].astype(np.float32), "indices": INDICES.astype(np.float32)}
    out = check_forward(s, inputs32, reference(inputs32["a"], INDICES, axis, mode), ctx)
    assert out[0].dtype == np.float32


def test_take_clip_and_wrap_match_mxnet():
    # recorded from MXNet 1.9.1: take(arange(12).reshape(3, 4), [[-1, 0], [3, 5]], axis=0)
    a, idx = np.arange(12.0).reshape(3, 4), np.array([[-1.0, 0], [3, 5]])
    clip = op_symbol("take", ["a", "indices"], mode="clip").eval(a=a, indices=idx)[0]
    wrap = op_symbol("take", ["a", "indices"], mode="wrap").eval(a=a, indices=idx)[0]
    np.testing.assert_array_equal(clip[:, :, 0], [[0, 0], [8, 8]])
    np.testing.assert_array_equal(wrap[:, :, 0], [[8, 0], [0, 8]])


def test_take_repeated_indices_add_their_gradients(ctx):
    s = op_symbol("take", ["a", "indices"], axis=1)
    ex = bind(s, {"a": np.zeros((2, 3)), "indices": np.array([0.0, 0, 2])}, ctx,
              no_grad=["indices"])
    ex.forward(is_train=True)
    ex.backward([np.array([[1.0, 2, 3], [4, 5, 6]])])
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["a"]), [[3, 0, 3], [9, 0, 6]])


def test_take_raise_mode(ctx):
    s = op_symbol("take", ["a", "indices"], mode="raise")
    a = np.arange(3.0)
    check_forward(s, {"a": a, "indices": np.array([2.0, 0.0])}, np.array([2.0, 0.0]), ctx)
    for bad in (-1.0, 3.0):  # as MXNet, negative indices are out of range too
        with pytest.raises(MXNetError, match=r"take: mode='raise' and indices outside \[0, 3\)"):
            bind(s, {"a": a, "indices": np.array([bad])}, ctx).forward()


def test_take_bad_input():
    with pytest.raises(ShapeError, match=r"take 'op'.*axis=2 is out of range for data of "
                                         r"shape \(3, 4\)"):
        op_symbol("take", ["a", "indices"], axis=2).infer_shape(a=(3, 4), indices=(2,))
    with pytest.raises(AttributeValueError, match="take: attribute 'mode' must be one of"):
        op_symbol("take", ["a", "indices"], mode="nearest")
