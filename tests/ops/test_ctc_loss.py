import itertools

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def _collapse(path, blank):
    """The label an alignment reads as: merge repeats, then drop blanks."""
    out = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return [k for k in out if k != blank]


def _brute_ctc(x, labels, blank, data_len, label_len):
    """-log sum over every alignment (all C**T paths) that collapses to the label."""
    losses = []
    for n in range(x.shape[1]):
        steps = int(data_len[n])
        z = x[:steps, n]
        prob = np.exp(z - z.max(axis=1, keepdims=True))
        prob /= prob.sum(axis=1, keepdims=True)
        target = [int(v) for v in labels[n, :int(label_len[n])]]
        total = 0.0
        for path in itertools.product(range(x.shape[2]), repeat=steps):
            if _collapse(list(path), blank) == target:
                total += np.prod(prob[np.arange(steps), path])
        losses.append(-np.log(total))
    return np.array(losses)


def _lengths(labels, pad):
    is_pad = labels == pad
    return np.where(is_pad.any(axis=1), is_pad.argmax(axis=1), labels.shape[1])


@pytest.mark.parametrize("blank_label", ["first", "last"])
def test_ctc_loss_matches_alignment_enumeration(ctx, rng, blank_label):
    steps, classes = 4, 3
    x = rng.standard_normal((steps, 4, classes))
    if blank_label == "first":  # blank 0, padding 0
        labels, pad, blank = np.array([[1, 2], [2, 2], [1, 0], [0, 0]], float), 0, 0
    else:  # blank C-1, padding -1
        labels, pad, blank = np.array([[0, 1], [1, 1], [0, -1], [-1, -1]], float), -1, 2
    expected = _brute_ctc(x, labels, blank, [steps] * 4, _lengths(labels, pad))
    s = op_symbol("CTCLoss", ["data", "label"], blank_label=blank_label)
    check_forward(s, {"data": x, "label": labels}, expected, ctx, rtol=1e-10)
    check_gradient(s, {"data": x, "label": labels}, ctx, no_grad=["label"])


def test_ctc_loss_with_lengths(ctx, rng):
    x = rng.standard_normal((5, 3, 3))
    labels = np.array([[1, 2, 1], [2, 1, 1], [1, 1, 2]], float)
    data_len, label_len = np.array([5, 3, 4], float), np.array([2, 1, 3], float)
    inputs = {"data": x, "label": labels, "data_lengths": data_len, "label_lengths": label_len}
    s = op_symbol("CTCLoss", list(inputs), use_data_lengths=True, use_label_lengths=True)
    expected = _brute_ctc(x, labels, 0, data_len, label_len)
    check_forward(s, inputs, expected, ctx, rtol=1e-10)
    grads = check_gradient(s, inputs, ctx, no_grad=["label", "data_lengths", "label_lengths"])
    assert not grads["data"][3:, 1].any() and not grads["data"][4:, 2].any()


def test_ctc_loss_aliases_visible_output_and_float32(ctx, rng):
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    labels = np.array([[1, 2], [2, 0]], np.int32)  # integer labels are accepted as in MXNet
    expected = _brute_ctc(x.astype(np.float64), labels, 0, [4, 4], [2, 1])
    for name in ("CTCLoss", "ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"):
        s = op_symbol(name, ["data", "label"])
        assert s.list_outputs() == ["op_output0"]
        out = check_forward(s, {"data": x, "label": labels}, expected, ctx, rtol=1e-5)
        assert out[0].dtype == np.float32


def test_ctc_loss_gradient_scaled_by_head_gradient(ctx, rng):
    # not a loss head: MXNet multiplies each sample's gradient by its head gradient
    x = rng.standard_normal((4, 2, 3))
    labels = np.array([[1, 2], [2, 0]], float)
    ex = bind(op_symbol("CTCLoss", ["data", "label"]), {"data": x, "label": labels}, ctx,
              no_grad=["label"])
    ex.forward(is_train=True)
    ex.backward([ex._xp.asarray(np.array([1.0, 1.0]))])
    unit = as_numpy(ex.grad_dict["data"]).copy()
    ex.forward(is_train=True)
    ex.backward([ex._xp.asarray(np.array([2.0, -0.5]))])
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]), unit * [[[2.0], [-0.5]]],
                               rtol=1e-12)
    # each sample's gradient (softmax minus occupancy) sums to zero over the symbols
    np.testing.assert_allclose(unit.sum(axis=2), 0, atol=1e-12)


def test_ctc_loss_matches_mxnet_values(ctx):
    # recorded from MXNet 1.9.1's mx.nd.CTCLoss on these inputs
    x = np.array([[[0.5, -1.0, 0.2]], [[0.1, 0.3, -0.4]], [[-0.2, 0.8, 0.0]]], np.float32)
    x = np.concatenate([x, x[::-1]], axis=1)
    first = op_symbol("CTCLoss", ["data", "label"])
    check_forward(first, {"data": x, "label": np.array([[1, 2], [2, 0]], np.float32)},
                  np.array([2.4372272, 1.8513981], np.float32), ctx, rtol=1e-6)
    last = op_symbol("CTCLoss", ["data", "label"], blank_label="last")
    check_forward(last, {"data": x, "label": np.array([[1, 0], [0, -1]], np.float32)},
                  np.array([2.7193806, 1.6909904], np.float32), ctx, rtol=1e-6)


def test_ctc_loss_bad_inputs():
    s = op_symbol("CTCLoss", ["data", "label"])
    with pytest.raises(ShapeError, match="CTCLoss: data must be 3-D"):
        s.infer_shape(data=(4, 3), label=(3, 2))
    with pytest.raises(ShapeError, match="CTCLoss: label must be 2-D"):
        s.infer_shape(data=(4, 3, 5), label=(3,))
    with pytest.raises(ShapeError, match="CTCLoss: label has batch size 2"):
        s.infer_shape(data=(4, 3, 5), label=(2, 2))
    with pytest.raises(ShapeError, match="CTCLoss: labels of length 6 exceed the 4 steps"):
        s.infer_shape(data=(4, 3, 5), label=(3, 6))
    with pytest.raises(AttributeValueError, match="blank_label"):
        op_symbol("CTCLoss", ["data", "label"], blank_label="middle")
    s = op_symbol("CTCLoss", ["data", "label", "data_lengths"], use_data_lengths=True)
    with pytest.raises(ShapeError, match="CTCLoss: data_lengths must be a vector"):
        s.infer_shape(data=(4, 3, 5), label=(3, 2), data_lengths=(3, 1))
