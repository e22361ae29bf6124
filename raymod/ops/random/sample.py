"""_random_normal and _random_uniform: arrays of random values, with no inputs."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, known, merge_shape
from ..tensor._checks import dtype_choice
from ._draw import SAMPLE_DTYPES, standard


class _Sample(Op):
    inputs = ()
    # a 0 in `shape` (a batch size, say) is only known from the executor's inferred shapes
    needs_out_shapes = True

    def check(self) -> None:
        if self.dtype is not None:
            self.dtype = dtype_choice(self.name, "dtype", self.dtype, SAMPLE_DTYPES)

    def infer_shape(self, in_shapes, out_shapes):
        # an empty shape is unknown (MXNet 1.x): it must come from the graph
        return [], [merge_shape(self.shape or None, out_shapes[0])], []

    def infer_type(self, in_types, out_types):
        return [], [self.dtype or out_types[0] or np.dtype(np.float32)], []

    def forward(self, xp, inputs, aux, is_train, out_shapes=None, out_dtypes=None):
        shape = tuple(out_shapes[0]) if out_shapes and out_shapes[0] else self.shape
        if not shape or not known(shape):
            raise ShapeError(f"{self.name}: shape={self.shape} has unknown dims and the "
                             "executor passed no inferred output shape")
        dtype = out_dtypes[0] if out_dtypes and out_dtypes[0] else self.dtype or np.float32
        return [self.draw(xp, shape, np.dtype(dtype))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return []


class RandomNormal(_Sample):
    """Samples of N(``loc``, ``scale``²) of ``shape`` (0 dims come from the graph) and
    ``dtype`` (float16/32/64, default float32), from :func:`raymod.random.device_generator`,
    so ``rm.random.seed`` makes them repeatable. ``ctx`` is accepted and ignored. No inputs,
    no gradient.
    """

    name = "_random_normal"
    aliases = ("random_normal", "normal")
    params = {"loc": Param("float", 0.0), "scale": Param("float", 1.0),
              "shape": Param("shape", ()), "ctx": Param("str", ""),
              "dtype": Param("dtype", None, optional=True)}

    def check(self) -> None:
        super().check()
        if not self.scale > 0:
            raise AttributeValueError(f"_random_normal: scale must be > 0, got {self.scale}")

    def draw(self, xp, shape, dtype):
        z = standard(xp, "normal", shape, dtype)
        return z * dtype.type(self.scale) + dtype.type(self.loc)


class RandomUniform(_Sample):
    """Samples of U[``low``, ``high``) of ``shape`` and ``dtype``; otherwise as
    :class:`RandomNormal`."""

    name = "_random_uniform"
    aliases = ("random_uniform", "uniform")
    params = {"low": Param("float", 0.0), "high": Param("float", 1.0),
              "shape": Param("shape", ()), "ctx": Param("str", ""),
              "dtype": Param("dtype", None, optional=True)}

    def check(self) -> None:
        super().check()
        if self.high < self.low:
            raise AttributeValueError(f"_random_uniform: low={self.low} must not exceed "
                                      f"high={self.high}")

    def draw(self, xp, shape, dtype):
        u = standard(xp, "uniform", shape, dtype)
        return u * dtype.type(self.high - self.low) + dtype.type(self.low)
