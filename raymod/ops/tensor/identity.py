"""BlockGrad and _copy (identity): pass the input through, with or without its gradient.

Both keep a csr or row_sparse input's storage, as MXNet's."""
from __future__ import annotations

from ..base import ElementwiseOp


class _PassThrough(ElementwiseOp):
    params = {}

    def takes_sparse(self, in_stypes):
        return in_stypes[0] != "default"

    def infer_storage(self, in_stypes):
        grad = "row_sparse" if in_stypes[0] == "row_sparse" else "default"
        return [in_stypes[0]], [grad]


class BlockGrad(_PassThrough):
    """The input, unchanged; no gradient flows back through it. Backward keeps nothing."""

    name = "BlockGrad"
    aliases = ("stop_gradient",)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class Copy(_PassThrough):
    """The input, unchanged, with the gradient passed straight back (in its storage).
    Backward keeps nothing.

    The output shares memory with the input (op outputs are never written in place).
    """

    name = "_copy"
    aliases = ("identity",)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]
