"""LayerNorm: normalise along one axis of every position of the others."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param, merge_shape


class LayerNorm(Op):
    """``out = gamma * (data - mean) / std + beta`` with statistics along ``axis``.

    ``mean`` and ``std = sqrt(var + eps)`` (biased variance) are taken along ``axis`` for
    every position of the other axes; ``gamma`` and ``beta`` have shape ``(data.shape[axis],)``
    and broadcast along that axis. The outputs ``mean`` and ``std`` keep every axis (size 1
    at ``axis``) and are shown only with ``output_mean_var``; no gradient flows back through
    them, as in MXNet. ``_npx_layer_norm`` is MXNet's alias.

    Attributes
    ----------
    axis : int, default -1
    eps : float, default 1e-5
    output_mean_var : bool, default False

    Backward keeps ``data``, ``gamma`` and the ``mean`` and ``std`` outputs.
    """

    name = "LayerNorm"
    aliases = ("_npx_layer_norm",)
    params = {"axis": Param("int", -1), "eps": Param("float", 1e-5),
              "output_mean_var": Param("bool", False)}
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "std")
    retain_inputs = (0, 1)
    retain_outputs = (1, 2)

    def num_visible_outputs(self) -> int:
        return 3 if self.output_mean_var else 1

    def _axis(self, ndim: int) -> int:
        if not -ndim <= self.axis < ndim:
            raise ShapeError(f"axis={self.axis} is out of range for data with {ndim} dims")
        return self.axis % ndim

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        if data is None:
            return list(in_shapes), [None, None, None], []
        axis = self._axis(len(data))
        chan = (data[axis],)
        for name, s in zip(("gamma", "beta"), in_shapes[1:]):
            merge_shape(s, chan, f"{name} must have shape {chan} (data {data} along axis "
                                 f"{self.axis}), got {s}")
        moments = data[:axis] + (1,) + data[axis + 1:]
        return [data, chan, chan], [data, moments, moments], []

    def _param_shape(self, ndim: int, axis: int) -> tuple:
        return tuple(-1 if i == axis else 1 for i in range(ndim))

    def forward(self, xp, inputs, aux, is_train):
        x, gamma, beta = inputs
        axis = self._axis(x.ndim)
        mean = x.mean(axis=axis, keepdims=True)
        std = xp.sqrt(x.var(axis=axis, keepdims=True) + x.dtype.type(self.eps))
        shape = self._param_shape(x.ndim, axis)
        y = (x - mean) / std * gamma.reshape(shape) + beta.reshape(shape)
        return [y, mean, std], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, gamma = inputs[0], inputs[1]
        mean, std = outputs[1], outputs[2]
        g = out_grads[0]
        axis = self._axis(x.ndim)
        others = tuple(i for i in range(x.ndim) if i != axis)
        xhat = (x - mean) / std
        grads = [None, None, None]
        if need_grad[1]:
            grads[1] = (g * xhat).sum(axis=others)
        if need_grad[2]:
            grads[2] = g.sum(axis=others)
        if need_grad[0]:
            gxhat = g * gamma.reshape(self._param_shape(x.ndim, axis))
            grads[0] = (gxhat - gxhat.mean(axis=axis, keepdims=True)
                        - xhat * (gxhat * xhat).mean(axis=axis, keepdims=True)) / std
        return grads
