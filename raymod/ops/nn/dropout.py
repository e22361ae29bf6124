"""Dropout: zero random elements in training and rescale the rest."""
from __future__ import annotations

import numpy as np

from ... import random as rm_random
from ...base import AttributeValueError, ShapeError
from ..base import ElementwiseOp, Param


class Dropout(ElementwiseOp):
    """Zero each element with probability ``p`` and scale the kept ones by ``1 / (1 - p)``.

    Applies in training (``forward(is_train=True)``) when ``mode='training'`` and always when
    ``mode='always'``; otherwise the output is the input. ``axes`` lists axes along which
    one mask value is shared (variational dropout: the mask has size 1 there). The mask comes
    from :func:`raymod.random.device_generator`, so ``rm.random.seed`` makes it reproducible.
    ``p=1`` drops everything (MXNet gives NaN). ``cudnn_off`` is accepted and ignored.

    Backward keeps the scaled mask.
    """

    name = "Dropout"
    params = {"p": Param("float", 0.5), "mode": Param("str", "training",
                                                     choices=("training", "always")),
              "axes": Param("shape", ()), "cudnn_off": Param("bool", False, optional=True)}

    def check(self) -> None:
        if not 0 <= self.p <= 1:
            raise AttributeValueError(f"Dropout: p must be in [0, 1], got {self.p}")

    def infer_shape(self, in_shapes, out_shapes):
        shapes = super().infer_shape(in_shapes, out_shapes)
        data = shapes[0][0]
        if data is not None and any(not -len(data) <= a < len(data) for a in self.axes):
            raise ShapeError(f"axes={self.axes} out of range for data {data}")
        return shapes

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if self.p == 0 or not (is_train or self.mode == "always"):
            return [x], None
        shape = list(x.shape)
        for a in self.axes:
            shape[a] = 1
        keep = 1 - self.p
        if keep == 0:
            mask = xp.zeros(shape, x.dtype)
        else:
            draw_dtype = x.dtype if x.dtype in (np.float32, np.float64) else np.float32
            u = rm_random.device_generator(xp).random(tuple(shape), dtype=draw_dtype)
            mask = (u < keep).astype(x.dtype) * x.dtype.type(1 / keep)
        return [x * mask], mask

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if saved is None else g * saved]
