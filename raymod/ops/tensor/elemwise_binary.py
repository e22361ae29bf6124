"""elemwise_add/sub/mul/div, _power, _maximum, _minimum: arithmetic on two inputs of one shape.

Sparse inputs, as MXNet 1.9.1's storage rules: ``elemwise_add``, ``elemwise_sub``,
``_maximum`` and ``_minimum`` (``f(0, 0) == 0``) of two row_sparse inputs are row_sparse, of
two csr inputs csr, computed on the union of what the two store; ``elemwise_mul`` is sparse
whenever an input is (row_sparse with a dense or row_sparse operand, csr with a dense or csr
one), on the sparse operand's pattern. Other combinations compute on dense copies.
"""
from __future__ import annotations

from ...sparse import CSRArray, RowSparseArray, is_sparse
from ...sparse.row_sparse import sum_rows
from ..base import ElementwiseOp
from ._sparse_math import SPARSE, bare, dense, product, scale, union_apply


class _ElemwiseBinary(ElementwiseOp):
    inputs = ("lhs", "rhs")
    params = {}


class _UnionBinary(_ElemwiseBinary):
    """An op with ``compute(0, 0) == 0``: two sparse inputs of one storage type give that
    storage, computed on the union of their stored places. Backward of sparse inputs (other
    than ``elemwise_add``/``elemwise_sub``, which pass the head gradient on in its storage)
    computes on dense copies, as MXNet's dense-result backward."""

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == in_stypes[1] and in_stypes[0] in SPARSE

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        grad = "row_sparse" if in_stypes[0] == "row_sparse" and self.sparse_grads else "default"
        return [in_stypes[0]], [grad, grad]

    sparse_grads = False

    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        if is_sparse(a):
            return [union_apply(xp, a, b, lambda u, v: self.compute(xp, u, v))], None
        return [self.compute(xp, a, b)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return self.dense_backward(xp, [dense(g) for g in out_grads],
                                   [None if x is None else dense(x) for x in inputs],
                                   [None if y is None else dense(y) for y in outputs],
                                   need_grad)


def _sparse_sum(xp, a, b, sign: int):
    """``a + sign * b``: row_sparse operands through the ordered row sum, csr ones on the
    union of their places, dense ones as they are."""
    if isinstance(a, RowSparseArray):
        a, b = bare(a), bare(b)
        return sum_rows([a, b if sign > 0 else scale(b, -1)], a.shape)
    if isinstance(a, CSRArray):
        return union_apply(xp, a, b, (lambda u, v: u + v) if sign > 0 else (lambda u, v: u - v))
    return a + b if sign > 0 else a - b


class ElemwiseAdd(_UnionBinary):
    """``lhs + rhs`` for equal shapes (row_sparse + row_sparse is row_sparse, csr + csr is
    csr). Both gradients are the head gradient, in its storage. Backward keeps nothing."""

    name = "elemwise_add"
    aliases = ("_Plus", "_plus", "_add")
    sparse_grads = True

    def compute(self, xp, a, b):
        return a + b

    def forward(self, xp, inputs, aux, is_train):
        return [_sparse_sum(xp, inputs[0], inputs[1], 1)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if need_grad[0] else None, g if need_grad[1] else None]


class ElemwiseSub(_UnionBinary):
    """``lhs - rhs`` for equal shapes (row_sparse - row_sparse is row_sparse, csr - csr is
    csr). The gradients are the head gradient and its negative, in its storage. Backward
    keeps nothing."""

    name = "elemwise_sub"
    aliases = ("_Minus", "_minus", "_sub")
    sparse_grads = True

    def compute(self, xp, a, b):
        return a - b

    def forward(self, xp, inputs, aux, is_train):
        return [_sparse_sum(xp, inputs[0], inputs[1], -1)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if need_grad[0] else None, scale(g, -1) if need_grad[1] else None]


class ElemwiseMul(_ElemwiseBinary):
    """``lhs * rhs`` for equal shapes. Backward keeps both inputs.

    Sparse as MXNet's ``elemwise_mul``: with a row_sparse input (and a dense or row_sparse
    other) the product is row_sparse, with a csr input (and a dense or csr other) csr,
    holding the sparse operand's places. The gradients ``head * rhs`` and ``head * lhs`` are
    sparse wherever a factor is.
    """

    name = "elemwise_mul"
    aliases = ("_Mul", "_mul")
    retain_inputs = (0, 1)

    def takes_sparse(self, in_stypes):
        kinds = set(in_stypes) - {"default"}
        return len(kinds) == 1

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        stype = (set(in_stypes) - {"default"}).pop()
        grad = "row_sparse" if stype == "row_sparse" else "default"
        return [stype], [grad, grad]

    def forward(self, xp, inputs, aux, is_train):
        return [product(xp, inputs[0], inputs[1])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        return [product(xp, g, b) if need_grad[0] else None,
                product(xp, g, a) if need_grad[1] else None]


class ElemwiseDiv(_ElemwiseBinary):
    """``lhs / rhs`` for equal shapes. Backward keeps ``rhs`` and the output."""

    name = "elemwise_div"
    aliases = ("_Div", "_div")
    retain_inputs = (1,)
    retain_outputs = (0,)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] / inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        ga = out_grads[0] / inputs[1]  # d(a/b)/db = -(a/b)/b
        return [ga if need_grad[0] else None, -ga * outputs[0] if need_grad[1] else None]


class Power(_ElemwiseBinary):
    """``lhs ** rhs`` for equal shapes. Backward keeps both inputs and the output.

    The gradients are ``rhs * lhs ** (rhs - 1)`` and ``out * log(lhs)``; as in MXNet they are
    not finite where ``lhs <= 0`` (for ``rhs``) or at ``0 ** 0`` (for ``lhs``).
    """

    name = "_power"
    aliases = ("_Power",)
    retain_inputs = (0, 1)
    retain_outputs = (0,)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] ** inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        return [g * b * a ** (b - 1) if need_grad[0] else None,
                g * outputs[0] * xp.log(a) if need_grad[1] else None]


class Maximum(_UnionBinary):
    """Elementwise ``max(lhs, rhs)``; on ties ``lhs`` gets the gradient (as in MXNet).

    Two row_sparse (csr) inputs give a row_sparse (csr) result. Backward keeps both inputs.
    """

    name = "_maximum"
    aliases = ("_Maximum",)
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return xp.maximum(a, b)

    def dense_backward(self, xp, out_grads, inputs, outputs, need_grad):
        g, (a, b) = out_grads[0], inputs
        left = a >= b
        return [g * left if need_grad[0] else None, g * ~left if need_grad[1] else None]


class Minimum(_UnionBinary):
    """Elementwise ``min(lhs, rhs)``; on ties ``lhs`` gets the gradient (as in MXNet).

    Two row_sparse (csr) inputs give a row_sparse (csr) result. Backward keeps both inputs.
    """

    name = "_minimum"
    aliases = ("_Minimum",)
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return xp.minimum(a, b)

    def dense_backward(self, xp, out_grads, inputs, outputs, need_grad):
        g, (a, b) = out_grads[0], inputs
        left = a <= b
        return [g * left if need_grad[0] else None, g * ~left if need_grad[1] else None]
