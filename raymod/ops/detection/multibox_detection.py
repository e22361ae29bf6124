"""_contrib_MultiBoxDetection: SSD detections from class probabilities, offsets and anchors."""
from __future__ import annotations

import numpy as np

from ...base import ShapeError
from ..base import Op, Param
from ._common import c_exp, float_tuple, greedy_nms, true_first


class MultiBoxDetection(Op):
    """Decode every anchor into a detection row ``[class_id, score, xmin, ymin, xmax, ymax]``.

    Per anchor the class is the most probable non-background class (class 0 is background,
    ids are shifted down by one); a score below ``threshold`` makes it background (id -1).
    The box is the anchor moved by ``loc_pred`` (centre offsets scaled by ``variances[:2]``
    and the anchor size, log-sizes by ``variances[2:]``), clipped to [0, 1] with ``clip``.

    Per image, the rows that are not background are moved to the front in anchor order and
    the rest filled with -1. With ``0 < nms_threshold <= 1`` those rows are then sorted by
    score (stable); only the first ``nms_topk`` (all for -1) take part in greedy NMS, which
    marks a row -1 (its id only, the rest of the row stays) when an earlier kept row of the
    same class (any class with ``force_suppress``) overlaps it with IoU >= ``nms_threshold``.
    Rows past ``nms_topk`` keep their unsorted values with id -1, as in MXNet.
    ``background_id`` is accepted and, as in MXNet's CPU op, unused (class 0 is background).

    No gradient: MXNet's backward writes zeros, so the inputs are declared gradient-free.

    Inputs: ``cls_prob`` (batch, classes, anchors), ``loc_pred`` (batch, anchors * 4),
    ``anchor`` (1, anchors, 4). Output: (batch, anchors, 6).
    """

    name = "_contrib_MultiBoxDetection"
    params = {"clip": Param("bool", True), "threshold": Param("float", 0.01),
              "background_id": Param("int", 0), "nms_threshold": Param("float", 0.5),
              "force_suppress": Param("bool", False),
              "variances": Param("any", (0.1, 0.1, 0.2, 0.2)), "nms_topk": Param("int", -1)}
    inputs = ("cls_prob", "loc_pred", "anchor")
    no_grad_inputs = inputs

    def check(self) -> None:
        self.variances = float_tuple(self.name, "variances", self.variances, 4)

    def infer_shape(self, in_shapes, out_shapes):
        cls, loc, anchor = in_shapes
        for name, shape, rank in (("cls_prob", cls, 3), ("loc_pred", loc, 2),
                                  ("anchor", anchor, 3)):
            if shape is not None and len(shape) != rank:
                raise ShapeError(f"{name} must be {rank}-D, got shape {tuple(shape)}")
        if cls is None:
            return [cls, loc, anchor], [None], []
        count = cls[2]
        if anchor is not None and (anchor[2] not in (0, 4) or (count and anchor[1]
                                                                and anchor[1] != count)):
            raise ShapeError(f"anchor must be (1, {count or 'anchors'}, 4) for cls_prob "
                             f"{tuple(cls)}, got shape {tuple(anchor)}")
        if loc is not None and count and loc[1] and loc[1] != 4 * count:
            raise ShapeError(f"loc_pred must be (batch, {4 * count}) for cls_prob "
                             f"{tuple(cls)}, got shape {tuple(loc)}")
        loc = (cls[0] or (loc or (0,))[0], 4 * count)
        anchor = (1 if anchor is None else anchor[0], count, 4)
        return [tuple(cls), loc, anchor], [(cls[0], count, 6)], []

    def forward(self, xp, inputs, aux, is_train):
        cls, loc, anchor = inputs
        batch, classes, count = cls.shape
        dt = cls.dtype.type
        if classes > 1:
            # the first most probable foreground class; MXNet starts from a score of -1
            best, cid = cls[:, 1:].max(axis=1), cls[:, 1:].argmax(axis=1) + 1
            cid = xp.where(best > dt(-1), cid, 0)
            score = xp.where(best > dt(-1), best, dt(-1))
        else:
            cid, score = xp.zeros((batch, count), xp.int64), xp.full((batch, count), dt(-1))
        cid = xp.where((cid > 0) & (score < dt(np.float32(self.threshold))), 0, cid)
        boxes = self._decode(xp, anchor.reshape(-1, 4)[:count], loc.reshape(batch, count, 4))
        rows = xp.concatenate([(cid - 1).astype(cls.dtype)[..., None], score[..., None], boxes],
                              axis=2)
        valid = cid > 0
        n_valid = valid.sum(axis=1)[:, None]
        pos = xp.arange(count)[None, :]
        take = xp.arange(batch)[:, None]
        front = rows[take, true_first(xp, valid)]  # valid rows first
        none = dt(-1)
        if not 0 < self.nms_threshold <= 1:
            return [xp.where((pos < n_valid)[..., None], front, none)], None
        ranked = rows[take, xp.argsort(xp.where(valid, -score, dt(np.inf)), axis=1,
                                       kind="stable")]
        n_keep = n_valid if self.nms_topk <= 0 else xp.minimum(n_valid, self.nms_topk)
        boxes = ranked[..., 2:]
        area = (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])
        kept = greedy_nms(xp, xp.concatenate([boxes, area[..., None]], axis=2), pos < n_keep,
                          self._suppresses, groups=None if self.force_suppress else ranked[..., 0])
        # suppressed rows and rows past nms_topk lose only their class id
        ranked[..., 0] = xp.where(kept, ranked[..., 0], none)
        front[..., 0] = none
        out = xp.where((pos < n_keep)[..., None], ranked,
                       xp.where((pos < n_valid)[..., None], front, none))
        return [out], None

    def _decode(self, xp, anchors, offsets):
        """Boxes (batch, anchors, 4) from anchor boxes and predicted offsets, in data dtype."""
        dt = anchors.dtype.type
        vx, vy, vw, vh = (dt(np.float32(v)) for v in self.variances)
        al, at, ar, ab = (anchors[:, k] for k in range(4))
        aw, ah, ax, ay = ar - al, ab - at, (al + ar) / dt(2), (at + ab) / dt(2)
        ox = offsets[..., 0] * vx * aw + ax
        oy = offsets[..., 1] * vy * ah + ay
        ow = c_exp(xp, offsets[..., 2] * vw) * aw / dt(2)
        oh = c_exp(xp, offsets[..., 3] * vh) * ah / dt(2)
        boxes = xp.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=-1)
        return xp.clip(boxes, dt(0), dt(1)) if self.clip else boxes

    def _suppresses(self, xp, ref, boxes):
        """The NMS rule on score-sorted boxes: IoU >= nms_threshold (classes: see groups)."""
        dt = boxes.dtype.type
        iw = xp.maximum(dt(0), xp.minimum(ref[:, None, 2], boxes[..., 2])
                        - xp.maximum(ref[:, None, 0], boxes[..., 0]))
        ih = xp.maximum(dt(0), xp.minimum(ref[:, None, 3], boxes[..., 3])
                        - xp.maximum(ref[:, None, 1], boxes[..., 1]))
        inter = iw * ih
        union = ref[:, None, 4] + boxes[..., 4] - inter
        limit = dt(np.float32(self.nms_threshold))
        return (union > 0) & (inter / xp.where(union > 0, union, dt(1)) >= limit)
