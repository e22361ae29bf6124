"""_random_normal_like and _random_uniform_like: random arrays shaped like an input."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError
from ..base import ElementwiseOp, Param
from ._draw import standard


class _SampleLike(ElementwiseOp):
    # only data's shape and dtype are read; it gets a zero gradient
    no_grad_inputs = ("data",)

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [self.draw(xp, x.shape, np.dtype(x.dtype))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class RandomNormalLike(_SampleLike):
    """Samples of N(``loc``, ``scale``²) with ``data``'s shape and dtype, from raymod's seeded
    generator. ``data``'s values are not read; it gets a zero gradient."""

    name = "_random_normal_like"
    params = {"loc": Param("float", 0.0), "scale": Param("float", 1.0)}

    def check(self) -> None:
        if not self.scale > 0:
            raise AttributeValueError(f"_random_normal_like: scale must be > 0, got "
                                      f"{self.scale}")

    def draw(self, xp, shape, dtype):
        return standard(xp, "normal", shape, dtype) * dtype.type(self.scale) + dtype.type(
            self.loc)


class RandomUniformLike(_SampleLike):
    """Samples of U[``low``, ``high``) with ``data``'s shape and dtype; otherwise as
    :class:`RandomNormalLike`."""

    name = "_random_uniform_like"
    params = {"low": Param("float", 0.0), "high": Param("float", 1.0)}

    def check(self) -> None:
        if self.high < self.low:
            raise AttributeValueError(f"_random_uniform_like: low={self.low} must not exceed "
                                      f"high={self.high}")

    def draw(self, xp, shape, dtype):
        return standard(xp, "uniform", shape, dtype) * dtype.type(
            self.high - self.low) + dtype.type(self.low)
