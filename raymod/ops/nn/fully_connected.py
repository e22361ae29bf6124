"""FullyConnected: ``y = x W^T + b`` as one GEMM."""
from __future__ import annotations

import math

from ..base import Op, Param
from . import _skinny_gemm


class FullyConnected(Op):
    """A dense layer: ``output = data @ weight.T + bias``.

    ``data`` of shape (batch, d1, ...) is flattened to (batch, d1*...) when ``flatten`` is
    true; otherwise the layer applies to the last axis. ``weight`` is (num_hidden, in_units);
    ``bias`` is (num_hidden,), or (num_hidden, 1) as MXNet's shape inference also accepts (its
    gradient then has that shape too). Backward keeps ``data`` and ``weight``.
    """

    name = "FullyConnected"
    params = {"num_hidden": Param("int", doc="number of output units"),
              "no_bias": Param("bool", False), "flatten": Param("bool", True)}
    inputs = ("data", "weight", "bias")
    retain_inputs = (0, 1)
    writes_grad_out = True

    def check(self) -> None:
        if self.num_hidden < 1:
            from ...base import AttributeValueError
            raise AttributeValueError(f"FullyConnected: num_hidden must be >= 1, got {self.num_hidden}")

    def list_arguments(self) -> list[str]:
        return ["data", "weight"] if self.no_bias else ["data", "weight", "bias"]

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        n = self.num_hidden
        lead = None
        if data is not None and out is not None and self.flatten and len(data) >= 1:
            data = (data[0] or out[0],) + tuple(data[1:])
        elif data is not None and out is not None and not self.flatten and len(out) == len(data):
            data = tuple(d or o for d, o in zip(data[:-1], out[:-1])) + (data[-1],)
        weight = (n, 0)
        if data is not None:
            if self.flatten:
                lead = (data[0],)
                rest = data[1:]
                weight = (n, math.prod(rest) if all(rest) else 0)
            else:
                lead = tuple(data[:-1])
                weight = (n, data[-1])
            out = lead + (n,)
        bias = (n,)
        if not self.no_bias and len(in_shapes) > 2 and in_shapes[2] is not None \
                and len(in_shapes[2]) == 2 and in_shapes[2][1] == 1:
            bias = (n, 1)  # MXNet takes a column too
        shapes = [data, weight] + ([] if self.no_bias else [bias])
        return shapes, [out], []

    def forward(self, xp, inputs, aux, is_train):
        data, weight = inputs[0], inputs[1]
        x = data.reshape(data.shape[0], -1) if self.flatten else data
        y = _skinny_gemm.forward(xp, x, weight) if x.ndim == 2 else x @ weight.T
        if not self.no_bias:
            bias = inputs[2]
            y += bias.reshape(-1) if bias.ndim == 2 else bias
            return [y], bias.shape
        return [y], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad, grad_out=None):
        data, weight = inputs[0], inputs[1]
        out = grad_out or [None] * len(inputs)
        gy = out_grads[0]
        x = data.reshape(data.shape[0], -1) if self.flatten else data
        if not self.flatten and gy.ndim > 2:  # apply to the last axis: fold the leading ones
            gy2, x2 = gy.reshape(-1, gy.shape[-1]), x.reshape(-1, x.shape[-1])
        else:
            gy2, x2 = gy, x
        grads = [None, None, None][:len(inputs)]
        if need_grad[0]:
            grads[0] = _skinny_gemm.data_grad(xp, gy2, weight).reshape(data.shape)
        if need_grad[1]:
            grads[1] = _skinny_gemm.weight_grad(xp, gy2, x2, out=out[1])
        if not self.no_bias and need_grad[2]:
            if saved is not None and len(saved) == 2:  # a (num_hidden, 1) bias
                grads[2] = gy2.sum(axis=0).reshape(saved)
            else:
                grads[2] = gy2.sum(axis=0, out=out[2])
        return grads
