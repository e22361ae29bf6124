import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, MXNetError, ShapeError
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def bilinear(plane, y, x):
    """Value at (y, x) as MXNet's ROIAlign samples it (clamped border, 0 beyond one cell)."""
    h, w = plane.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * plane[y0, x0] + (1 - ly) * lx * plane[y0, x1]
            + ly * (1 - lx) * plane[y1, x0] + ly * lx * plane[y1, x1])


def reference_roi_align(data, rois, pooled, scale, ratio=-1, sensitive=False, aligned=False):
    n, c, _, _ = data.shape
    ph, pw = pooled
    out_c = c // (ph * pw) if sensitive else c
    out = np.zeros((len(rois), out_c, ph, pw))
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        if not 0 <= int(b) < n:
            continue
        off = 0.5 if aligned else 0.0
        x1, y1, x2, y2 = (v * scale - off for v in (x1, y1, x2, y2))
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else math.ceil(bh)
        gw = ratio if ratio > 0 else math.ceil(bw)
        for ch in range(out_c):
            for i in range(ph):
                for j in range(pw):
                    src = ch * ph * pw + i * pw + j if sensitive else ch
                    total = sum(bilinear(data[int(b), src], y1 + i * bh + (u + 0.5) * bh / gh,
                                         x1 + j * bw + (v + 0.5) * bw / gw)
                                for u in range(gh) for v in range(gw))
                    out[r, ch, i, j] = total / (gh * gw)
    return out


def random_rois(rng, count, scale, positive=False):
    x1 = rng.uniform(-3, 12 / scale, count)
    y1 = rng.uniform(-3, 10 / scale, count)
    lo = 0.3 if positive else -2
    return np.stack([rng.integers(0, 2, count), x1, y1, x1 + rng.uniform(lo, 9 / scale, count),
                     y1 + rng.uniform(lo, 9 / scale, count)], 1)


@pytest.mark.parametrize("scale, ratio, sensitive, aligned", [
    (1.0, -1, False, False), (0.5, 2, False, False), (0.25, -1, False, True),
    (0.5, 3, True, False), (1.0, 1, True, True)])
def test_roi_align_forward_and_gradient(ctx, rng, scale, ratio, sensitive, aligned):
    pooled = (3, 2)
    data = rng.standard_normal((2, 12 if sensitive else 3, 9, 11))
    rois = random_rois(rng, 8, scale, positive=aligned)
    sym = op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=pooled, spatial_scale=scale,
                    sample_ratio=ratio, position_sensitive=sensitive, aligned=aligned)
    expected = reference_roi_align(data, rois, pooled, scale, ratio, sensitive, aligned)
    check_forward(sym, {"data": data, "rois": rois}, [expected], ctx, rtol=1e-10, atol=1e-12)
    check_gradient(sym, {"data": data, "rois": rois}, ctx, no_grad=["rois"], max_elements=80)


def test_roi_align_float32_and_invalid_batch_index(ctx, rng):
    data = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    rois = np.array([[0, 1, 1, 4, 3.5], [-1, 1, 1, 4, 4], [3, 0, 0, 2, 2]], np.float32)
    sym = op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(2, 2), spatial_scale=1.0)
    expected = reference_roi_align(data.astype(np.float64), rois, (2, 2), 1.0)
    out = check_forward(sym, {"data": data, "rois": rois}, [expected], ctx, rtol=1e-5, atol=1e-6)
    assert out[0].dtype == np.float32
    assert not np.asarray(expected[1:]).any()  # rois outside the batch give zeros


def test_roi_align_aligned_needs_positive_rois(rng):
    sym = op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(2, 2), spatial_scale=1.0,
                    aligned=True)
    ex = bind(sym, {"data": rng.standard_normal((1, 1, 5, 5)),
                    "rois": np.array([[0, 1, 1, 3, 3], [0, 2, 2, 2, 4]], float)})
    with pytest.raises(MXNetError, match="aligned=True.*roi 1"):
        ex.forward()


def test_roi_align_shapes_and_errors():
    sym = op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(7, 7), spatial_scale=0.25)
    assert sym.infer_shape(data=(2, 16, 20, 30), rois=(64, 5))[1] == [(64, 16, 7, 7)]
    ps = op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(2, 3), spatial_scale=0.25,
                   position_sensitive=True)
    assert ps.infer_shape(data=(2, 12, 20, 30), rois=(4, 5))[1] == [(4, 2, 2, 3)]
    with pytest.raises(ShapeError, match=r"ROIAlign.*divisible by 2\*3.*\(2, 10, 20, 30\)"):
        ps.infer_shape(data=(2, 10, 20, 30), rois=(4, 5))
    with pytest.raises(ShapeError, match=r"_contrib_ROIAlign.*rois must have shape.*\(4, 4\)"):
        sym.infer_shape(data=(2, 16, 20, 30), rois=(4, 4))
    with pytest.raises(ShapeError, match=r"_contrib_ROIAlign.*data must be 4-D.*\(16, 20, 30\)"):
        sym.infer_shape(data=(16, 20, 30), rois=(4, 5))
    with pytest.raises(AttributeValueError, match="_contrib_ROIAlign.*spatial_scale.*-1.0"):
        op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(2, 2), spatial_scale=-1.0)
    with pytest.raises(AttributeValueError, match=r"_contrib_ROIAlign.*pooled_size.*\(0, 2\)"):
        op_symbol("_contrib_ROIAlign", ["data", "rois"], pooled_size=(0, 2), spatial_scale=1.0)
