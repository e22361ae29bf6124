"""one_hot: indices to one-hot vectors."""
from __future__ import annotations

from ...base import AttributeValueError
from ..base import Op, Param
from ._checks import as_index, dtype_choice

ONE_HOT_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")


class OneHot(Op):
    """``out[..., j] = on_value if indices[...] == j else off_value`` for ``j < depth``.

    The output has shape ``indices.shape + (depth,)`` and dtype ``dtype``. Indices are
    truncated toward zero; those outside ``[0, depth)`` give a row of ``off_value``. No
    gradient (the indices get zeros); backward keeps nothing.
    """

    name = "one_hot"
    inputs = ("indices",)
    params = {"depth": Param("int"), "on_value": Param("float", 1.0),
              "off_value": Param("float", 0.0), "dtype": Param("dtype", "float32")}
    no_grad_inputs = ("indices",)

    def check(self) -> None:
        if self.depth < 1:
            raise AttributeValueError(f"one_hot: depth must be >= 1, got {self.depth}")
        self.dtype = dtype_choice(self.name, "dtype", self.dtype, ONE_HOT_DTYPES)

    def infer_shape(self, in_shapes, out_shapes):
        indices, out = in_shapes[0], out_shapes[0]
        if indices is None and out is not None:
            indices = tuple(out[:-1])
        return [indices], [None if indices is None else tuple(indices) + (self.depth,)], []

    def infer_type(self, in_types, out_types):
        return [in_types[0]], [self.dtype], []

    def forward(self, xp, inputs, aux, is_train):
        idx = as_index(xp, inputs[0])[..., None]
        hit = idx == xp.arange(self.depth)
        on = xp.asarray(self.on_value, dtype=self.dtype)
        off = xp.asarray(self.off_value, dtype=self.dtype)
        return [xp.where(hit, on, off)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]
