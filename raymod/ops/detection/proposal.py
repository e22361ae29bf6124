"""_contrib_Proposal and _contrib_MultiProposal: region proposals of a Faster R-CNN RPN."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ._common import c_exp, float_tuple, greedy_nms, true_first

_F32 = np.float32


def rpn_base_anchors(stride: int, ratios, scales) -> np.ndarray:
    """(ratios * scales, 4) anchors of one cell, ratio-major, in MXNet's float32 arithmetic."""
    one, half = _F32(1), _F32(0.5)
    side = _F32(stride - 1.0) + one
    center = _F32(0.5 * float(side - one))  # MXNet computes this one in double
    size = side * side
    rows = []
    for ratio in map(_F32, ratios):
        for scale in map(_F32, scales):
            w = np.floor(np.sqrt(np.floor(size / ratio)) + half) * scale
            h = np.floor(w / scale * ratio + half) * scale
            rows.append([center - half * (w - one), center - half * (h - one),
                         center + half * (w - one), center + half * (h - one)])
    return np.array(rows, _F32)


class _RPNProposal(Op):
    """Shared by Proposal (one image) and MultiProposal (a batch); see their docstrings."""

    params = {"rpn_pre_nms_top_n": Param("int", 6000), "rpn_post_nms_top_n": Param("int", 300),
              "threshold": Param("float", 0.7), "rpn_min_size": Param("int", 16),
              "scales": Param("any", (4.0, 8.0, 16.0, 32.0)),
              "ratios": Param("any", (0.5, 1.0, 2.0)), "feature_stride": Param("int", 16),
              "output_score": Param("bool", False), "iou_loss": Param("bool", False)}
    inputs = ("cls_prob", "bbox_pred", "im_info")
    outputs = ("output", "score")
    # MXNet's backward writes zeros into every input gradient: none flows through here
    no_grad_inputs = inputs

    def check(self) -> None:
        self.scales = float_tuple(self.name, "scales", self.scales)
        self.ratios = float_tuple(self.name, "ratios", self.ratios)
        for key in ("scales", "ratios"):
            values = getattr(self, key)
            if not values or min(values) <= 0:
                raise AttributeValueError(f"{self.name}: {key} must be positive numbers, got "
                                          f"{values}")
        if self.rpn_post_nms_top_n < 1 or self.feature_stride < 1:
            raise AttributeValueError(
                f"{self.name}: rpn_post_nms_top_n and feature_stride must be positive, got "
                f"{self.rpn_post_nms_top_n} and {self.feature_stride}")

    def num_visible_outputs(self) -> int:
        return 2 if self.output_score else 1

    def _check_batch(self, batch: int) -> None:
        """Proposal takes one image; MultiProposal any number."""

    def infer_shape(self, in_shapes, out_shapes):
        cls, bbox, info = in_shapes
        for name, shape, rank in (("cls_prob", cls, 4), ("bbox_pred", bbox, 4),
                                  ("im_info", info, 2)):
            if shape is not None and len(shape) != rank:
                raise ShapeError(f"{name} must be {rank}-D, got shape {tuple(shape)}")
        anchors = len(self.scales) * len(self.ratios)
        if cls is None and bbox is not None:
            cls = (bbox[0], 2 * anchors) + tuple(bbox[2:])
        if cls is None:
            return [None, None, info], [None, None], []
        if cls[1] and cls[1] != 2 * anchors:
            raise ShapeError(f"cls_prob needs 2 * len(scales) * len(ratios) = {2 * anchors} "
                             f"channels (background and object per anchor), got shape {cls}")
        cls = (cls[0], 2 * anchors) + tuple(cls[2:])
        bbox = merge_shape(bbox, (cls[0], 4 * anchors) + cls[2:],
                           f"bbox_pred must be (batch, 4 * anchors, height, width) for cls_prob "
                           f"{cls}")
        info = merge_shape(info, (cls[0], 3), f"im_info must be (batch, 3) for cls_prob {cls}")
        cls = (cls[0] or bbox[0] or info[0],) + cls[1:]
        self._check_batch(cls[0])
        rows = cls[0] * self.rpn_post_nms_top_n if cls[0] else 0
        return [cls, (cls[0],) + bbox[1:], (cls[0], 3)], [(rows, 5), (rows, 1)], []

    def forward(self, xp, inputs, aux, is_train):
        cls, deltas, info = inputs
        n = cls.shape[0]
        dt = cls.dtype.type
        boxes, scores = self._decode(xp, cls, deltas, info)
        count = boxes.shape[1]
        pre = min(count, self.rpn_pre_nms_top_n) if self.rpn_pre_nms_top_n > 0 else count
        post = self.rpn_post_nms_top_n
        rows = xp.arange(n)[:, None]
        order = xp.argsort(-scores, axis=1, kind="stable")[:, :pre]
        boxes, scores = boxes[rows, order], scores[rows, order]
        area = (boxes[..., 2] - boxes[..., 0] + dt(1)) * (boxes[..., 3] - boxes[..., 1] + dt(1))
        kept = greedy_nms(xp, xp.concatenate([boxes, area[..., None]], axis=2),
                          xp.ones((n, pre), bool), self._suppresses, max_keep=min(post, pre))
        # kept boxes in score order, then the list repeated until post_nms_top_n rows
        first = true_first(xp, kept)
        pick = first[rows, xp.arange(post)[None, :] % kept.sum(axis=1)[:, None]]
        image = xp.broadcast_to(xp.arange(n, dtype=cls.dtype)[:, None, None], (n, post, 1))
        rois = xp.concatenate([image, boxes[rows, pick]], axis=2).reshape(n * post, 5)
        return [rois, scores[rows, pick].reshape(n * post, 1)], None

    def _decode(self, xp, cls, deltas, info):
        """Every anchor's predicted box (n, h*w*a, 4) and score (n, h*w*a), as MXNet's CPU op."""
        n, _, h, w = cls.shape
        a = cls.shape[1] // 2
        dt, wide = cls.dtype.type, xp.float64
        stride = self.feature_stride
        base = xp.asarray(rpn_base_anchors(stride, self.ratios, self.scales).astype(cls.dtype))
        sx = (xp.arange(w) * stride).astype(cls.dtype)[None, :, None]
        sy = (xp.arange(h) * stride).astype(cls.dtype)[:, None, None]
        # anchors ordered (y, x, anchor), the order MXNet enumerates them in
        x1, y1 = base[:, 0] + sx, base[:, 1] + sy
        x2, y2 = base[:, 2] + sx, base[:, 3] + sy
        d = deltas.reshape(n, a, 4, h, w).transpose(2, 0, 3, 4, 1)  # (4, n, h, w, a)
        im_h, im_w, im_scale = (info[:, k].reshape(n, 1, 1, 1) for k in range(3))
        if self.iou_loss:
            boxes = [x1 + d[0], y1 + d[1], x2 + d[2], y2 + d[3]]
        else:
            bw, bh = x2 - x1 + dt(1), y2 - y1 + dt(1)
            # MXNet mixes float and double here: the double steps go through float64
            cx = (x1.astype(wide) + 0.5 * (bw.astype(wide) - 1.0)).astype(cls.dtype)
            cy = (y1.astype(wide) + 0.5 * (bh.astype(wide) - 1.0)).astype(cls.dtype)
            px, py = d[0] * bw + cx, d[1] * bh + cy
            half_w = 0.5 * ((c_exp(xp, d[2]) * bw).astype(wide) - 1.0)
            half_h = 0.5 * ((c_exp(xp, d[3]) * bh).astype(wide) - 1.0)
            boxes = [(px.astype(wide) - half_w), (py.astype(wide) - half_h),
                     (px.astype(wide) + half_w), (py.astype(wide) + half_h)]
            boxes = [b.astype(cls.dtype) for b in boxes]
        limits = (im_w - dt(1), im_h - dt(1), im_w - dt(1), im_h - dt(1))
        boxes = [xp.maximum(xp.minimum(b, lim), dt(0)) for b, lim in zip(boxes, limits)]
        scores = cls[:, a:].transpose(0, 2, 3, 1)
        # cells beyond the real (unpadded) image size get score -1
        real_h = (im_h / dt(stride)).astype(xp.int64)
        real_w = (im_w / dt(stride)).astype(xp.int64)
        padded = (xp.arange(h)[:, None, None] >= real_h) | (xp.arange(w)[None, :, None] >= real_w)
        scores = xp.where(padded, dt(-1), scores)
        # too small boxes: grown by min_size / 2 on every side and scored -1
        min_size = dt(self.rpn_min_size) * im_scale
        small = ((boxes[2] - boxes[0] + dt(1) < min_size)
                 | (boxes[3] - boxes[1] + dt(1) < min_size))
        grow = xp.where(small, min_size / dt(2), dt(0))
        boxes = [boxes[0] - grow, boxes[1] - grow, boxes[2] + grow, boxes[3] + grow]
        scores = xp.where(small, dt(-1), scores)
        return xp.stack(boxes, axis=-1).reshape(n, -1, 4), scores.reshape(n, -1)

    def _suppresses(self, xp, ref, boxes):
        """The NMS rule: IoU in pixel units (+1 on widths) above ``threshold`` suppresses."""
        dt = boxes.dtype.type
        iw = xp.maximum(dt(0), xp.minimum(ref[:, None, 2], boxes[..., 2])
                        - xp.maximum(ref[:, None, 0], boxes[..., 0]) + dt(1))
        ih = xp.maximum(dt(0), xp.minimum(ref[:, None, 3], boxes[..., 3])
                        - xp.maximum(ref[:, None, 1], boxes[..., 1]) + dt(1))
        inter = iw * ih
        return inter / (ref[:, None, 4] + boxes[..., 4] - inter) > dt(_F32(self.threshold))


class Proposal(_RPNProposal):
    """Region proposals for one image from an RPN's object scores and box deltas.

    Anchors of every ``scales`` x ``ratios`` pair (ratio-major) are laid on each cell of the
    (h, w) score map with ``feature_stride``; each is moved by its predicted deltas (centre
    and log-size, or corner offsets with ``iou_loss``) and clipped to ``im_info`` = (height,
    width, scale). Anchors on cells beyond the real image and boxes smaller than
    ``rpn_min_size * scale`` (which are also grown by half that size per side) score -1.
    The ``rpn_pre_nms_top_n`` best (stable sort, -1 for all) go through greedy NMS at IoU
    ``threshold`` (pixel convention: widths are ``x2 - x1 + 1``) until
    ``rpn_post_nms_top_n`` are kept; the rows are ``[0, x1, y1, x2, y2]`` in score order,
    the kept list repeated from its start when fewer survive. ``score`` (visible with
    ``output_score``) holds their scores.

    No gradient: MXNet's backward writes zeros, so the inputs are declared gradient-free.

    Inputs: ``cls_prob`` (1, 2a, h, w) with background scores first, ``bbox_pred``
    (1, 4a, h, w), ``im_info`` (1, 3). Outputs: (post_nms_top_n, 5) and (post_nms_top_n, 1).
    """

    name = "_contrib_Proposal"

    def _check_batch(self, batch: int) -> None:
        if batch > 1:
            raise ShapeError(f"takes one image (batch 1), got batch {batch}; use "
                             f"_contrib_MultiProposal for several")


class MultiProposal(_RPNProposal):
    """:class:`Proposal` for every image of a batch.

    Outputs (batch * post_nms_top_n, 5) rois whose first column is the image index, and
    their scores (batch * post_nms_top_n, 1). No gradient, as Proposal.
    """

    name = "_contrib_MultiProposal"
