"""_contrib_box_iou: intersection over union of every pair of boxes of two arrays."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from .box_nms import FORMATS, box_area, box_intersection


class BoxIoU(Op):
    """IoU of each box of ``lhs`` (..., 4) with each box of ``rhs`` (..., 4).

    Boxes are ``[xmin, ymin, xmax, ymax]`` (``format='corner'``) or ``[x, y, w, h]``
    (``'center'``); a box with a negative side has area 0 and pairs that do not overlap
    give 0. Output: ``lhs.shape[:-1] + rhs.shape[:-1]``.

    No gradient: MXNet's backward writes zeros (its documentation says so), so the inputs
    are declared gradient-free.
    """

    name = "_contrib_box_iou"
    params = {"format": Param("str", "corner", choices=FORMATS)}
    inputs = ("lhs", "rhs")
    no_grad_inputs = inputs

    def infer_shape(self, in_shapes, out_shapes):
        for name, shape in zip(self.inputs, in_shapes):
            if shape is not None and (len(shape) < 2 or shape[-1] not in (0, 4)):
                raise ShapeError(f"{name} must be (..., 4) with at least 2 dims, got shape "
                                 f"{tuple(shape)}")
        lhs, rhs = (None if s is None else tuple(s[:-1]) + (4,) for s in in_shapes)
        out = None if lhs is None or rhs is None else lhs[:-1] + rhs[:-1]
        return [lhs, rhs], [out], []

    def forward(self, xp, inputs, aux, is_train):
        lhs, rhs = inputs
        dt = lhs.dtype.type
        a, b = lhs.reshape(-1, 1, 4), rhs.reshape(1, -1, 4)
        inter = box_intersection(xp, a, b, self.format)
        union = box_area(xp, a, self.format) + box_area(xp, b, self.format) - inter
        iou = xp.where(inter > 0, inter / xp.where(inter > 0, union, dt(1)), dt(0))
        return [iou.reshape(lhs.shape[:-1] + rhs.shape[:-1])], None
