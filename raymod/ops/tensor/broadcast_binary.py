"""broadcast_add/sub/mul/div/power/maximum/minimum: arithmetic with numpy broadcasting."""
from __future__ import annotations

from ...base import MXNetError, ShapeError
from ...sparse import CSRArray, is_sparse
from ..base import Op, sum_to_shape
from ._sparse_math import bare, dense, with_values


def broadcast_shape(lhs: tuple, rhs: tuple) -> tuple:
    """The broadcast of two partial shapes (aligned from the right, 0 = unknown dim)."""
    n = max(len(lhs), len(rhs))
    a, b = (1,) * (n - len(lhs)) + tuple(lhs), (1,) * (n - len(rhs)) + tuple(rhs)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif not x or not y:  # an unknown dim is 1 or the other one
            out.append(x or y)
        else:
            raise ShapeError(f"lhs of shape {tuple(lhs)} and rhs of shape {tuple(rhs)} "
                             "cannot be broadcast together")
    return tuple(out)


class _BroadcastBinary(Op):
    inputs = ("lhs", "rhs")
    params = {}

    def infer_shape(self, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        out = out_shapes[0]
        if lhs is None or rhs is None:
            return [lhs, rhs], [out], []
        if out is not None and len(lhs) == len(rhs) == len(out):
            # a 0 dim facing a 1 must equal the output's
            lhs = tuple(o if not a and b == 1 else a for a, b, o in zip(lhs, rhs, out))
            rhs = tuple(o if not b and a == 1 else b for a, b, o in zip(lhs, rhs, out))
        return [lhs, rhs], [broadcast_shape(lhs, rhs)], []

    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        return [self.compute(xp, a, b)], (a.shape, b.shape)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if any(is_sparse(v) for v in list(out_grads) + list(inputs) + list(outputs)):
            # a csr lhs (broadcast_mul, broadcast_div): dense gradients, as MXNet's
            out_grads, inputs, outputs = ([None if v is None else dense(v) for v in vs]
                                          for vs in (out_grads, inputs, outputs))
        ga, gb = self.grads(xp, out_grads[0], inputs, outputs, need_grad)
        return [sum_to_shape(xp, ga, saved[0]) if need_grad[0] else None,
                sum_to_shape(xp, gb, saved[1]) if need_grad[1] else None]


class BroadcastAdd(_BroadcastBinary):
    """``lhs + rhs`` with broadcasting. Backward keeps the input shapes."""

    name = "broadcast_add"
    aliases = ("broadcast_plus",)

    def compute(self, xp, a, b):
        return a + b

    def grads(self, xp, g, inputs, outputs, need):
        return g, g


class BroadcastSub(_BroadcastBinary):
    """``lhs - rhs`` with broadcasting. Backward keeps the input shapes."""

    name = "broadcast_sub"
    aliases = ("broadcast_minus",)

    def compute(self, xp, a, b):
        return a - b

    def grads(self, xp, g, inputs, outputs, need):
        return g, (-g if need[1] else None)


class _CsrScaled(_BroadcastBinary):
    """``broadcast_mul``/``broadcast_div`` of a csr ``lhs`` by a dense ``rhs`` that broadcasts
    to ``lhs``'s shape (a scalar, a row or a column, as MXNet) is csr: the stored values
    combined with ``rhs`` at their places. The gradients are dense."""

    def takes_sparse(self, in_stypes):
        return list(in_stypes) == ["csr", "default"]

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return ["csr"], ["default", "default"]

    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        if not isinstance(a, CSRArray):
            return super().forward(xp, inputs, aux, is_train)
        a = bare(a)
        if b.ndim > 2 or broadcast_shape(a.shape, b.shape) != tuple(a.shape):
            raise MXNetError(f"{self.name}: a csr lhs of shape {a.shape} takes a rhs that "
                             f"broadcasts to its shape (a scalar, a row or a column), got "
                             f"rhs of shape {tuple(b.shape)}")
        full = xp.broadcast_to(b.reshape((1,) * (2 - b.ndim) + tuple(b.shape)), a.shape)
        values = self.compute(xp, a.data, full[a.row_ids(), a.indices])
        return [with_values(a, values.astype(a.dtype, copy=False))], (a.shape, b.shape)


class BroadcastMul(_CsrScaled):
    """``lhs * rhs`` with broadcasting (csr times a dense row, column or scalar is csr).
    Backward keeps both inputs."""

    name = "broadcast_mul"
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return a * b

    def grads(self, xp, g, inputs, outputs, need):
        a, b = inputs
        return (g * b if need[0] else None), (g * a if need[1] else None)


class BroadcastDiv(_CsrScaled):
    """``lhs / rhs`` with broadcasting (csr over a dense row, column or scalar is csr).
    Backward keeps ``rhs`` and the output."""

    name = "broadcast_div"
    retain_inputs = (1,)
    retain_outputs = (0,)

    def compute(self, xp, a, b):
        return a / b

    def grads(self, xp, g, inputs, outputs, need):
        ga = g / inputs[1]
        return ga, (-ga * outputs[0] if need[1] else None)


class BroadcastPower(_BroadcastBinary):
    """``lhs ** rhs`` with broadcasting (gradients as ``_power``).

    Backward keeps both inputs and the output.
    """

    name = "broadcast_power"
    retain_inputs = (0, 1)
    retain_outputs = (0,)

    def compute(self, xp, a, b):
        return a ** b

    def grads(self, xp, g, inputs, outputs, need):
        a, b = inputs
        return (g * b * a ** (b - 1) if need[0] else None,
                g * outputs[0] * xp.log(a) if need[1] else None)


class BroadcastMaximum(_BroadcastBinary):
    """``max(lhs, rhs)`` with broadcasting; on ties ``lhs`` gets the gradient (as in MXNet).

    Backward keeps both inputs.
    """

    name = "broadcast_maximum"
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return xp.maximum(a, b)

    def grads(self, xp, g, inputs, outputs, need):
        left = inputs[0] >= inputs[1]
        return (g * left if need[0] else None), (g * ~left if need[1] else None)


class BroadcastMinimum(_BroadcastBinary):
    """``min(lhs, rhs)`` with broadcasting; on ties ``lhs`` gets the gradient (as in MXNet).

    Backward keeps both inputs.
    """

    name = "broadcast_minimum"
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return xp.minimum(a, b)

    def grads(self, xp, g, inputs, outputs, need):
        left = inputs[0] <= inputs[1]
        return (g * left if need[0] else None), (g * ~left if need[1] else None)
