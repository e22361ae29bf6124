"""norm and _square_sum: reductions of magnitudes over axes."""
from __future__ import annotations

from ...base import AttributeValueError
from ...sparse import RowSparseArray
from ..base import Param
from ._checks import dtype_choice
from .reduce import _Reduce

NORM_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8")


class SquareSum(_Reduce):
    """Sum of squares over ``axis`` (``axis``, ``keepdims`` and ``exclude`` as ``sum``).

    MXNet 1.9.1 registers it for a 2-d row_sparse ``data`` (a factor table), where the result
    of ``axis=1, keepdims=True`` is row_sparse too (one value per held row) and the gradient
    row_sparse (the held rows only); raymod also computes it on dense arrays. Backward keeps
    the input (the gradient is ``2 * data * head``).
    """

    name = "_square_sum"
    retain_inputs = (0,)

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "row_sparse" and self.axis in ((0,), (1,), (-1,)) \
            and not self.exclude

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        rows = self.axis != (0,) and self.keepdims
        return ["row_sparse" if rows else "default"], ["row_sparse"]

    def reduce(self, xp, x, axes):
        return (x * x).sum(axis=axes)

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if not isinstance(x, RowSparseArray):
            return super().forward(xp, inputs, aux, is_train)
        if self.axis == (0,):  # rows not held add nothing
            return [self.reduce(xp, x.data, (0,)).reshape(self._out_shape(x.shape))], None
        per_row = self.reduce(xp, x.data, (1,))
        if self.keepdims:
            return [RowSparseArray(per_row.reshape(-1, 1), x.indices, (x.shape[0], 1),
                                   check=False)], None
        out = xp.zeros(x.shape[0], x.dtype)
        out[x.indices] = per_row
        return [out], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, g = inputs[0], out_grads[0]
        if isinstance(x, RowSparseArray):  # only the held rows have a gradient
            if isinstance(g, RowSparseArray) and self.axis != (0,):
                # and of those, only the rows the head gradient holds (as MXNet): a lazy
                # update must not touch the others
                x = x.retain(g.indices)
                rows = g.take(x.indices).reshape(-1, 1)
            elif self.axis == (0,):
                rows = (g.todense() if isinstance(g, RowSparseArray) else g).reshape(1, -1)
            else:
                rows = g.reshape(-1)[x.indices].reshape(-1, 1)
            return [RowSparseArray(2 * x.data * rows, x.indices, x.shape, check=False)]
        if isinstance(g, RowSparseArray):
            g = g.todense()
        axes = self.reduced_axes(x.ndim)
        return [2 * x * self._expand(g, x.shape, axes)]


class Norm(_Reduce):
    """The L1 (``ord=1``: sum of absolute values) or L2 (``ord=2``: root of the sum of
    squares) norm over ``axis`` (all axes when None; several axes give one norm over all of
    them, so two axes of a matrix give its Frobenius norm). Shapes as ``sum``; ``out_dtype``
    sets the output dtype (default: ``data``'s).

    Gradients: ``sign(data)`` times the head for L1, ``data / norm`` times the head for L2,
    0 where the norm is 0 (MXNet gives NaN there). Backward keeps the input and, for L2,
    the norm in ``data``'s dtype.
    """

    name = "norm"
    params = {"ord": Param("int", 2), "axis": Param("shape", None, optional=True),
              "out_dtype": Param("dtype", None, optional=True), "keepdims": Param("bool", False)}
    exclude = False
    retain_inputs = (0,)

    def check(self) -> None:
        if self.ord not in (1, 2):
            raise AttributeValueError(f"norm: attribute 'ord' must be 1 or 2, got {self.ord}")
        if self.out_dtype is not None:
            self.out_dtype = dtype_choice(self.name, "out_dtype", self.out_dtype, NORM_DTYPES)

    def infer_type(self, in_types, out_types):
        return [in_types[0]], [self.out_dtype or in_types[0]], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        axes = self.reduced_axes(x.ndim)
        if self.ord == 1:
            y = xp.abs(x).sum(axis=axes, keepdims=True)
        else:
            y = xp.sqrt((x * x).sum(axis=axes, keepdims=True))
        out = y.astype(self.out_dtype or x.dtype, copy=False).reshape(self._out_shape(x.shape))
        return [out], (y if self.ord == 2 else None)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        g = self._expand(out_grads[0], x.shape, self.reduced_axes(x.ndim)).astype(x.dtype,
                                                                                  copy=False)
        if self.ord == 1:
            return [g * xp.sign(x)]
        norm = saved
        # x is 0 wherever its norm is, so dividing by 1 there gives the 0 subgradient
        return [g * x / xp.where(norm == 0, xp.ones((), norm.dtype), norm)]
