"""Cast: change the dtype of an array."""
from __future__ import annotations

from ..base import ElementwiseOp, Param
from ._checks import dtype_choice

# MXNet's choices less bfloat16, which numpy has no type for
CAST_DTYPES = ("bool", "float16", "float32", "float64", "int32", "int64", "int8", "uint8")


class Cast(ElementwiseOp):
    """``data`` converted to ``dtype`` (floats to integers truncate toward zero).

    The gradient is the head gradient converted back to the input's dtype. Backward keeps
    only that dtype.
    """

    name = "Cast"
    aliases = ("cast",)
    params = {"dtype": Param("dtype")}

    def check(self) -> None:
        self.dtype = dtype_choice(self.name, "dtype", self.dtype, CAST_DTYPES)

    def infer_type(self, in_types, out_types):
        return [in_types[0]], [self.dtype], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [x.astype(self.dtype, copy=False)], x.dtype

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].astype(saved, copy=False)]
