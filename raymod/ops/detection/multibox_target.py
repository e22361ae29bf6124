"""_contrib_MultiBoxTarget: SSD training targets from anchors, ground truth and class scores."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ._common import c_exp, c_log, float_tuple


def corner_iou(xp, a, b):
    """IoU of corner boxes a (..., 4) and b (..., 4) broadcast, 0 where the union is 0."""
    dt = a.dtype.type
    iw = xp.maximum(dt(0), xp.minimum(a[..., 2], b[..., 2]) - xp.maximum(a[..., 0], b[..., 0]))
    ih = xp.maximum(dt(0), xp.minimum(a[..., 3], b[..., 3]) - xp.maximum(a[..., 1], b[..., 1]))
    inter = iw * ih
    union = ((a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
             + (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1]) - inter)
    return xp.where(union == 0, dt(0), inter / xp.where(union == 0, dt(1), union))


class MultiBoxTarget(Op):
    """Match anchors to ground-truth boxes and encode the regression and class targets.

    ``label`` is (batch, objects, 5+) rows ``[class, xmin, ymin, xmax, ymax, ...]``; the
    objects of an image end at the first row of class -1. Matching, per image:

    1. greedy bipartite: repeatedly the largest IoU (> 1e-6) between a still unmatched
       anchor and a still unmatched object pairs them (ties: lowest anchor, then object);
    2. with ``overlap_threshold > 0``, every other anchor whose best IoU (first best
       object) exceeds it is matched to that object;
    3. with ``negative_mining_ratio > 0``, ``int(positives * ratio)`` negatives are the
       unmatched anchors with best IoU below ``negative_mining_thresh`` and the lowest
       background probability (softmax of ``cls_pred`` over classes; stable order); other
       unmatched anchors are ignored. Without mining every unmatched anchor is negative.
       ``minimum_negative_samples`` is accepted and, as in MXNet's CPU op, unused. Where
       fewer anchors qualify than wanted, all of them are taken (MXNet aborts).

    Outputs: ``loc_target`` (batch, anchors * 4), positives' offsets
    ``((gx - ax) / aw / v0, (gy - ay) / ah / v1, log(gw / aw) / v2, log(gh / ah) / v3)``
    (centres and sizes of object g and anchor a), zero elsewhere; ``loc_mask`` (same shape),
    1 for positives; ``cls_target`` (batch, anchors), object class + 1 for positives, 0 for
    negatives, ``ignore_label`` for the rest (all of an image without objects).

    No gradient: MXNet's backward writes zeros, so the inputs are declared gradient-free.

    Inputs: ``anchor`` (1, anchors, 4), ``label``, ``cls_pred`` (batch, classes, anchors).
    """

    name = "_contrib_MultiBoxTarget"
    params = {"overlap_threshold": Param("float", 0.5), "ignore_label": Param("float", -1.0),
              "negative_mining_ratio": Param("float", -1.0),
              "negative_mining_thresh": Param("float", 0.5),
              "minimum_negative_samples": Param("int", 0),
              "variances": Param("any", (0.1, 0.1, 0.2, 0.2))}
    inputs = ("anchor", "label", "cls_pred")
    outputs = ("loc_target", "loc_mask", "cls_target")
    no_grad_inputs = inputs

    def check(self) -> None:
        self.variances = float_tuple(self.name, "variances", self.variances, 4)
        if self.negative_mining_ratio > 0 and self.negative_mining_thresh <= 0:
            raise AttributeValueError(f"{self.name}: negative_mining_thresh must be positive "
                                      f"when mining, got {self.negative_mining_thresh}")

    def infer_shape(self, in_shapes, out_shapes):
        anchor, label, pred = in_shapes
        for name, shape in (("anchor", anchor), ("label", label), ("cls_pred", pred)):
            if shape is not None and len(shape) != 3:
                raise ShapeError(f"{name} must be 3-D, got shape {tuple(shape)}")
        if anchor is not None:
            if anchor[0] not in (0, 1) or anchor[2] not in (0, 4):
                raise ShapeError(f"anchor must be (1, num_anchors, 4), shared by the batch; "
                                 f"got shape {tuple(anchor)}")
            anchor = (1,) + tuple(anchor[1:2]) + (4,)
        if label is not None and label[2] and label[2] < 5:
            raise ShapeError(f"label rows need at least 5 values [class, xmin, ymin, xmax, "
                             f"ymax], got shape {tuple(label)}")
        count = (anchor or (0, 0))[1] or (pred or (0, 0, 0))[2]
        batch = (label or (0,))[0] or (pred or (0,))[0]
        if pred is not None:
            pred = merge_shape(pred, (batch, 0, count),
                               f"cls_pred must be (batch, classes, anchors) for label {label} "
                               f"and anchor {anchor}")
        if count and anchor is not None:
            anchor = (1, count, 4)
        if batch and label is not None:
            label = (batch,) + tuple(label[1:])
        loc = (batch, 4 * count)
        return [anchor, label, pred], [loc, loc, (batch, count)], []

    def forward(self, xp, inputs, aux, is_train):
        anchor, label, pred = inputs
        dt = anchor.dtype.type
        anchors = anchor.reshape(-1, 4)
        batch, objects = label.shape[:2]
        count = anchors.shape[0]
        rows = xp.arange(batch)
        # objects of an image: the rows before its first class -1
        pad = label[:, :, 0] == -1
        valid_count = xp.where(pad.any(axis=1), pad.argmax(axis=1), objects)
        used = int(valid_count.max()) if batch else 0
        gt = label[:, :used, :]
        real = xp.arange(used)[None, :] < valid_count[:, None]
        iou = corner_iou(xp, anchors[None, :, None, :], gt[:, None, :, 1:5])
        iou = xp.where(real[:, None, :], iou, dt(-np.inf))  # (batch, anchors, objects)

        match = xp.full((batch, count), -1, xp.int64)
        positive = xp.zeros((batch, count), bool)
        # 1: greedy bipartite matching, one pair per image per step (at most `used` steps)
        free = iou.copy()
        for _ in range(used):
            flat = free.reshape(batch, -1)
            pick = flat.argmax(axis=1)  # first maximum: lowest anchor, then lowest object
            ok = flat[rows, pick] > dt(np.float32(1e-6))
            if not bool(ok.any()):
                break
            b, j, k = rows[ok], pick[ok] // used, pick[ok] % used
            match[b, j], positive[b, j] = k, True
            free[b, j, :] = -np.inf
            free[b, :, k] = -np.inf
        best_gt = iou.argmax(axis=2) if used else xp.zeros((batch, count), xp.int64)
        best_iou = iou.max(axis=2) if used else xp.full((batch, count), -np.inf, dt)
        # 2: every other anchor above the threshold takes its best object
        if self.overlap_threshold > 0:
            more = ~positive & (best_iou > dt(np.float32(self.overlap_threshold)))
            match = xp.where(more, best_gt, match)
            positive |= more
        has_objects = (valid_count > 0)[:, None]
        positive &= has_objects
        negative = self._negatives(xp, pred, positive, best_iou) & has_objects

        cls = xp.where(positive, label[rows[:, None], xp.maximum(match, 0), 0] + dt(1),
                       xp.where(negative, dt(0), dt(np.float32(self.ignore_label))))
        # unmatched anchors encode a unit box against itself: no 0/0 or log(0) computed
        unit = xp.asarray(np.array([0, 0, 1, 1], anchor.dtype))
        pos = positive[..., None]
        target = xp.where(pos, label[rows[:, None], xp.maximum(match, 0), 1:5], unit)
        loc = xp.where(pos, self._encode(xp, xp.where(pos, anchors[None], unit), target), dt(0))
        mask = xp.broadcast_to(positive[..., None], loc.shape).astype(anchor.dtype)
        return [loc.reshape(batch, -1), mask.reshape(batch, -1), cls.astype(anchor.dtype)], None

    def _negatives(self, xp, pred, positive, best_iou):
        """Anchors labelled background (0): mined hardest ones, or all unmatched ones."""
        if self.negative_mining_ratio <= 0:
            return ~positive
        dt = pred.dtype.type
        count = positive.shape[1]
        n_pos = positive.sum(axis=1)
        ratio = np.float32(self.negative_mining_ratio)
        want = (n_pos.astype(np.float32) * ratio).astype(xp.int64)  # float product, truncated
        want = xp.minimum(want, count - n_pos)
        eligible = ~positive & (best_iou < dt(np.float32(self.negative_mining_thresh)))
        # background probability, summed class by class as MXNet does
        top = pred.max(axis=1)
        total = xp.zeros_like(top)
        for k in range(pred.shape[1]):
            total = total + c_exp(xp, pred[:, k] - top)
        background = c_exp(xp, pred[:, 0] - top) / total
        order = xp.argsort(xp.where(eligible, background, dt(np.inf)), axis=1, kind="stable")
        rank = xp.empty_like(order)
        rank[xp.arange(len(order))[:, None], order] = xp.arange(count)[None, :]
        return eligible & (rank < want[:, None])

    def _encode(self, xp, anchors, boxes):
        """Regression targets of boxes relative to anchors, (batch, anchors, 4)."""
        dt = anchors.dtype.type
        v = [dt(np.float32(x)) for x in self.variances]
        (al, at, ar, ab), (gl, gt, gr, gb) = (
            [z[..., k] for k in range(4)] for z in (anchors, boxes))
        aw, ah, ax, ay = ar - al, ab - at, (al + ar) * dt(0.5), (at + ab) * dt(0.5)
        gw, gh, gx, gy = gr - gl, gb - gt, (gl + gr) * dt(0.5), (gt + gb) * dt(0.5)
        return xp.stack([(gx - ax) / aw / v[0], (gy - ay) / ah / v[1],
                         c_log(xp, gw / aw) / v[2], c_log(xp, gh / ah) / v[3]], axis=-1)
