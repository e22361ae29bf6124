"""_contrib_box_nms: non-maximum suppression of scored boxes, with a gradient back to them."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ._common import greedy_nms, true_first

FORMATS = ("corner", "center")


def box_extent(xp, boxes, fmt: str):
    """(left, top, right, bottom) of boxes (..., 4) in ``corner`` or ``center`` format."""
    if fmt == "corner":
        return tuple(boxes[..., k] for k in range(4))
    dt = boxes.dtype.type
    half_w, half_h = boxes[..., 2] / dt(2), boxes[..., 3] / dt(2)
    return (boxes[..., 0] - half_w, boxes[..., 1] - half_h,
            boxes[..., 0] + half_w, boxes[..., 1] + half_h)


def box_area(xp, boxes, fmt: str):
    """Width * height, 0 when either is negative (MXNet's BoxArea)."""
    if fmt == "corner":
        w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    else:
        w, h = boxes[..., 2], boxes[..., 3]
    return xp.where((w < 0) | (h < 0), boxes.dtype.type(0), w * h)


def box_intersection(xp, a, b, fmt: str):
    """Overlap area of boxes a and b (broadcast), each side clamped at 0."""
    dt = a.dtype.type
    la, ta, ra, ba = box_extent(xp, a, fmt)
    lb, tb, rb, bb = box_extent(xp, b, fmt)
    w = xp.minimum(ra, rb) - xp.maximum(la, lb)
    h = xp.minimum(ba, bb) - xp.maximum(ta, tb)
    return xp.where(w > 0, w, dt(0)) * xp.where(h > 0, h, dt(0))


class BoxNMS(Op):
    """Sort boxes by score and drop those overlapping a better box of the same class.

    ``data`` is (..., n, k): leading axes are batches of n box rows holding a score at
    ``score_index``, four coordinates from ``coord_start`` (``in_format`` corner
    ``[xmin, ymin, xmax, ymax]`` or center ``[x, y, w, h]``) and optionally a class id at
    ``id_index``. Rows with score <= ``valid_thresh`` (or class ``background_id``) are
    dropped; the rest are sorted by score (stable) and the best ``topk`` (all for -1) go
    through greedy NMS: a box is removed when a kept better box of the same class (compared
    as integers; any class with ``force_suppress`` or without ``id_index``) has IoU above
    ``overlap_thresh``. Each batch's kept rows come first, in score order and whole, the
    rest is -1; the coordinates are written in ``out_format`` (MXNet leaves a row whose
    first coordinate is negative as it is). ``topk=0`` returns the data unchanged; if no
    row of the whole input is valid, all -1.

    Backward copies each output row's gradient to the input row it came from (removed rows
    get 0; format conversion is not differentiated, as in MXNet). Backward keeps the hidden
    second output, the source row of every output row (-1 for none).
    """

    name = "_contrib_box_nms"
    aliases = ("_contrib_box_non_maximum_suppression",)
    params = {"overlap_thresh": Param("float", 0.5), "valid_thresh": Param("float", 0.0),
              "topk": Param("int", -1), "coord_start": Param("int", 2),
              "score_index": Param("int", 1), "id_index": Param("int", -1),
              "background_id": Param("int", -1), "force_suppress": Param("bool", False),
              "in_format": Param("str", "corner", choices=FORMATS),
              "out_format": Param("str", "corner", choices=FORMATS)}
    outputs = ("output0", "output1")
    retain_outputs = (1,)

    def check(self) -> None:
        coords = range(self.coord_start, self.coord_start + 4)
        for key in ("coord_start", "score_index"):
            if getattr(self, key) < 0:
                raise AttributeValueError(f"{self.name}: {key} must be >= 0, got "
                                          f"{getattr(self, key)}")
        if self.score_index in coords:
            raise AttributeValueError(f"{self.name}: score_index={self.score_index} falls in "
                                      f"the coordinates {tuple(coords)}")
        if self.id_index >= 0 and (self.id_index in coords or self.id_index == self.score_index):
            raise AttributeValueError(f"{self.name}: id_index={self.id_index} clashes with "
                                      f"score_index={self.score_index} or the coordinates "
                                      f"{tuple(coords)}")

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        if data is None:
            return [None], [None, None], []
        if len(data) < 2:
            raise ShapeError(f"data must be (..., num_boxes, box_width), at least 2-D; got "
                             f"shape {tuple(data)}")
        width = data[-1]
        need = max(self.coord_start + 4, self.score_index + 1, self.id_index + 1,
                   6 if self.id_index >= 0 else 5)
        if width and width < need:
            raise ShapeError(f"box rows of width {width} cannot hold score_index="
                             f"{self.score_index}, coord_start={self.coord_start} and id_index="
                             f"{self.id_index}: need width >= {need}, got shape {tuple(data)}")
        return [tuple(data)], [tuple(data), tuple(data[:-1]) + (1,)], []

    def forward(self, xp, inputs, aux, is_train):
        data = inputs[0]
        dt = data.dtype.type
        shape = data.shape
        n, width = shape[-2], shape[-1]
        rows = data.reshape(-1, n, width)
        batch = rows.shape[0]
        topk = n if self.topk < 0 else min(n, self.topk)
        if topk < 1:
            source = xp.arange(batch * n, dtype=data.dtype)
            return [data.copy(), source.reshape(shape[:-1] + (1,))], None
        score = rows[..., self.score_index]
        valid = score > dt(np.float32(self.valid_thresh))
        if self.id_index >= 0:
            valid &= rows[..., self.id_index] != dt(self.background_id)
        none = dt(-1)
        if not bool(valid.any()):
            return [xp.full(shape, none), xp.full(shape[:-1] + (1,), none)], None
        take = xp.arange(batch)[:, None]
        order = xp.argsort(xp.where(valid, -score, dt(np.inf)), axis=1, kind="stable")
        ranked = rows[take, order]
        pos = xp.arange(n)[None, :]
        candidates = pos < xp.minimum(valid.sum(axis=1), topk)[:, None]
        boxes = ranked[..., self.coord_start:self.coord_start + 4]
        area = box_area(xp, boxes, self.in_format)
        groups = None
        if self.id_index >= 0 and not self.force_suppress:
            groups = xp.trunc(ranked[..., self.id_index])  # MXNet compares ids as ints
        kept = greedy_nms(xp, xp.concatenate([boxes, area[..., None]], axis=2), candidates,
                          self._suppresses, groups=groups)
        first = true_first(xp, kept)
        filled = (pos < kept.sum(axis=1)[:, None])
        out = xp.where(filled[..., None], ranked[take, first], none)
        source = xp.where(filled, take * n + order[take, first], -1).astype(data.dtype)
        if self.in_format != self.out_format:
            out = self._convert(xp, out)
        return [out.reshape(shape), source.reshape(shape[:-1] + (1,))], None

    def _suppresses(self, xp, ref, boxes):
        """IoU above ``overlap_thresh`` (in the input format)."""
        dt = boxes.dtype.type
        inter = box_intersection(xp, ref[:, None, :4], boxes[..., :4], self.in_format)
        union = ref[:, None, 4] + boxes[..., 4] - inter
        # a zero union (two empty boxes) gives NaN in MXNet, which never suppresses
        iou = inter / xp.where(union == 0, dt(np.nan), union)
        return iou > dt(np.float32(self.overlap_thresh))

    def _convert(self, xp, out):
        """Coordinates into ``out_format``; rows whose first coordinate is < 0 stay."""
        dt = out.dtype.type
        c = self.coord_start
        boxes = out[..., c:c + 4]
        if self.out_format == "center":
            l, t, r, b = (boxes[..., k] for k in range(4))
            new = xp.stack([(l + r) / dt(2), (t + b) / dt(2), r - l, b - t], axis=-1)
        else:
            new = xp.stack(box_extent(xp, boxes, "center"), axis=-1)
        out = out.copy()
        out[..., c:c + 4] = xp.where((boxes[..., :1] < 0), boxes, new)
        return out

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None]
        g = out_grads[0]
        width = g.shape[-1]
        source = outputs[1].reshape(-1).astype(xp.int64)
        flat = g.reshape(-1, width)
        grad = xp.zeros_like(flat)
        moved = source >= 0
        grad[source[moved]] = flat[moved]
        return [grad.reshape(g.shape)]
