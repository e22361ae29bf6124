"""Arithmetic with a scalar: ``x + s``, ``x - s``, ``s - x``, ``x * s``, ``x / s``, ``s / x``,
``x ** s``, ``s ** x``, ``max(x, s)``, ``min(x, s)``,
``x mod s``, ``s mod x``, ``hypot(x, s)``."""
from __future__ import annotations

import math

from ...sparse import is_sparse
from ..base import ElementwiseOp, Param
from ._sparse_math import SPARSE, bare, scale, with_values


class _ScalarOp(ElementwiseOp):
    params = {"scalar": Param("float", 1.0), "is_int": Param("bool", True)}
    # a csr or row_sparse input keeps its storage, computed on its stored values (MXNet's
    # _mul_scalar and _div_scalar)
    keeps_sparse = False
    # a sparse input is taken as it is (MXNet's _plus_scalar and _minus_scalar): its storage
    # is kept when the scalar is 0, else the result is dense; the head gradient passes back
    # in its own storage
    sparse_in = False

    def _keeps(self) -> bool:
        return self.keeps_sparse or (self.sparse_in and self.scalar == 0)

    def takes_sparse(self, in_stypes):
        return (self.keeps_sparse or self.sparse_in) and in_stypes[0] in SPARSE

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        grad = "row_sparse" if in_stypes[0] == "row_sparse" else "default"
        return [in_stypes[0] if self._keeps() else "default"], [grad]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if is_sparse(x):
            x = bare(x)
            if self._keeps():
                return [with_values(x, self.compute(xp, x.data, self.scalar).astype(
                    x.dtype, copy=False))], None
            x = x.todense()  # a dense result: the scalar reaches every place
        return [self.compute(xp, x, self.scalar).astype(x.dtype, copy=False)], None


class PlusScalar(_ScalarOp):
    """``data + scalar``: dense, or for a csr or row_sparse input and ``scalar == 0`` of its
    storage. The gradient is the head gradient, in its storage. Backward keeps nothing."""

    name = "_plus_scalar"
    aliases = ("_PlusScalar",)
    sparse_in = True

    def compute(self, xp, x, s):
        return x + s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]


class MinusScalar(_ScalarOp):
    """``data - scalar``: dense, or for a csr or row_sparse input and ``scalar == 0`` of its
    storage. The gradient is the head gradient, in its storage. Backward keeps nothing."""

    name = "_minus_scalar"
    aliases = ("_MinusScalar",)
    sparse_in = True

    def compute(self, xp, x, s):
        return x - s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]


class RMinusScalar(_ScalarOp):
    """``scalar - data``. Backward keeps nothing."""

    name = "_rminus_scalar"
    aliases = ("_RMinusScalar",)

    def compute(self, xp, x, s):
        return s - x

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [-out_grads[0]]


class MulScalar(_ScalarOp):
    """``data * scalar``; a csr or row_sparse input keeps its storage. The gradient is the
    head gradient times ``scalar``, in its storage. Backward keeps nothing."""

    name = "_mul_scalar"
    aliases = ("_MulScalar",)
    keeps_sparse = True

    def compute(self, xp, x, s):
        return x * s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [scale(out_grads[0], self.scalar)]


class DivScalar(_ScalarOp):
    """``data / scalar``; a csr or row_sparse input keeps its storage. The gradient is the
    head gradient over ``scalar``, in its storage. Backward keeps nothing."""

    name = "_div_scalar"
    aliases = ("_DivScalar",)
    keeps_sparse = True

    def compute(self, xp, x, s):
        return x / s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        if is_sparse(g):
            g = bare(g)
            return [with_values(g, g.data / self.scalar)]
        return [g / self.scalar]


class RDivScalar(_ScalarOp):
    """``scalar / data``. Backward keeps the input."""

    name = "_rdiv_scalar"
    aliases = ("_RDivScalar",)
    retain_inputs = (0,)

    def compute(self, xp, x, s):
        return s / x

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        return [out_grads[0] * (-self.scalar / (x * x))]


class PowerScalar(_ScalarOp):
    """``data ** scalar``. Backward keeps the input."""

    name = "_power_scalar"
    aliases = ("_PowerScalar",)
    retain_inputs = (0,)

    def compute(self, xp, x, s):
        return x ** s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        return [out_grads[0] * (self.scalar * x ** (self.scalar - 1))]


class RPowerScalar(_ScalarOp):
    """``scalar ** data``. Backward keeps the output (the gradient is ``out * log(scalar)``)."""

    name = "_rpower_scalar"
    aliases = ("_RPowerScalar",)
    retain_outputs = (0,)

    def compute(self, xp, x, s):
        return s ** x

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        s = self.scalar
        log_s = math.log(s) if s > 0 else (-math.inf if s == 0 else math.nan)
        return [out_grads[0] * outputs[0] * log_s]


class MaximumScalar(_ScalarOp):
    """``max(data, scalar)``; where ``data == scalar`` the gradient passes (as in MXNet).

    Backward keeps the input.
    """

    name = "_maximum_scalar"
    aliases = ("_MaximumScalar",)
    retain_inputs = (0,)

    def compute(self, xp, x, s):
        return xp.maximum(x, s)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] * (inputs[0] >= self.scalar)]


class MinimumScalar(_ScalarOp):
    """``min(data, scalar)``; where ``data == scalar`` the gradient passes (as in MXNet).

    Backward keeps the input.
    """

    name = "_minimum_scalar"
    aliases = ("_MinimumScalar",)
    retain_inputs = (0,)

    def compute(self, xp, x, s):
        return xp.minimum(x, s)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] * (inputs[0] <= self.scalar)]


def _typed(x, s: float):
    """The scalar as integer inputs see it (converted to their type, as MXNet does)."""
    return int(s) if x.dtype.kind in "iub" else s


class ModScalar(_ScalarOp):
    """``data mod scalar`` with the sign of ``scalar`` (Python's ``%``); 0 when ``scalar`` is
    0, as MXNet. The gradient passes unchanged (0 for ``scalar=0``, where the output is
    constant; MXNet passes it there too). Backward keeps nothing."""

    name = "_mod_scalar"
    aliases = ("_ModScalar",)

    def compute(self, xp, x, s):
        s = _typed(x, s)
        return xp.zeros_like(x) if s == 0 else xp.mod(x, s)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] if self.scalar else None]


class RModScalar(_ScalarOp):
    """``scalar mod data`` with the sign of ``data``; 0 where ``data`` is 0, as MXNet.

    The gradient is ``-floor(scalar / data)`` times the head, and 0 where ``data`` is 0
    (MXNet gives an infinite one there). Backward keeps the input.
    """

    name = "_rmod_scalar"
    aliases = ("_RModScalar",)
    retain_inputs = (0,)

    def compute(self, xp, x, s):
        zero = x == 0
        rest = xp.mod(_typed(x, s), xp.where(zero, xp.ones((), x.dtype), x))
        return xp.where(zero, xp.zeros((), rest.dtype), rest)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        zero = x == 0
        quotient = xp.floor(_typed(x, self.scalar) / xp.where(zero, xp.ones((), x.dtype), x))
        return [out_grads[0] * xp.where(zero, xp.zeros((), x.dtype), -quotient)]


class HypotScalar(_ScalarOp):
    """``sqrt(data ** 2 + scalar ** 2)``. The gradient is ``data / out`` times the head.

    Backward keeps the input and the output.
    """

    name = "_hypot_scalar"
    aliases = ("_HypotScalar",)
    retain_inputs = (0,)
    retain_outputs = (0,)

    def compute(self, xp, x, s):
        return xp.hypot(x, s)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] * inputs[0] / outputs[0]]
