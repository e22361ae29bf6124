"""add_n (ElementWiseSum): the sum of any number of same-shape inputs."""
from __future__ import annotations

from ...sparse import CSRArray, RowSparseArray
from ...sparse.row_sparse import sum_rows
from ..base import ElementwiseOp, Param
from ._sparse_math import bare


class AddN(ElementwiseOp):
    """``arg0 + arg1 + ... + arg{num_args-1}``, all of one shape.

    Sparse inputs, as MXNet 1.9.1: row_sparse inputs only give a row_sparse sum (the union of
    their rows, summed in the inputs' order); any other mix gives a dense sum, into which the
    sparse inputs add their stored values (no dense copy of them is made).

    Backward keeps nothing: every input receives the output gradient (in its storage).
    """

    name = "add_n"
    aliases = ("ElementWiseSum",)
    variadic = "num_args"
    params = {"num_args": Param("int")}

    def takes_sparse(self, in_stypes):
        return any(t != "default" for t in in_stypes)

    def infer_storage(self, in_stypes):
        if all(t == "row_sparse" for t in in_stypes):
            return ["row_sparse"], ["row_sparse"] * len(in_stypes)
        return ["default"], ["default"] * len(in_stypes)

    def forward(self, xp, inputs, aux, is_train):
        if all(isinstance(x, RowSparseArray) for x in inputs):
            parts = [bare(x) for x in inputs]
            return [sum_rows(parts, parts[0].shape)], None
        if not any(isinstance(x, (RowSparseArray, CSRArray)) for x in inputs):
            out = inputs[0] + inputs[1] if len(inputs) > 1 else inputs[0].copy()
            for x in inputs[2:]:
                out += x  # `out` is a fresh array, safe to update in place
            return [out], None
        dense = [x for x in inputs if not isinstance(x, (RowSparseArray, CSRArray))]
        dtype = inputs[0].dtype
        out = dense[0].astype(dtype, copy=True) if dense else \
            xp.zeros(inputs[0].shape, dtype)
        for x in dense[1:]:
            out += x
        for x in inputs:
            if isinstance(x, RowSparseArray):
                x = bare(x)
                out[x.indices] += x.data
            elif isinstance(x, CSRArray):
                x = bare(x)  # a csr array stores each place once: += adds every value
                out[x.row_ids(), x.indices] += x.data
        return [out], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] if need else None for need in need_grad]
