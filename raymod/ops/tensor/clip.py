"""clip: limit values to [a_min, a_max]."""
from __future__ import annotations

from ...base import AttributeValueError
from ...sparse import is_sparse
from ..base import ElementwiseOp, Param
from ._sparse_math import SPARSE, bare, dense, values_at, with_values


class Clip(ElementwiseOp):
    """``min(max(data, a_min), a_max)``.

    The gradient passes where ``a_min <= data <= a_max`` (bounds included, as MXNet) and is 0
    outside. Backward keeps the input.

    A csr or row_sparse input keeps its storage when ``a_min <= 0 <= a_max`` (clipping keeps
    0), computed on its stored values; otherwise it is clipped as a dense copy. The gradient
    of a sparse input is dense (it passes where the input is 0), or in the head gradient's
    storage when that is sparse.
    """

    name = "clip"
    params = {"a_min": Param("float"), "a_max": Param("float")}
    retain_inputs = (0,)

    def check(self) -> None:
        if self.a_min > self.a_max:
            raise AttributeValueError(f"clip: a_min={self.a_min} is above a_max={self.a_max}")

    def takes_sparse(self, in_stypes):
        return in_stypes[0] in SPARSE and self.a_min <= 0 <= self.a_max

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return [in_stypes[0]], ["default"]

    def _passes(self, x):
        return (x >= self.a_min) & (x <= self.a_max)

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if is_sparse(x):
            x = bare(x)
            return [with_values(x, xp.clip(x.data, self.a_min, self.a_max).astype(
                x.dtype, copy=False))], None
        return [xp.clip(x, self.a_min, self.a_max).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, g = inputs[0], out_grads[0]
        if is_sparse(g):  # the head's places; the input read there (0 where it stores none)
            g = bare(g)
            return [with_values(g, g.data * self._passes(values_at(xp, x, g)))]
        return [g * self._passes(dense(x))]
