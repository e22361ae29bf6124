"""_mod, _hypot, broadcast_mod, broadcast_hypot: remainder and hypotenuse of two arrays."""
from __future__ import annotations

from .broadcast_binary import _BroadcastBinary
from .elemwise_binary import _ElemwiseBinary, _UnionBinary


def _mod(xp, a, b):
    """``a mod b`` with the sign of ``b`` (Python's ``%``), 0 where ``b`` is 0 (as MXNet)."""
    zero = b == 0
    rest = xp.mod(a, xp.where(zero, xp.ones((), b.dtype), b))
    return xp.where(zero, xp.zeros((), rest.dtype), rest)


def _mod_grads(xp, g, a, b, need):
    """``d(a mod b)``: 1 for ``a`` and ``-floor(a / b)`` for ``b``, both 0 where ``b`` is 0
    (the output is constant there; MXNet gives 1 and an infinite value)."""
    zero = b == 0
    nil = xp.zeros((), g.dtype)
    ga = xp.where(zero, nil, g) if need[0] else None
    gb = None
    if need[1]:
        gb = xp.where(zero, nil, -g * xp.floor(a / xp.where(zero, xp.ones((), b.dtype), b)))
    return ga, gb


class Mod(_ElemwiseBinary):
    """``lhs mod rhs`` for equal shapes, with the sign of ``rhs`` (Python's ``%``); 0 where
    ``rhs`` is 0. Gradients: 1 for ``lhs``, ``-floor(lhs / rhs)`` for ``rhs`` (0 where ``rhs``
    is 0). Backward keeps both inputs."""

    name = "_mod"
    aliases = ("_Mod",)
    retain_inputs = (0, 1)

    def forward(self, xp, inputs, aux, is_train):
        return [_mod(xp, *inputs)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return list(_mod_grads(xp, out_grads[0], *inputs, need_grad))


class Hypot(_UnionBinary):
    """``sqrt(lhs ** 2 + rhs ** 2)`` for equal shapes; gradients ``lhs / out`` and
    ``rhs / out``. Two row_sparse (csr) inputs give a row_sparse (csr) result, as MXNet.
    Backward keeps both inputs and the output."""

    name = "_hypot"
    aliases = ("_Hypot",)
    retain_inputs = (0, 1)
    retain_outputs = (0,)

    def compute(self, xp, a, b):
        return xp.hypot(a, b)

    def dense_backward(self, xp, out_grads, inputs, outputs, need_grad):
        g = out_grads[0] / outputs[0]
        return [g * inputs[0] if need_grad[0] else None, g * inputs[1] if need_grad[1] else None]


class BroadcastMod(_BroadcastBinary):
    """``lhs mod rhs`` with broadcasting; otherwise as :class:`Mod`. Backward keeps both
    inputs."""

    name = "broadcast_mod"
    retain_inputs = (0, 1)

    def compute(self, xp, a, b):
        return _mod(xp, a, b)

    def grads(self, xp, g, inputs, outputs, need):
        a, b = inputs
        return _mod_grads(xp, g, a, b, need)


class BroadcastHypot(_BroadcastBinary):
    """``sqrt(lhs ** 2 + rhs ** 2)`` with broadcasting; gradients as :class:`Hypot`.
    Backward keeps both inputs and the output."""

    name = "broadcast_hypot"
    retain_inputs = (0, 1)
    retain_outputs = (0,)

    def compute(self, xp, a, b):
        return xp.hypot(a, b)

    def grads(self, xp, g, inputs, outputs, need):
        g = g / outputs[0]
        return (g * inputs[0] if need[0] else None), (g * inputs[1] if need[1] else None)
