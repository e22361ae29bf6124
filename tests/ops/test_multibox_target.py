import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


def iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return 0.0 if union == 0 else iw * ih / union


def reference_targets(anchor, label, cls_pred, overlap_threshold=0.5, ignore_label=-1.0,
                      negative_mining_ratio=-1.0, negative_mining_thresh=0.5,
                      variances=(0.1, 0.1, 0.2, 0.2), **_):
    """Image by image and anchor by anchor, as the SSD target layer."""
    anchors = anchor[0]
    count = len(anchors)
    variances = [float(np.float32(v)) for v in variances]  # float attributes, as in MXNet
    loc = np.zeros((len(label), count, 4))
    mask = np.zeros((len(label), count, 4))
    cls = np.full((len(label), count), ignore_label)
    for b, objects in enumerate(label):
        n = next((i for i, row in enumerate(objects) if row[0] == -1), len(objects))
        if n == 0:
            continue
        ov = np.array([[iou(a, g[1:5]) for g in objects[:n]] for a in anchors])
        match, best = {}, {}
        free_a, free_g = set(range(count)), set(range(n))
        while free_g:  # bipartite: the largest remaining overlap first
            pairs = [(ov[j, k], -j, -k) for j in sorted(free_a) for k in sorted(free_g)]
            top, j, k = max(pairs)
            if top <= 1e-6:
                break
            match[-j], best[-j] = -k, top
            free_a.discard(-j)
            free_g.discard(-k)
        for j in range(count):
            if j not in match and overlap_threshold > 0 and ov[j].max() > overlap_threshold:
                match[j] = int(ov[j].argmax())
        negatives = set(range(count)) - set(match)
        if negative_mining_ratio > 0:
            want = min(int(len(match) * negative_mining_ratio), count - len(match))
            pool = [j for j in sorted(negatives) if ov[j].max() < negative_mining_thresh]
            p = np.exp(cls_pred[b] - cls_pred[b].max(0))
            background = p[0] / p.sum(0)
            negatives = set(sorted(pool, key=lambda j: background[j])[:want])
        for j in negatives:
            cls[b, j] = 0
        for j, k in match.items():
            a, g = anchors[j], objects[k, 1:5]
            aw, ah, gw, gh = a[2] - a[0], a[3] - a[1], g[2] - g[0], g[3] - g[1]
            loc[b, j] = [((g[0] + g[2]) - (a[0] + a[2])) / 2 / aw / variances[0],
                         ((g[1] + g[3]) - (a[1] + a[3])) / 2 / ah / variances[1],
                         math.log(gw / aw) / variances[2], math.log(gh / ah) / variances[3]]
            mask[b, j] = 1
            cls[b, j] = objects[k, 0] + 1
    return [loc.reshape(len(label), -1), mask.reshape(len(label), -1), cls]


def make_inputs(rng, count, objects_per_image, classes=4, grid=None):
    cx, cy = rng.uniform(0, 1, count), rng.uniform(0, 1, count)
    w, h = rng.uniform(0.05, 0.5, count), rng.uniform(0.05, 0.5, count)
    anchor = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)[None]
    label = -np.ones((len(objects_per_image), 6, 5))
    for b, n in enumerate(objects_per_image):
        x1, y1 = rng.uniform(0, 0.7, n), rng.uniform(0, 0.7, n)
        label[b, :n] = np.stack([rng.integers(0, classes, n), x1, y1,
                                 x1 + rng.uniform(0.05, 0.4, n), y1 + rng.uniform(0.05, 0.4, n)], 1)
    if grid:  # coordinates on a coarse grid: many equal overlaps
        anchor = np.round(anchor * grid) / grid
        anchor[..., 2:] = np.maximum(anchor[..., 2:], anchor[..., :2] + 1 / grid)
        real = label[:, :, :1] != -1
        label[:, :, 1:] = np.where(real, np.round(label[:, :, 1:] * grid) / grid, -1)
        grown = np.maximum(label[:, :, 3:], label[:, :, 1:3] + 1 / grid)
        label[:, :, 3:] = np.where(real, grown, -1)
    cls_pred = rng.standard_normal((len(objects_per_image), classes + 1, count))
    return {"anchor": anchor, "label": label, "cls_pred": cls_pred}


@pytest.mark.parametrize("attrs, grid", [
    ({}, 8), ({"overlap_threshold": 0.3}, None),
    ({"negative_mining_ratio": 3}, None),
    ({"negative_mining_ratio": 2.5, "overlap_threshold": 0, "ignore_label": -2,
      "negative_mining_thresh": 0.3, "variances": (0.2, 0.2, 0.1, 0.1)}, None),
    ({"negative_mining_ratio": 3}, 4)])
def test_multibox_target_matches_reference(ctx, rng, attrs, grid):
    inputs = make_inputs(rng, 150, [3, 0, 5, 1], grid=grid)
    sym = op_symbol("_contrib_MultiBoxTarget", list(inputs), **attrs)
    check_forward(sym, inputs, reference_targets(*inputs.values(), **attrs), ctx,
                  rtol=1e-10, atol=1e-12)


def test_multibox_target_float32_and_no_gradient(ctx, rng):
    inputs = {k: v.astype(np.float32) for k, v in make_inputs(rng, 80, [2, 4]).items()}
    sym = op_symbol("_contrib_MultiBoxTarget", list(inputs), negative_mining_ratio=3)
    assert sym.list_outputs() == ["op_loc_target", "op_loc_mask", "op_cls_target"]
    ex = bind(sym, inputs, ctx)
    outs = ex.forward(is_train=True)
    assert [o.dtype for o in outs] == [np.float32] * 3
    expected = reference_targets(*[v.astype(np.float64) for v in inputs.values()],
                                 negative_mining_ratio=3)
    for out, ref in zip(outs, expected):
        np.testing.assert_allclose(as_numpy(out), ref, rtol=2e-5, atol=2e-5)
    ex.backward([ctx.xp.ones(o.shape, o.dtype) for o in outs])
    assert not any(as_numpy(g).any() for g in ex.grad_dict.values())


def test_multibox_target_shapes_and_errors():
    sym = op_symbol("_contrib_MultiBoxTarget", ["anchor", "label", "cls_pred"])
    _, outs, _ = sym.infer_shape(anchor=(1, 100, 4), label=(8, 20, 5), cls_pred=(8, 21, 100))
    assert outs == [(8, 400), (8, 400), (8, 100)]
    with pytest.raises(ShapeError, match=r"MultiBoxTarget.*anchor must be \(1, num_anchors, 4\)"):
        sym.infer_shape(anchor=(2, 100, 4), label=(8, 20, 5), cls_pred=(8, 21, 100))
    with pytest.raises(ShapeError, match=r"MultiBoxTarget.*label rows need at least 5"):
        sym.infer_shape(anchor=(1, 100, 4), label=(8, 20, 4), cls_pred=(8, 21, 100))
    with pytest.raises(ShapeError, match=r"MultiBoxTarget.*cls_pred must be \(batch, classes"):
        sym.infer_shape(anchor=(1, 100, 4), label=(8, 20, 5), cls_pred=(8, 21, 99))
    with pytest.raises(ShapeError, match=r"MultiBoxTarget.*label must be 3-D"):
        sym.infer_shape(anchor=(1, 100, 4), label=(8, 100), cls_pred=(8, 21, 100))
    with pytest.raises(AttributeValueError, match=r"MultiBoxTarget.*'variances' needs 4 values"):
        op_symbol("_contrib_MultiBoxTarget", ["anchor", "label", "cls_pred"], variances=(1, 2))
