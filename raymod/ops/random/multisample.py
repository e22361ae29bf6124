"""_sample_normal and _sample_uniform: per-element distribution parameters as inputs."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ..tensor._checks import dtype_choice
from ._draw import SAMPLE_DTYPES, standard


class _MultiSample(Op):
    """``shape`` samples for every element of the two parameter arrays (of one shape): the
    output has shape ``params.shape + shape`` and dtype ``dtype`` (float32 when None, whatever
    the inputs' dtype, as MXNet). As in MXNet the parameters get a zero gradient. Backward
    keeps nothing."""

    params = {"shape": Param("shape", ()), "dtype": Param("dtype", None, optional=True)}

    def check(self) -> None:
        if self.dtype is not None:
            self.dtype = dtype_choice(self.name, "dtype", self.dtype, SAMPLE_DTYPES)
        if any(s < 1 for s in self.shape):
            raise AttributeValueError(f"{self.name}: shape={self.shape} must be positive in "
                                      "every dim")

    def infer_shape(self, in_shapes, out_shapes):
        a, b = self.inputs
        shape = None
        for name, s in zip(self.inputs, in_shapes):
            try:
                shape = merge_shape(shape, s)
            except ShapeError:
                raise ShapeError(f"{a} of shape {tuple(in_shapes[0])} and {b} of shape "
                                 f"{tuple(in_shapes[1])} must have the same shape") from None
        out = out_shapes[0]
        n = len(self.shape)
        if out is not None and len(out) > n:
            shape = merge_shape(shape, tuple(out[:len(out) - n]),
                                f"the output must have shape {a}.shape + shape={self.shape}")
        if shape is None:
            return list(in_shapes), [out], []
        return [shape, shape], [tuple(shape) + tuple(self.shape)], []

    def infer_type(self, in_types, out_types):
        dtype = in_types[0] or in_types[1]
        return [dtype, dtype], [self.dtype or np.dtype(np.float32)], []

    def forward(self, xp, inputs, aux, is_train):
        first, second = inputs
        dtype = self.dtype or np.dtype(np.float32)
        # the parameters broadcast over the trailing sample axes
        tail = (1,) * len(self.shape)
        first = first.reshape(first.shape + tail).astype(dtype, copy=False)
        second = second.reshape(second.shape + tail).astype(dtype, copy=False)
        z = standard(xp, self.kind, tuple(inputs[0].shape) + tuple(self.shape), dtype)
        return [self.combine(first, second, z)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None, None]


class SampleNormal(_MultiSample):
    """Samples of N(``mu``, ``sigma``²), one distribution per element of ``mu`` / ``sigma``,
    drawn from raymod's seeded generator. See :class:`_MultiSample` for shapes and dtypes."""

    name = "_sample_normal"
    aliases = ("sample_normal",)
    inputs = ("mu", "sigma")
    no_grad_inputs = inputs
    kind = "normal"

    @staticmethod
    def combine(mu, sigma, z):
        return mu + sigma * z


class SampleUniform(_MultiSample):
    """Samples of U[``low``, ``high``), one distribution per element of ``low`` / ``high``,
    drawn from raymod's seeded generator. See :class:`_MultiSample` for shapes and dtypes."""

    name = "_sample_uniform"
    aliases = ("sample_uniform",)
    inputs = ("low", "high")
    no_grad_inputs = inputs
    kind = "uniform"

    @staticmethod
    def combine(low, high, u):
        return low + (high - low) * u
