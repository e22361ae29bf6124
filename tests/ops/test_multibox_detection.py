import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


def overlap(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return 0.0 if union <= 0 else iw * ih / union


def reference_detection(cls_prob, loc_pred, anchor, clip=True, threshold=0.01, nms_threshold=0.5,
                        force_suppress=False, variances=(0.1, 0.1, 0.2, 0.2), nms_topk=-1, **_):
    """Anchor by anchor, then image by image: decode, compact, sort, NMS (MXNet's layout)."""
    v = [float(np.float32(x)) for x in variances]  # float attributes, as in MXNet
    batch, classes, count = cls_prob.shape
    out = -np.ones((batch, count, 6))
    for b in range(batch):
        rows = []
        for i in range(count):
            probs = cls_prob[b, 1:, i]
            cid = int(np.argmax(probs)) + 1 if classes > 1 else 0
            score = probs[cid - 1] if classes > 1 else -1.0
            if cid > 0 and score < threshold:
                cid = 0
            al, at, ar, ab = anchor[0, i]
            px, py, pw, ph = loc_pred[b, 4 * i:4 * i + 4]
            cx, cy = px * v[0] * (ar - al) + (al + ar) / 2, py * v[1] * (ab - at) + (at + ab) / 2
            hw, hh = math.exp(pw * v[2]) * (ar - al) / 2, math.exp(ph * v[3]) * (ab - at) / 2
            box = [cx - hw, cy - hh, cx + hw, cy + hh]
            if clip:
                box = [min(max(z, 0.0), 1.0) for z in box]
            if cid > 0:
                rows.append([cid - 1, score] + box)
        if not rows:
            continue
        out[b, :len(rows)] = rows
        if not 0 < nms_threshold <= 1:
            continue
        ranked = sorted(rows, key=lambda r: -r[1])  # stable
        keep = len(ranked) if nms_topk <= 0 else min(nms_topk, len(ranked))
        out[b, keep:len(rows), 0] = -1
        out[b, :keep] = ranked[:keep]
        for i in range(keep):
            if out[b, i, 0] < 0:
                continue
            for j in range(i + 1, keep):
                same = force_suppress or out[b, i, 0] == out[b, j, 0]
                iou = overlap(out[b, i, 2:], out[b, j, 2:])
                if out[b, j, 0] >= 0 and same and iou >= nms_threshold:
                    out[b, j, 0] = -1
    return out


def make_inputs(rng, batch, classes, count, ties=False):
    logits = rng.standard_normal((batch, classes, count)) * 2
    prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    if ties:
        prob = np.round(prob * 8) / 8
    cx, cy = rng.uniform(0, 1, count), rng.uniform(0, 1, count)
    w, h = rng.uniform(0.05, 0.5, count), rng.uniform(0.05, 0.5, count)
    anchor = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)[None]
    return {"cls_prob": prob, "loc_pred": rng.normal(0, 1, (batch, 4 * count)), "anchor": anchor}


@pytest.mark.parametrize("attrs, classes, ties", [
    ({}, 5, True), ({"nms_threshold": 0.3, "force_suppress": True}, 4, False),
    ({"nms_topk": 15, "threshold": 0.3}, 6, False), ({"nms_threshold": 0, "clip": False}, 4, False),
    ({"variances": (0.2, 0.2, 0.1, 0.1), "nms_threshold": 0.45}, 3, False),
    ({"threshold": 0.9}, 3, False), ({}, 1, False)])
def test_multibox_detection_matches_reference(ctx, rng, attrs, classes, ties):
    inputs = make_inputs(rng, 3, classes, 90, ties)
    sym = op_symbol("_contrib_MultiBoxDetection", list(inputs), **attrs)
    check_forward(sym, inputs, [reference_detection(*inputs.values(), **attrs)], ctx,
                  rtol=1e-10, atol=1e-12)


def test_multibox_detection_float32_and_no_gradient(ctx, rng):
    inputs = {k: v.astype(np.float32) for k, v in make_inputs(rng, 2, 4, 60).items()}
    sym = op_symbol("_contrib_MultiBoxDetection", list(inputs), nms_threshold=0.4)
    ex = bind(sym, inputs, ctx)
    out = ex.forward(is_train=True)[0]
    assert out.dtype == np.float32 and out.shape == (2, 60, 6)
    expected = reference_detection(*[v.astype(np.float64) for v in inputs.values()],
                                   nms_threshold=0.4)
    np.testing.assert_allclose(as_numpy(out), expected, rtol=1e-5, atol=1e-6)
    ex.backward([ctx.xp.ones(out.shape, out.dtype)])
    assert not any(as_numpy(g).any() for g in ex.grad_dict.values())


def test_multibox_detection_shapes_and_errors():
    sym = op_symbol("_contrib_MultiBoxDetection", ["cls_prob", "loc_pred", "anchor"])
    args, outs, _ = sym.infer_shape(cls_prob=(8, 21, 100))
    assert args == [(8, 21, 100), (8, 400), (1, 100, 4)] and outs == [(8, 100, 6)]
    with pytest.raises(ShapeError, match=r"MultiBoxDetection.*anchor must be \(1, 100, 4\)"):
        sym.infer_shape(cls_prob=(8, 21, 100), anchor=(1, 99, 4))
    with pytest.raises(ShapeError, match=r"MultiBoxDetection.*loc_pred must be \(batch, 400\)"):
        sym.infer_shape(cls_prob=(8, 21, 100), loc_pred=(8, 100))
    with pytest.raises(ShapeError, match=r"MultiBoxDetection.*cls_prob must be 3-D"):
        sym.infer_shape(cls_prob=(8, 2100))
    with pytest.raises(AttributeValueError, match=r"MultiBoxDetection.*'variances' needs 4"):
        op_symbol("_contrib_MultiBoxDetection", ["cls_prob", "loc_pred", "anchor"],
                  variances=(0.1, 0.2))


def ssd_head(rm, classes=2, sizes=(0.3, 0.5), ratios=(1, 2, 0.5)):
    """A one-scale SSD as MXNet's example builds it: priors, targets, losses, detections."""
    data, label = rm.sym.var("data"), rm.sym.var("label")
    body = rm.sym.Activation(rm.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1),
                                                name="body"), act_type="relu")
    anchors = rm.sym._contrib_MultiBoxPrior(body, sizes=sizes, ratios=ratios, name="anchors")
    per_cell = len(sizes) + len(ratios) - 1
    cls = rm.sym.Convolution(body, num_filter=per_cell * (classes + 1), kernel=(3, 3),
                             pad=(1, 1), name="cls")
    cls = rm.sym.transpose(rm.sym.Reshape(rm.sym.transpose(cls, axes=(0, 2, 3, 1)),
                                          shape=(0, -1, classes + 1)), axes=(0, 2, 1))
    loc = rm.sym.Convolution(body, num_filter=per_cell * 4, kernel=(3, 3), pad=(1, 1),
                             name="loc")
    loc = rm.sym.Flatten(rm.sym.transpose(loc, axes=(0, 2, 3, 1)))
    target = rm.sym._contrib_MultiBoxTarget(anchors, label, cls, name="target")
    cls_prob = rm.sym.SoftmaxOutput(cls, label=target[2], ignore_label=-1, use_ignore=True,
                                    multi_output=True, normalization="valid", name="cls_prob")
    loc_loss = rm.sym.MakeLoss(rm.sym.smooth_l1(target[1] * (loc - target[0]), scalar=1.0),
                               normalization="valid", name="loc_loss")
    det = rm.sym._contrib_MultiBoxDetection(cls_prob, loc, anchors, nms_threshold=0.45,
                                            nms_topk=50, name="det")
    return rm.sym.Group([cls_prob, loc_loss, rm.sym.MakeLoss(target[2], grad_scale=0),
                         rm.sym.MakeLoss(det, grad_scale=0)])


def test_ssd_head_trains(rng):
    """Targets, priors and detections pass no gradient (as MXNet), yet the network learns."""
    import raymod as rm
    net = ssd_head(rm)
    net = rm.sym.load_json(net.tojson())  # the contrib ops' attributes survive JSON
    data = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    label = -np.ones((4, 3, 5), np.float32)
    label[:, 0] = [[0, .1, .1, .5, .6], [1, .4, .3, .9, .8], [0, .2, .5, .6, .9],
                   [1, 0, 0, .4, .4]]
    mod = rm.mod.Module(net, data_names=["data"], label_names=["label"], context=rm.cpu())
    mod.bind(data_shapes=[("data", data.shape)], label_shapes=[("label", label.shape)])
    rm.random.seed(0)
    mod.init_params(rm.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    batch = rm.io.DataBatch(data=[data], label=[label])
    losses = []
    for _ in range(30):
        mod.forward_backward(batch)
        mod.update()
        prob, loc_loss, cls_target, det = (as_numpy(o) for o in mod.get_outputs())
        target = np.maximum(cls_target, 0)[:, None].astype(int)
        picked = np.take_along_axis(prob, target, 1)[:, 0]
        xent = -np.log(picked[cls_target >= 0]).mean()
        losses.append((xent, loc_loss.sum()))
    assert det.shape == (4, 256, 6)
    xent, loc = np.array(losses).T
    assert (np.diff(xent[::5]) < 0).all() and (np.diff(loc[::5]) < 0).all()
    assert xent[-1] < 0.7 * xent[0] and loc[-1] < 0.8 * loc[0]
