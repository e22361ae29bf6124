"""transpose: permute the axes."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._axis import fill_unknown, norm_axis


class Transpose(Op):
    """Permute the axes of ``data``: output axis i is input axis ``axes[i]``.

    Empty ``axes`` (the default) reverses the axes. Negative axes count from the end.
    Backward keeps nothing: it applies the inverse permutation.
    """

    name = "transpose"
    params = {"axes": Param("shape", ())}

    def perm(self, ndim: int) -> tuple:
        if not self.axes:
            return tuple(range(ndim - 1, -1, -1))
        perm = tuple(norm_axis(a, ndim, "axes") for a in self.axes)
        if sorted(perm) != list(range(ndim)):
            raise ShapeError(f"axes={self.axes} is not a permutation of the {ndim} axes of "
                             "the input")
        return perm

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        ndim = len(data) if data is not None else len(out) if out is not None else None
        if ndim is None:
            return [None], [None], []
        perm = self.perm(ndim)
        if out is not None:
            back = [0] * ndim
            for i, p in enumerate(perm):
                back[p] = out[i]
            data = fill_unknown(data, tuple(back)) if data is not None else tuple(back)
        return [data], [tuple(data[p] for p in perm)], []

    def forward(self, xp, inputs, aux, is_train):
        return [xp.transpose(inputs[0], self.perm(inputs[0].ndim))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        perm = self.perm(g.ndim)
        inverse = [0] * g.ndim
        for i, p in enumerate(perm):
            inverse[p] = i
        return [xp.transpose(g, inverse)]
