"""pick: one element per position of the other axes, chosen by index along one axis."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ._checks import as_index, axis_of


class Pick(Op):
    """``out[i, j] = data[i, index[i, j], j]`` along ``axis`` (any rank).

    ``index`` has ``data``'s shape without ``axis``, or with ``axis`` of size 1; floats are
    truncated toward zero. ``mode='clip'`` clamps indices outside ``[0, n)`` to the ends,
    ``'wrap'`` takes them modulo ``n``. The output drops ``axis`` (keeps it as size 1 with
    ``keepdims``). ``index`` gets a zero gradient; ``data``'s gradient is the head gradient
    at the picked positions. Backward keeps the resolved indices.
    """

    name = "pick"
    aliases = ("choose_element_0index",)
    inputs = ("data", "index")
    params = {"axis": Param("int", -1, optional=True), "keepdims": Param("bool", False),
              "mode": Param("str", "clip", choices=("clip", "wrap"))}
    no_grad_inputs = ("index",)

    def check(self) -> None:
        if self.axis is None:
            raise AttributeValueError("pick: axis=None is not supported; give an axis")

    @staticmethod
    def _drop(shape: tuple, ax: int, keep: bool) -> tuple:
        if keep:
            return shape[:ax] + (1,) + shape[ax + 1:]
        return shape[:ax] + shape[ax + 1:] or (1,)

    def infer_shape(self, in_shapes, out_shapes):
        data, index = in_shapes
        if data is None:
            return [data, index], [out_shapes[0]], []
        data = tuple(data)
        ax = axis_of(self.axis, data)
        keep = index is not None and len(index) == len(data)
        want = self._drop(data, ax, keep)
        if index is not None and (len(index) != len(want) or any(
                a and b and a != b for a, b in zip(index, want))):
            raise ShapeError(f"index of shape {tuple(index)} does not fit data of shape {data} "
                             f"with axis={self.axis}: expected {want}")
        index = want if index is None else tuple(a or b for a, b in zip(index, want))
        return [data, index], [self._drop(data, ax, self.keepdims)], []

    def infer_type(self, in_types, out_types):
        dtype = in_types[0] or out_types[0]
        return [dtype, in_types[1]], [dtype], []

    def forward(self, xp, inputs, aux, is_train):
        x, index = inputs
        ax = axis_of(self.axis, x.shape)
        n = x.shape[ax]
        idx = as_index(xp, index)
        idx = xp.clip(idx, 0, n - 1) if self.mode == "clip" else xp.mod(idx, n)
        idx = idx.reshape(self._drop(x.shape, ax, True))
        out = xp.take_along_axis(x, idx, axis=ax)
        return [out.reshape(self._drop(x.shape, ax, self.keepdims))], (ax, n, idx)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        ax, n, idx = saved
        g = out_grads[0].reshape(idx.shape)
        positions = xp.arange(n).reshape((n,) + (1,) * (idx.ndim - ax - 1))
        return [xp.where(positions == idx, g, xp.zeros((), g.dtype)), None]
