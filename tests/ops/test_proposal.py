import math

import numpy as np
import pytest

import raymod as rm
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol

ATTRS = dict(scales=(4, 8), ratios=(0.5, 1, 2), feature_stride=16, rpn_pre_nms_top_n=80,
             rpn_post_nms_top_n=30, threshold=0.6, rpn_min_size=16, output_score=True)


def base_anchors(stride, ratios, scales):
    side = float(stride)
    center = 0.5 * (side - 1)
    out = []
    for r in ratios:
        for s in scales:
            w = math.floor(math.sqrt(math.floor(side * side / r)) + 0.5) * s
            h = math.floor(w / s * r + 0.5) * s
            out.append([center - 0.5 * (w - 1), center - 0.5 * (h - 1),
                        center + 0.5 * (w - 1), center + 0.5 * (h - 1)])
    return np.array(out)


def reference_proposals(cls, deltas, info, scales, ratios, feature_stride, rpn_pre_nms_top_n,
                        rpn_post_nms_top_n, threshold, rpn_min_size, iou_loss=False, **_):
    """Anchor by anchor and box by box, as the Faster R-CNN proposal layer."""
    n, _, h, w = cls.shape
    a = cls.shape[1] // 2
    base = base_anchors(feature_stride, ratios, scales)
    rois, roi_scores = [], []
    for b in range(n):
        im_h, im_w, im_scale = info[b]
        boxes, scores = [], []
        for y in range(h):
            for x in range(w):
                for k in range(a):
                    x1, y1, x2, y2 = base[k] + feature_stride * np.array([x, y, x, y])
                    d = deltas[b, 4 * k:4 * k + 4, y, x]
                    if iou_loss:
                        box = [x1 + d[0], y1 + d[1], x2 + d[2], y2 + d[3]]
                    else:
                        bw, bh = x2 - x1 + 1, y2 - y1 + 1
                        cx, cy = x1 + 0.5 * (bw - 1) + d[0] * bw, y1 + 0.5 * (bh - 1) + d[1] * bh
                        pw, ph = math.exp(d[2]) * bw, math.exp(d[3]) * bh
                        box = [cx - 0.5 * (pw - 1), cy - 0.5 * (ph - 1),
                               cx + 0.5 * (pw - 1), cy + 0.5 * (ph - 1)]
                    box = [min(max(v, 0), lim - 1) for v, lim in zip(box, [im_w, im_h] * 2)]
                    score = cls[b, a + k, y, x]
                    if y >= int(im_h / feature_stride) or x >= int(im_w / feature_stride):
                        score = -1
                    min_size = rpn_min_size * im_scale
                    if box[2] - box[0] + 1 < min_size or box[3] - box[1] + 1 < min_size:
                        g = min_size / 2
                        box = [box[0] - g, box[1] - g, box[2] + g, box[3] + g]
                        score = -1
                    boxes.append(box)
                    scores.append(score)
        pre = len(boxes) if rpn_pre_nms_top_n <= 0 else min(rpn_pre_nms_top_n, len(boxes))
        order = sorted(range(len(boxes)), key=lambda i: -scores[i])[:pre]  # stable
        keep, dead = [], set()
        for i, p in enumerate(order):
            if p in dead:
                continue
            keep.append(p)
            if len(keep) == min(rpn_post_nms_top_n, pre):
                break
            for q in order[i + 1:]:
                bp, bq = boxes[p], boxes[q]
                iw = max(0, min(bp[2], bq[2]) - max(bp[0], bq[0]) + 1)
                ih = max(0, min(bp[3], bq[3]) - max(bp[1], bq[1]) + 1)
                area = lambda z: (z[2] - z[0] + 1) * (z[3] - z[1] + 1)  # noqa: E731
                if iw * ih / (area(bp) + area(bq) - iw * ih) > threshold:
                    dead.add(q)
        for i in range(rpn_post_nms_top_n):  # the kept list repeated to fill every row
            p = keep[i % len(keep)]
            rois.append([b] + boxes[p])
            roi_scores.append([scores[p]])
    return np.array(rois), np.array(roi_scores)


def rpn_inputs(rng, n, h, w, a, stride=16, ties=False):
    cls = rng.uniform(0, 1, (n, 2 * a, h, w))
    if ties:
        cls = np.round(cls * 4) / 4
    info = np.stack([rng.uniform(h * stride * 0.5, h * stride, n),
                     rng.uniform(w * stride * 0.5, w * stride, n), rng.uniform(0.5, 2, n)], 1)
    return {"cls_prob": cls, "bbox_pred": rng.normal(0, 0.3, (n, 4 * a, h, w)), "im_info": info}


@pytest.mark.parametrize("extra", [{}, {"iou_loss": True}, {"rpn_pre_nms_top_n": -1},
                                   {"rpn_post_nms_top_n": 200, "threshold": 0.3}])
def test_proposal_matches_reference(ctx, rng, extra):
    attrs = {**ATTRS, **extra}
    inputs = rpn_inputs(rng, 1, 5, 7, 6, ties=not extra)
    if extra.get("iou_loss"):
        inputs["bbox_pred"] *= 20
    sym = op_symbol("_contrib_Proposal", list(inputs), **attrs)
    check_forward(sym, inputs, list(reference_proposals(*inputs.values(), **attrs)), ctx,
                  rtol=1e-10, atol=1e-9)


def test_multi_proposal_matches_reference_per_image(ctx, rng):
    inputs = rpn_inputs(rng, 3, 6, 5, 6)
    sym = op_symbol("_contrib_MultiProposal", list(inputs), **ATTRS)
    expected = reference_proposals(*inputs.values(), **ATTRS)
    assert expected[0].shape == (90, 5)
    check_forward(sym, inputs, list(expected), ctx, rtol=1e-10, atol=1e-9)


def test_proposal_float32_and_visible_outputs(ctx, rng):
    inputs = {k: v.astype(np.float32) for k, v in rpn_inputs(rng, 2, 4, 4, 6).items()}
    sym = op_symbol("_contrib_MultiProposal", list(inputs), **{**ATTRS, "output_score": False})
    assert sym.list_outputs() == ["op_output"]
    out = bind(sym, inputs, ctx, grad_req="null").forward()[0]
    assert out.dtype == np.float32 and out.shape == (60, 5)
    np.testing.assert_array_equal(as_numpy(out)[:, 0], np.repeat([0, 1], 30))
    assert op_symbol("_contrib_Proposal", list(inputs), output_score=True).list_outputs() == [
        "op_output", "op_score"]


def test_proposal_passes_no_gradient_but_its_network_trains(ctx, rng):
    """As MXNet (zeros): rois feed ROIPooling, whose data gets the only gradient."""
    inputs = rpn_inputs(rng, 1, 4, 5, 6)
    feat = rng.standard_normal((1, 3, 4, 5))
    prop = rm.sym._contrib_Proposal(*[rm.sym.var(k) for k in inputs], **ATTRS)
    net = rm.sym.ROIPooling(rm.sym.var("feat"), prop[0], pooled_size=(2, 2),
                            spatial_scale=1 / 16)
    ex = bind(net, {**inputs, "feat": feat}, ctx)
    out = ex.forward(is_train=True)[0]
    ex.backward([ctx.xp.ones(out.shape)])
    for name in inputs:
        assert not as_numpy(ex.grad_dict[name]).any()
    rois = bind(prop[0], inputs, ctx, grad_req="null").forward()[0]
    alone = bind(rm.sym.ROIPooling(rm.sym.var("feat"), rm.sym.var("rois"), pooled_size=(2, 2),
                                   spatial_scale=1 / 16), {"feat": feat, "rois": rois}, ctx)
    alone.forward(is_train=True)
    alone.backward([ctx.xp.ones(out.shape)])
    assert as_numpy(ex.grad_dict["feat"]).any()
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["feat"]), as_numpy(alone.grad_dict["feat"]))


def test_proposal_shapes_and_errors():
    sym = op_symbol("_contrib_Proposal", ["cls_prob", "bbox_pred", "im_info"])
    args, outs, _ = sym.infer_shape(cls_prob=(1, 24, 38, 50))
    assert args == [(1, 24, 38, 50), (1, 48, 38, 50), (1, 3)] and outs == [(300, 5)]
    multi = op_symbol("_contrib_MultiProposal", ["cls_prob", "bbox_pred", "im_info"],
                      rpn_post_nms_top_n=100)
    assert multi.infer_shape(cls_prob=(4, 24, 38, 50))[1] == [(400, 5)]
    with pytest.raises(ShapeError, match=r"_contrib_Proposal.*batch 1.*got batch 2"):
        sym.infer_shape(cls_prob=(2, 24, 38, 50))
    with pytest.raises(ShapeError, match=r"_contrib_Proposal.*24 channels.*\(1, 18, 38, 50\)"):
        sym.infer_shape(cls_prob=(1, 18, 38, 50))
    with pytest.raises(ShapeError, match=r"_contrib_Proposal.*bbox_pred must be.*"):
        sym.infer_shape(cls_prob=(1, 24, 38, 50), bbox_pred=(1, 24, 38, 50))
    with pytest.raises(ShapeError, match=r"_contrib_MultiProposal.*im_info must be 2-D"):
        multi.infer_shape(cls_prob=(4, 24, 38, 50), im_info=(4, 3, 1))
    with pytest.raises(AttributeValueError, match=r"_contrib_Proposal.*ratios must be positive"):
        op_symbol("_contrib_Proposal", ["cls_prob", "bbox_pred", "im_info"], ratios=(0, 1))
    with pytest.raises(AttributeValueError, match=r"_contrib_Proposal.*scales.*tuple of numbers"):
        op_symbol("_contrib_Proposal", ["cls_prob", "bbox_pred", "im_info"], scales="(a, 1)")
