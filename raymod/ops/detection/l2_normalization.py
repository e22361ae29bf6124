"""L2Normalization: divide by the L2 norm over an instance, a channel axis or spatial axes."""
from __future__ import annotations

import numpy as np

from ...base import ShapeError
from ..base import ElementwiseOp, Param


class L2Normalization(ElementwiseOp):
    """``x / sqrt(sum(x^2) + eps)`` with the sum over all axes but the first (``mode=
    'instance'``), over axis 1 (``'channel'``), or over axes 2 and later (``'spatial'``;
    these two need at least 3 dims).

    Backward keeps the output and the norm: ``(g - y * sum(g * y)) / norm`` over the same
    axes (the exact gradient).
    """

    name = "L2Normalization"
    params = {"eps": Param("float", 1e-10),
              "mode": Param("str", "instance", choices=("instance", "channel", "spatial"))}
    retain_outputs = (0,)

    def infer_shape(self, in_shapes, out_shapes):
        shapes = super().infer_shape(in_shapes, out_shapes)
        data = shapes[0][0]
        if data is not None and len(data) < (1 if self.mode == "instance" else 3):
            raise ShapeError(f"mode={self.mode!r} needs data of at least "
                             f"{1 if self.mode == 'instance' else 3} dims, got shape "
                             f"{tuple(data)}")
        return shapes

    def _axes(self, ndim: int) -> tuple[int, ...]:
        if self.mode == "instance":
            return tuple(range(1, ndim))
        return (1,) if self.mode == "channel" else tuple(range(2, ndim))

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        dt = x.dtype.type
        norm = xp.sqrt((x * x).sum(axis=self._axes(x.ndim), keepdims=True)
                       + dt(np.float32(self.eps)))
        return [x / norm], norm

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, y = out_grads[0], outputs[0]
        return [(g - y * (g * y).sum(axis=self._axes(y.ndim), keepdims=True)) / saved]
