"""_arange (arange): evenly spaced values, with no inputs."""
from __future__ import annotations

import math

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from ._checks import dtype_choice

ARANGE_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")


class Arange(Op):
    """``start, start + step, ...`` up to (not including) ``stop``, each value ``repeat`` times.

    With ``stop=None`` the range is ``[0, start)``, unless ``infer_range=True``: then the
    length comes from the graph (the shape another input gives the output) and the values
    start at ``start``. Values are computed in ``dtype`` as ``start + (i // repeat) * step``
    with ``start`` and ``step`` first converted to ``dtype`` (so an integer dtype truncates a
    fractional step, as MXNet). ``ctx`` is accepted and ignored. No inputs, no gradient.
    """

    name = "_arange"
    aliases = ("arange",)
    inputs = ()
    params = {"start": Param("float"), "stop": Param("float", None, optional=True),
              "step": Param("float", 1.0), "repeat": Param("int", 1),
              "infer_range": Param("bool", False), "ctx": Param("str", ""),
              "dtype": Param("dtype", "float32")}
    # with infer_range the length is only known from the executor's inferred shapes
    needs_out_shapes = True

    def check(self) -> None:
        self.dtype = dtype_choice(self.name, "dtype", self.dtype, ARANGE_DTYPES)
        if self.step == 0:
            raise AttributeValueError("_arange: step must not be 0")
        if self.repeat < 1:
            raise AttributeValueError(f"_arange: repeat must be >= 1, got {self.repeat}")
        self.first, self.last = self.start, self.stop
        if self.stop is None and not self.infer_range:
            self.first, self.last = 0.0, self.start
        if self.last is not None and not (self.first < self.last if self.step > 0
                                          else self.first > self.last):
            raise AttributeValueError(f"_arange: start={self.first}, stop={self.last}, "
                                      f"step={self.step} is an empty range")

    def length(self) -> int:
        """The output length, 0 while it is to be inferred."""
        if self.last is None:
            return 0
        return math.ceil((self.last - self.first) / self.step) * self.repeat

    def infer_shape(self, in_shapes, out_shapes):
        return [], [merge_shape((self.length(),), out_shapes[0], "_arange: output length")], []

    def infer_type(self, in_types, out_types):
        return [], [self.dtype], []

    def forward(self, xp, inputs, aux, is_train, out_shapes=None, out_dtypes=None):
        n = (out_shapes[0][0] if out_shapes and out_shapes[0] else 0) or self.length()
        if not n:
            raise ShapeError("_arange: infer_range=True but the executor passed no inferred "
                             "output length")
        step = xp.asarray(self.step, dtype=self.dtype)
        first = xp.asarray(self.first, dtype=self.dtype)
        return [first + (xp.arange(n) // self.repeat).astype(self.dtype) * step], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return []
