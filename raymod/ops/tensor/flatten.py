"""Flatten: collapse every axis after the first."""
from __future__ import annotations

import math

from ..base import Op


class Flatten(Op):
    """Reshape ``data`` of shape (d0, d1, ..., dk) to (d0, d1*...*dk).

    A 1-d input (d0,) becomes (d0, 1), as in MXNet. Backward keeps only the input shape.
    """

    name = "Flatten"
    aliases = ("flatten",)
    params = {}

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is not None and out is not None and data and not data[0]:
            data = (out[0],) + tuple(data[1:])
        if data is not None and len(data) >= 1:
            rest = data[1:]
            out = (data[0], math.prod(rest) if all(rest) else 0)
        return [data], [out], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [x.reshape(x.shape[0], -1)], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].reshape(saved)]
