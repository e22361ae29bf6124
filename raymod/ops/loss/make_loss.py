"""MakeLoss: mark any symbol as a loss whose gradient is a constant."""
from __future__ import annotations

from ..base import ElementwiseOp, Param


class MakeLoss(ElementwiseOp):
    """Identity forward; backward ignores head gradients and emits ``grad_scale / norm``.

    ``normalization``: ``'null'`` (norm 1), ``'batch'`` (norm = size / last dim, i.e. the rows
    of the data flattened to 2-d, as MXNet: (n, k) gives n, (n, t, k) gives n*t, (n,) gives 1)
    or ``'valid'`` (norm = the number of elements greater than ``valid_thresh``, at least 1).
    ``make_loss`` (no attributes in MXNet) is an alias. Backward keeps the output.
    """

    name = "MakeLoss"
    aliases = ("make_loss",)
    params = {"grad_scale": Param("float", 1.0), "valid_thresh": Param("float", 0.0),
              "normalization": Param("str", "null", choices=("null", "batch", "valid"))}
    retain_outputs = (0,)
    is_loss = True

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        out = outputs[0]
        if self.normalization == "valid":
            norm = max(int((out > self.valid_thresh).sum()), 1)
        elif self.normalization == "batch":
            norm = out.size // out.shape[-1] if out.ndim and out.shape[-1] else 1
        else:
            norm = 1
        return [xp.full(out.shape, self.grad_scale / norm, out.dtype)]
