"""cast_storage and _sparse_retain: changing how an array is stored, keeping some rows."""
from __future__ import annotations

from ...sparse import RowSparseArray, is_sparse
from ...sparse.storage import STYPES, cast_storage
from ..base import ElementwiseOp, Param


class CastStorage(ElementwiseOp):
    """``data`` stored as ``stype`` (``default``, ``csr`` or ``row_sparse``); the same values.

    The gradient passes through as a dense array. A csr input takes no gradient (data).
    """

    name = "cast_storage"
    params = {"stype": Param("str", choices=STYPES)}

    def takes_sparse(self, in_stypes):
        return True

    def infer_storage(self, in_stypes):
        return [self.stype], ["default"]

    def forward(self, xp, inputs, aux, is_train):
        return [cast_storage(inputs[0], self.stype)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g.todense() if is_sparse(g) else g]


class SparseRetain(ElementwiseOp):
    """The rows of a row_sparse ``data`` whose ids are in ``indices`` (others dropped).

    The gradient keeps the same rows of the output gradient. ``indices`` takes no gradient.
    """

    name = "_sparse_retain"
    aliases = ("sparse_retain",)
    params = {}
    inputs = ("data", "indices")
    no_grad_inputs = ("indices",)
    retain_inputs = (1,)

    def infer_shape(self, in_shapes, out_shapes):
        shapes, outs, aux = super().infer_shape(in_shapes[:1], out_shapes)
        return shapes + [in_shapes[1]], outs, aux

    def infer_type(self, in_types, out_types):
        return [in_types[0], in_types[1]], [in_types[0]], []

    def takes_sparse(self, in_stypes):
        return in_stypes == ["row_sparse", "default"]

    def infer_storage(self, in_stypes):
        return ["row_sparse"], ["row_sparse", "default"]

    def forward(self, xp, inputs, aux, is_train):
        data, indices = inputs
        return [data.retain(indices)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, indices = out_grads[0], inputs[1]
        if not isinstance(g, RowSparseArray):
            g = RowSparseArray.full(g)
        return [g.retain(indices), None]
