"""_scatter_elemwise_div, _scatter_plus_scalar, _scatter_minus_scalar: arithmetic on a sparse
input's stored values only (MXNet's "scatter" ops), the places it does not store left out."""
from __future__ import annotations

from ...sparse import RowSparseArray, is_sparse
from ..base import ElementwiseOp, Param
from ._sparse_math import SPARSE, bare, dense, values_at, with_values


class ScatterElemwiseDiv(ElementwiseOp):
    """``lhs / rhs`` for equal shapes where ``lhs`` is row_sparse: only ``lhs``'s held rows
    are divided (by ``rhs``'s rows there, whatever ``rhs``'s storage), and the result is
    row_sparse with those rows; the rows ``lhs`` lacks stay missing instead of becoming
    ``0 / rhs``. Any other ``lhs`` gives ``elemwise_div``'s dense result.

    Gradients as ``elemwise_div`` (``head / rhs`` and ``-head * lhs / rhs**2``), dense.
    Backward keeps both inputs.
    """

    name = "_scatter_elemwise_div"
    inputs = ("lhs", "rhs")
    params = {}
    retain_inputs = (0, 1)

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "row_sparse"

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return ["row_sparse"], ["default", "default"]

    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        if isinstance(a, RowSparseArray):
            a = bare(a)
            return [with_values(a, (a.data / values_at(xp, b, a)).astype(a.dtype,
                                                                          copy=False))], None
        return [a / b], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, a, b = dense(out_grads[0]), dense(inputs[0]), dense(inputs[1])
        ga = g / b
        return [ga if need_grad[0] else None, -ga * a / b if need_grad[1] else None]


class _ScatterScalar(ElementwiseOp):
    params = {"scalar": Param("float", 1.0), "is_int": Param("bool", True)}

    def takes_sparse(self, in_stypes):
        return in_stypes[0] in SPARSE

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return [in_stypes[0]], ["row_sparse" if in_stypes[0] == "row_sparse" else "default"]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if is_sparse(x):
            x = bare(x)
            return [with_values(x, self.compute(x.data, self.scalar).astype(
                x.dtype, copy=False))], None
        return [self.compute(x, self.scalar).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]


class ScatterPlusScalar(_ScatterScalar):
    """``data + scalar`` on a csr or row_sparse input's stored values only (the result keeps
    its storage and pattern); a dense input gets ``_plus_scalar``. The gradient is the head
    gradient. Backward keeps nothing."""

    name = "_scatter_plus_scalar"

    @staticmethod
    def compute(x, s):
        return x + s


class ScatterMinusScalar(_ScatterScalar):
    """``data - scalar`` on a csr or row_sparse input's stored values only (the result keeps
    its storage and pattern); a dense input gets ``_minus_scalar``. The gradient is the head
    gradient. Backward keeps nothing."""

    name = "_scatter_minus_scalar"

    @staticmethod
    def compute(x, s):
        return x - s
