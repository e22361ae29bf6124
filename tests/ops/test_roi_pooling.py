import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def c_round(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def reference_roi_pool(data, rois, pooled, scale):
    """Bin by bin, as the Fast R-CNN layer: returns the output and each bin's winning cell."""
    n, c, h, w = data.shape
    ph, pw = pooled
    out = np.zeros((len(rois), c, ph, pw), data.dtype)
    winner = np.full(out.shape, -1)
    for r, (b, *box) in enumerate(rois):
        x1, y1, x2, y2 = (c_round(float(v * data.dtype.type(scale))) for v in box)
        bh = data.dtype.type(max(y2 - y1 + 1, 1)) / data.dtype.type(ph)
        bw = data.dtype.type(max(x2 - x1 + 1, 1)) / data.dtype.type(pw)
        for i in range(ph):
            hs = min(max(math.floor(i * bh) + y1, 0), h)
            he = min(max(math.ceil((i + 1) * bh) + y1, 0), h)
            for j in range(pw):
                ws = min(max(math.floor(j * bw) + x1, 0), w)
                we = min(max(math.ceil((j + 1) * bw) + x1, 0), w)
                if he <= hs or we <= ws or not 0 <= int(b) < n:
                    continue
                win = data[int(b), :, hs:he, ws:we].reshape(c, -1)
                out[r, :, i, j] = win.max(1)
                k = win.argmax(1)  # first maximum in row-major order
                winner[r, :, i, j] = (((int(b) * c + np.arange(c)) * h + hs + k // (we - ws)) * w
                                      + ws + k % (we - ws))
    return out, winner


def random_rois(rng, count, batch, scale, size=(9, 11)):
    x1 = rng.uniform(-4, size[1] / scale, count)
    y1 = rng.uniform(-4, size[0] / scale, count)
    x2 = x1 + rng.uniform(-2, 8 / scale, count)
    y2 = y1 + rng.uniform(-2, 8 / scale, count)
    rois = np.stack([rng.integers(-1, batch + 1, count), x1, y1, x2, y2], 1)
    rois[:3, 1:] = np.round(rois[:3, 1:] * 2) / 2  # halves: rounding away from zero matters
    return rois


@pytest.mark.parametrize("pooled, scale", [((2, 2), 1.0), ((3, 2), 0.5), ((1, 4), 0.25)])
def test_roi_pooling_forward_and_gradient(ctx, rng, pooled, scale):
    data = rng.standard_normal((2, 3, 9, 11))
    rois = random_rois(rng, 10, 2, scale)
    sym = op_symbol("ROIPooling", ["data", "rois"], pooled_size=pooled, spatial_scale=scale)
    check_forward(sym, {"data": data, "rois": rois},
                  [reference_roi_pool(data, rois, pooled, scale)[0]], ctx)
    # continuous random data: no ties, so the winners are stable under finite differences
    check_gradient(sym, {"data": data, "rois": rois}, ctx, no_grad=["rois"], max_elements=80)


def test_roi_pooling_mxnet_doc_example(ctx):
    x = np.arange(48, dtype=np.float32).reshape(1, 1, 8, 6)
    rois = np.array([[0, 0, 0, 4, 4]], np.float32)
    for scale, expected in [(1.0, [[14, 16], [26, 28]]), (0.7, [[7, 9], [19, 21]])]:
        sym = op_symbol("ROIPooling", ["data", "rois"], pooled_size=(2, 2), spatial_scale=scale)
        expected = np.array(expected, np.float32)[None, None]
        out = check_forward(sym, {"data": x, "rois": rois}, [expected], ctx)
        assert out[0].dtype == np.float32


def test_roi_pooling_ties_go_to_first_maximum(ctx, rng):
    data = rng.integers(-2, 3, (2, 2, 7, 8)).astype(np.float32)  # many equal values
    rois = random_rois(rng, 8, 2, 1.0, size=(7, 8)).astype(np.float32)
    sym = op_symbol("ROIPooling", ["data", "rois"], pooled_size=(3, 3), spatial_scale=1.0)
    ex = bind(sym, {"data": data, "rois": rois}, ctx, no_grad=["rois"])
    out = ex.forward(is_train=True)[0]
    ref, winner = reference_roi_pool(data, rois, (3, 3), 1.0)
    np.testing.assert_array_equal(as_numpy(out), ref)
    g = rng.standard_normal(ref.shape).astype(np.float32)
    ex.backward([ctx.xp.asarray(g)])
    expected = np.zeros(data.size, np.float64)
    np.add.at(expected, winner[winner >= 0], g[winner >= 0])
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]).ravel(), expected,
                               rtol=1e-6, atol=1e-6)


def test_roi_pooling_shapes_and_errors():
    sym = op_symbol("ROIPooling", ["data", "rois"], pooled_size=(7, 5), spatial_scale=0.0625)
    assert sym.infer_shape(data=(2, 16, 20, 30), rois=(64, 5))[1] == [(64, 16, 7, 5)]
    with pytest.raises(ShapeError, match=r"ROIPooling.*rois must have shape \(num_rois, 5\)"):
        sym.infer_shape(data=(2, 16, 20, 30), rois=(64, 4))
    with pytest.raises(ShapeError, match=r"ROIPooling.*data must be 4-D.*\(2, 16, 20\)"):
        sym.infer_shape(data=(2, 16, 20), rois=(64, 5))
    with pytest.raises(AttributeValueError, match="ROIPooling.*pooled_size.*got \\(7,\\)"):
        op_symbol("ROIPooling", ["data", "rois"], pooled_size=(7,), spatial_scale=1.0)
    with pytest.raises(AttributeValueError, match="ROIPooling.*spatial_scale.*got 2.0"):
        op_symbol("ROIPooling", ["data", "rois"], pooled_size=(2, 2), spatial_scale=2.0)
