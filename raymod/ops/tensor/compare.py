"""Comparisons: ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=`` between two arrays of one shape
(``_equal``, ...), with broadcasting (``broadcast_equal``, ...) and with a scalar
(``_equal_scalar``, ...). Each gives 1 where the comparison holds and 0 elsewhere, in the
dtype of the (left) input, and, as in MXNet, a zero gradient to every input."""
from __future__ import annotations

import operator

from .broadcast_binary import _BroadcastBinary
from .elemwise_binary import _ElemwiseBinary
from .scalar_arith import _ScalarOp


class _Compare(_ElemwiseBinary):
    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        return [self.test(a, b).astype(a.dtype)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None, None]


class _BroadcastCompare(_BroadcastBinary):
    def compute(self, xp, a, b):
        return self.test(a, b).astype(a.dtype)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None, None]


class _ScalarCompare(_ScalarOp):
    def compute(self, xp, x, s):
        # integer inputs compare with the scalar converted to their type, as MXNet
        return self.test(x, int(s) if x.dtype.kind in "iub" else s)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class Equal(_Compare):
    """``lhs == rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_equal"
    aliases = ("_Equal",)
    test = staticmethod(operator.eq)


class NotEqual(_Compare):
    """``lhs != rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_not_equal"
    aliases = ("_Not_Equal",)
    test = staticmethod(operator.ne)


class Greater(_Compare):
    """``lhs > rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_greater"
    aliases = ("_Greater",)
    test = staticmethod(operator.gt)


class GreaterEqual(_Compare):
    """``lhs >= rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_greater_equal"
    aliases = ("_Greater_Equal",)
    test = staticmethod(operator.ge)


class Lesser(_Compare):
    """``lhs < rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_lesser"
    aliases = ("_Lesser",)
    test = staticmethod(operator.lt)


class LesserEqual(_Compare):
    """``lhs <= rhs`` as 1/0 for equal shapes; zero gradient."""

    name = "_lesser_equal"
    aliases = ("_Lesser_Equal",)
    test = staticmethod(operator.le)


class BroadcastEqual(_BroadcastCompare):
    """``lhs == rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_equal"
    test = staticmethod(operator.eq)


class BroadcastNotEqual(_BroadcastCompare):
    """``lhs != rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_not_equal"
    test = staticmethod(operator.ne)


class BroadcastGreater(_BroadcastCompare):
    """``lhs > rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_greater"
    test = staticmethod(operator.gt)


class BroadcastGreaterEqual(_BroadcastCompare):
    """``lhs >= rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_greater_equal"
    test = staticmethod(operator.ge)


class BroadcastLesser(_BroadcastCompare):
    """``lhs < rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_lesser"
    test = staticmethod(operator.lt)


class BroadcastLesserEqual(_BroadcastCompare):
    """``lhs <= rhs`` as 1/0 with broadcasting; zero gradient. Keeps the input shapes."""

    name = "broadcast_lesser_equal"
    test = staticmethod(operator.le)


class EqualScalar(_ScalarCompare):
    """``data == scalar`` as 1/0; zero gradient."""

    name = "_equal_scalar"
    aliases = ("_EqualScalar",)
    test = staticmethod(operator.eq)


class NotEqualScalar(_ScalarCompare):
    """``data != scalar`` as 1/0; zero gradient."""

    name = "_not_equal_scalar"
    aliases = ("_NotEqualScalar",)
    test = staticmethod(operator.ne)


class GreaterScalar(_ScalarCompare):
    """``data > scalar`` as 1/0; zero gradient."""

    name = "_greater_scalar"
    aliases = ("_GreaterScalar",)
    test = staticmethod(operator.gt)


class GreaterEqualScalar(_ScalarCompare):
    """``data >= scalar`` as 1/0; zero gradient."""

    name = "_greater_equal_scalar"
    aliases = ("_GreaterEqualScalar",)
    test = staticmethod(operator.ge)


class LesserScalar(_ScalarCompare):
    """``data < scalar`` as 1/0; zero gradient."""

    name = "_lesser_scalar"
    aliases = ("_LesserScalar",)
    test = staticmethod(operator.lt)


class LesserEqualScalar(_ScalarCompare):
    """``data <= scalar`` as 1/0; zero gradient."""

    name = "_lesser_equal_scalar"
    aliases = ("_LesserEqualScalar",)
    test = staticmethod(operator.le)
