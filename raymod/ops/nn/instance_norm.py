"""InstanceNorm: normalise each channel of each sample over its spatial positions."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param, merge_shape


class InstanceNorm(Op):
    """``out = gamma * (data - mean) / sqrt(var + eps) + beta`` per sample and channel.

    ``data`` is (N, C, *spatial) with at least one spatial axis; mean and (biased) variance
    are taken over the spatial axes of each (sample, channel), in training and inference
    alike. ``gamma`` and ``beta`` have shape (C,). The hidden outputs ``mean`` and ``var``,
    (N, C) each, are those statistics (the variance, not its inverse root).

    Attributes
    ----------
    eps : float, default 1e-3

    Backward keeps ``data``, ``gamma`` and the ``mean`` and ``var`` outputs.
    """

    name = "InstanceNorm"
    params = {"eps": Param("float", 1e-3)}
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "var")
    retain_inputs = (0, 1)
    retain_outputs = (1, 2)

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        if data is None:
            return list(in_shapes), [None, None, None], []
        if len(data) < 3:
            raise ShapeError(f"data must have rank >= 3 (batch, channel, spatial...), "
                             f"got {data}")
        chan = (data[1],)
        for name, s in zip(("gamma", "beta"), in_shapes[1:]):
            merge_shape(s, chan, f"{name} must have shape (C,) = {chan} for data {data}, "
                                 f"got {s}")
        return [data, chan, chan], [data, data[:2], data[:2]], []

    def forward(self, xp, inputs, aux, is_train):
        x, gamma, beta = inputs
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes)
        var = x.var(axis=axes)
        span = (1,) * len(axes)
        scale = (gamma / xp.sqrt(var + x.dtype.type(self.eps))).reshape(x.shape[:2] + span)
        y = (x - mean.reshape(mean.shape + span)) * scale + beta.reshape((-1,) + span)
        return [y, mean, var], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, gamma = inputs[0], inputs[1]
        mean, var = outputs[1], outputs[2]
        g = out_grads[0]
        axes = tuple(range(2, x.ndim))
        span = (1,) * len(axes)
        inv_std = (1 / xp.sqrt(var + x.dtype.type(self.eps))).reshape(var.shape + span)
        xhat = (x - mean.reshape(mean.shape + span)) * inv_std
        grads = [None, None, None]
        if need_grad[1]:
            grads[1] = (g * xhat).sum(axis=(0,) + axes)
        if need_grad[2]:
            grads[2] = g.sum(axis=(0,) + axes)
        if need_grad[0]:
            gxhat = g * gamma.reshape((-1,) + span)
            grads[0] = inv_std * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                                  - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
        return grads
