"""SwapAxis: exchange two axes."""
from __future__ import annotations

from ..base import Op, Param
from ._axis import fill_unknown, norm_axis


class SwapAxis(Op):
    """Exchange axes ``dim1`` and ``dim2`` of ``data`` (negative values count from the end).

    Backward keeps nothing: the gradient is swapped back.
    """

    name = "SwapAxis"
    aliases = ("swapaxes",)
    params = {"dim1": Param("int", 0), "dim2": Param("int", 0)}

    def _swap(self, shape: tuple) -> tuple:
        a, b = norm_axis(self.dim1, len(shape), "dim1"), norm_axis(self.dim2, len(shape), "dim2")
        out = list(shape)
        out[a], out[b] = out[b], out[a]
        return tuple(out)

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if out is not None:
            data = fill_unknown(data, self._swap(out)) if data is not None else self._swap(out)
        return [data], [None if data is None else self._swap(data)], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [xp.swapaxes(x, norm_axis(self.dim1, x.ndim), norm_axis(self.dim2, x.ndim))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [xp.swapaxes(g, norm_axis(self.dim1, g.ndim), norm_axis(self.dim2, g.ndim))]
