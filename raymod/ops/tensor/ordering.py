"""topk, sort, argsort: stable orderings along one axis (ties keep their original order)."""
from __future__ import annotations

import math

import numpy as np

from ...base import ShapeError
from ..base import Op, Param, merge_shape
from ._checks import axis_of, dtype_choice

INDEX_DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8")


def stable_order(xp, x, axis: int, ascending: bool):
    """Indices that sort ``x`` along ``axis``; equal values keep their original order.

    Descending order sorts the negated values, so ties still come lowest index first, as
    in MXNet (reversing an ascending sort would put them last).
    """
    if not ascending:
        x = -(x.astype(np.int64) if x.dtype.kind in "ub" else x)
    return xp.argsort(x, axis=axis, kind="stable")


def scatter_back(xp, g, order, axis: int):
    """The gradient of ``take_along_axis(x, order[:k], axis)``: ``g`` put back where it came
    from, zeros where nothing was taken."""
    n, k = order.shape[axis], g.shape[axis]
    if k < n:
        pad = list(g.shape)
        pad[axis] = n - k
        g = xp.concatenate([g, xp.zeros(tuple(pad), g.dtype)], axis=axis)
    rank = xp.argsort(order, axis=axis, kind="stable")  # position of each element in order
    return xp.take_along_axis(g, rank, axis=axis)


class _Ordering(Op):
    """Shared axis handling: ``axis=None`` orders the flattened input."""

    def _flat_shape(self, data: tuple) -> tuple:
        return (math.prod(data) if all(data) else 0,)

    def _axis(self, data: tuple) -> tuple[tuple, int]:
        """The shape that is ordered (flattened for ``axis=None``) and its axis."""
        if self.axis is None:
            return self._flat_shape(data), 0
        return tuple(data), axis_of(self.axis, data)

    def _prepare(self, x):
        if self.axis is None:
            return x.reshape(-1), 0
        return x, axis_of(self.axis, x.shape)


class TopK(_Ordering):
    """The ``k`` largest (or smallest, ``is_ascend``) entries along ``axis``.

    ``ret_typ`` picks the output: ``'indices'`` (their positions, as ``dtype``), ``'value'``
    (their values, largest first), ``'both'`` (values and indices) or ``'mask'`` (``data``'s
    shape, 1 at the chosen entries, 0 elsewhere). ``k < 1`` means the whole axis;
    ``axis=None`` works on the flattened input. Equal values are taken lowest index first.
    The values get the gradient (scattered back to their positions); indices and masks
    have none. Backward keeps the sort order.
    """

    name = "topk"
    params = {"axis": Param("int", -1, optional=True), "k": Param("int", 1),
              "ret_typ": Param("str", "indices", choices=("both", "indices", "mask", "value")),
              "is_ascend": Param("bool", False), "dtype": Param("dtype", "float32")}

    def check(self) -> None:
        self.dtype = dtype_choice(self.name, "dtype", self.dtype, INDEX_DTYPES)

    def list_outputs(self) -> list[str]:
        # as MXNet, 'value' keeps the indices as a hidden second output
        return ["output0", "output1"] if self.ret_typ in ("value", "both") else ["output"]

    def num_visible_outputs(self) -> int:
        return 2 if self.ret_typ == "both" else 1

    def _k(self, n: int, data: tuple) -> int:
        """``k`` for an axis of ``n`` entries (0: unknown); ShapeError if it has fewer."""
        if n and self.k > n:
            raise ShapeError(f"k={self.k} is larger than the {n} entries along "
                             f"axis={self.axis} of data of shape {tuple(data)}")
        return self.k if self.k >= 1 else n

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if self.ret_typ == "mask":  # the mask has data's shape
            data = merge_shape(data, out_shapes[0], "the mask must have data's shape")
        if data is None:
            return [None], [None] * len(out_shapes), []
        shape, ax = self._axis(data)
        k = self._k(shape[ax], data)
        if self.ret_typ == "mask":
            return [data], [data], []
        return [data], [shape[:ax] + (k,) + shape[ax + 1:]] * len(out_shapes), []

    def infer_type(self, in_types, out_types):
        dtype = in_types[0]
        if dtype is None and self.ret_typ in ("value", "both", "mask"):
            dtype = out_types[0]
        outs = {"value": [dtype, self.dtype], "both": [dtype, self.dtype],
                "indices": [self.dtype], "mask": [dtype]}[self.ret_typ]
        return [dtype], outs, []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        flat, ax = self._prepare(x)
        k = self._k(flat.shape[ax], x.shape)
        order = stable_order(xp, flat, ax, self.is_ascend)
        if self.ret_typ == "mask":
            rank = xp.argsort(order, axis=ax, kind="stable")
            return [(rank < k).astype(x.dtype).reshape(x.shape)], None
        top = order[(slice(None),) * ax + (slice(0, k),)]
        indices = top.astype(self.dtype)
        if self.ret_typ == "indices":
            return [indices], None
        values = xp.take_along_axis(flat, top, axis=ax)
        return [values, indices], (order, ax, x.shape)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if saved is None:  # indices and masks have no gradient
            return [None]
        order, ax, shape = saved
        return [scatter_back(xp, out_grads[0], order, ax).reshape(shape)]


class Sort(_Ordering):
    """``data`` sorted along ``axis`` (ascending unless ``is_ascend=False``; ``axis=None``
    sorts the flattened input). Equal values keep their order. The gradient goes back to
    each value's original position. Backward keeps the sort order.
    """

    name = "sort"
    params = {"axis": Param("int", -1, optional=True), "is_ascend": Param("bool", True)}

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [out_shapes[0]], []
        return [data], [self._axis(data)[0]], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        flat, ax = self._prepare(x)
        order = stable_order(xp, flat, ax, self.is_ascend)
        return [xp.take_along_axis(flat, order, axis=ax)], (order, ax, x.shape)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        order, ax, shape = saved
        return [scatter_back(xp, out_grads[0], order, ax).reshape(shape)]


class ArgSort(_Ordering):
    """The positions that sort ``data`` along ``axis``, as ``dtype`` (``axis=None``: of the
    flattened input). Equal values keep their order. No gradient; backward keeps nothing.
    """

    name = "argsort"
    params = {"axis": Param("int", -1, optional=True), "is_ascend": Param("bool", True),
              "dtype": Param("dtype", "float32")}

    def check(self) -> None:
        self.dtype = dtype_choice(self.name, "dtype", self.dtype, INDEX_DTYPES)

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [out_shapes[0]], []
        return [data], [self._axis(data)[0]], []

    def infer_type(self, in_types, out_types):
        return [in_types[0]], [self.dtype], []

    def forward(self, xp, inputs, aux, is_train):
        flat, ax = self._prepare(inputs[0])
        return [stable_order(xp, flat, ax, self.is_ascend).astype(self.dtype)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]
