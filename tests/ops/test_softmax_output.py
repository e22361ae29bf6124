import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import assert_almost_equal, bind, op_symbol


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def run(ctx, data, label, out_grads=None, **attrs):
    sym = op_symbol("SoftmaxOutput", ["data", "label"], **attrs)
    ex = bind(sym, {"data": data, "label": label}, ctx, no_grad=["label"])
    out = as_numpy(ex.forward(is_train=True)[0])
    ex.backward(out_grads)
    return out, as_numpy(ex.grad_dict["data"])


@pytest.mark.parametrize("normalization,norm", [("null", 1), ("batch", 5), ("valid", 3)])
def test_softmax_output_ignore_and_normalization(ctx, rng, normalization, norm):
    x, label = rng.standard_normal((5, 4)), np.array([0, 3, -1, 9, -1.0])  # 9: no class
    out, grad = run(ctx, x, label, use_ignore=True, grad_scale=2.0, normalization=normalization)
    p = softmax(x, 1)
    expected = (p - (label[:, None] == np.arange(4))) * (label != -1)[:, None] * 2.0 / norm
    assert_almost_equal(out, p)
    assert_almost_equal(grad, expected)


@pytest.mark.parametrize("normalization,norm", [("null", 6), ("batch", 12), ("valid", 10)])
@pytest.mark.parametrize("label_2d", [True, False])
def test_softmax_output_multi_output(ctx, rng, normalization, norm, label_2d):
    x = rng.standard_normal((2, 3, 2, 3))
    label = rng.integers(0, 3, (2, 2, 3)).astype(np.float64)
    label[0, 0, :2] = -1
    out, grad = run(ctx, x, label.reshape(2, 6) if label_2d else label, multi_output=True,
                    use_ignore=True, normalization=normalization, smooth_alpha=0.2)
    p = softmax(x, 1)
    onehot = np.moveaxis(label[..., None] == np.arange(3), -1, 1)  # no smoothing here (MXNet)
    assert_almost_equal(out, p)
    assert_almost_equal(grad, (p - onehot) * (label != -1)[:, None] / norm)


def test_softmax_output_multi_output_label_with_a_class_axis_of_one(ctx, rng):
    # MXNet also takes labels shaped (n, 1, d1, ...) (Faster R-CNN's RPN label)
    x = rng.standard_normal((2, 3, 2, 3))
    label = rng.integers(0, 3, (2, 2, 3)).astype(np.float64)
    sym = op_symbol("SoftmaxOutput", ["data", "label"], multi_output=True)
    assert sym.infer_shape(data=(2, 3, 2, 3), label=(2, 1, 2, 3))[0][1] == (2, 1, 2, 3)
    out, grad = run(ctx, x, label.reshape(2, 1, 2, 3), multi_output=True)
    p = softmax(x, 1)
    onehot = np.moveaxis(label[..., None] == np.arange(3), -1, 1)
    assert_almost_equal(out, p)
    assert_almost_equal(grad, (p - onehot) / 6)   # "null" divides by d1*d2, as MXNet


def test_softmax_output_preserve_shape_and_smoothing(ctx, rng):
    x, label = rng.standard_normal((2, 3, 4)), rng.integers(0, 4, (2, 3)).astype(np.float64)
    out, grad = run(ctx, x, label, preserve_shape=True, smooth_alpha=0.3, normalization="batch")
    onehot = label[..., None] == np.arange(4)
    target = np.where(onehot, 0.7, 0.1)
    assert_almost_equal(out, softmax(x, -1))
    assert_almost_equal(grad, (softmax(x, -1) - target) / 6)


def test_softmax_output_flattens_and_probability_labels(ctx, rng):
    x = rng.standard_normal((2, 3, 4))
    out, grad = run(ctx, x, np.array([5, 11.0]))  # class index over the flattened 12
    p = softmax(x.reshape(2, 12), 1)
    assert_almost_equal(out, p.reshape(2, 3, 4))
    assert_almost_equal(grad.reshape(2, 12), p - (np.array([[5], [11]]) == np.arange(12)))
    x, prob = rng.standard_normal((3, 4)), softmax(rng.standard_normal((3, 4)), 1)
    _, grad = run(ctx, x, prob, grad_scale=0.5, normalization="batch")
    assert_almost_equal(grad, (softmax(x, 1) - prob) * 0.5)


def test_softmax_output_out_grad(ctx, rng):
    x, label = rng.standard_normal((3, 4)), np.array([0, 1, 2.0])
    head = rng.standard_normal((3, 4))
    _, grad = run(ctx, x, label, out_grads=[head], out_grad=True)
    assert_almost_equal(grad, (softmax(x, 1) - (label[:, None] == np.arange(4))) * head)


def test_softmax_output_shapes_and_types():
    sym = op_symbol("Softmax", ["data", "label"], multi_output=True)
    assert sym.infer_shape(data=(2, 3, 4, 5))[0][1] == (2, 20)
    assert sym.infer_shape(data=(2, 3, 4, 5), label=(2, 4, 5))[0][1] == (2, 4, 5)
    plain = op_symbol("SoftmaxOutput", ["data", "label"])
    assert plain.infer_shape(data=(8, 10))[0][1] == (8,)
    assert plain.infer_type(data=np.float32, label=np.int32)[0] == [np.float32, np.int32]
    with pytest.raises(ShapeError, match=r"SoftmaxOutput 'op'.*label.*\(3,\).*\(8, 10\)"):
        plain.infer_shape(data=(8, 10), label=(3,))


class _Pool2:
    threads = 2


@pytest.mark.parametrize("pool", [None, _Pool2()], ids=["one thread", "two threads"])
def test_a_large_softmax_in_row_blocks_is_bit_identical_to_the_whole(monkeypatch, pool):
    from raymod import threads
    from raymod.ops import _row_blocks
    monkeypatch.setattr(threads, "governor", lambda: pool)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((700, 3000)) * 4).astype(np.float32)  # 8.4 MB: cut into blocks
    assert x.nbytes > _row_blocks.MIN_SPLIT_BYTES
    label = rng.integers(0, 3000, 700).astype(np.float32)
    label[:3] = [-1, 3000, 5000]  # out of range: no class, as the one-hot
    out, grad = run(None, x, label)
    e = x - x.max(axis=1, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=1, keepdims=True)
    assert np.array_equal(out, e)
    assert np.array_equal(grad, e - (label[:, None].astype(np.int64) == np.arange(3000)))


def test_row_blocks_cover_every_row_once_on_two_threads(monkeypatch):
    from raymod import threads
    from raymod.ops import _row_blocks
    monkeypatch.setattr(threads, "governor", lambda: _Pool2())
    seen = np.zeros(10_000, np.int64)

    def block(rows):
        seen[rows] += 1

    _row_blocks.for_row_blocks(block, 10_000, 4096)
    assert (seen == 1).all()
