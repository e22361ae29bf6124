"""SoftmaxOutput: softmax forward, cross-entropy gradient backward (a loss head)."""
from __future__ import annotations

import math

import numpy as np

from .._row_blocks import softmax_rows
from ..base import Param
from ._labelled import ClassHead


class SoftmaxOutput(ClassHead):
    """Softmax of ``data`` in forward; in backward the cross-entropy gradient
    ``(softmax - onehot(label)) * grad_scale / norm``, ignoring any head gradient.

    The softmax runs over axis 1 with ``multi_output`` (data (n, k, d1, ...), label
    (n, d1*...) or (n, d1, ...)), over the last axis with ``preserve_shape`` (label
    data.shape[:-1]), and otherwise over all non-batch axes flattened (label (n,); for data
    of more than 2 dims MXNet infers label data.shape[:-1] and reads its first n values, as
    here). A label with the data's shape holds probabilities: the gradient is then
    ``(softmax - label) * grad_scale``, with no normalisation or smoothing.

    Index labels are truncated to integers; out-of-range ones match no class. With
    ``use_ignore``, positions whose label is ``ignore_label`` get zero gradient.
    ``normalization``: ``'null'`` divides by 1 (by d1*... with ``multi_output``, as MXNet),
    ``'batch'`` by the label's size, ``'valid'`` by the number of labels other than
    ``ignore_label`` (at least 1). ``smooth_alpha`` smooths the target to ``1 - alpha`` on the
    label and ``alpha / (k - 1)`` elsewhere; like MXNet 1.9.1 it has no effect with
    ``multi_output``. ``out_grad=True`` multiplies the gradient by the head gradient (the
    documented meaning; MXNet 1.9.1 multiplies by the output instead) and makes the op an
    ordinary, non-loss node. Backward keeps the label and the output.
    """

    name = "SoftmaxOutput"
    aliases = ("Softmax",)
    params = {"grad_scale": Param("float", 1.0), "ignore_label": Param("float", -1.0),
              "multi_output": Param("bool", False), "use_ignore": Param("bool", False),
              "preserve_shape": Param("bool", False),
              "normalization": Param("str", "null", choices=("null", "batch", "valid")),
              "out_grad": Param("bool", False), "smooth_alpha": Param("float", 0.0)}
    retain_inputs = (1,)
    retain_outputs = (0,)

    def check(self) -> None:
        self.is_loss = not self.out_grad

    def _label_shapes(self, data: tuple) -> list[tuple]:
        """Accepted label shapes for ``data``; the first is the one inferred."""
        if self.multi_output:
            rest = data[2:]
            # MXNet also takes (n, 1, d1, ...): the data's shape with one class
            return [(data[0], math.prod(rest)), (data[0],) + rest, data[:1] + (1,) + rest,
                    data]
        if self.preserve_shape:
            return [data[:-1], data]
        return [data[:-1], data[:1], data]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if self.multi_output:
            z, axis = x, 1
        elif self.preserve_shape:
            z, axis = x, -1
        else:
            z, axis = x.reshape(x.shape[0], -1), 1
        if xp is np and (axis == -1 or z.ndim == 2) and z.flags.c_contiguous:
            # a softmax along contiguous rows: in cached blocks, on the pool's threads
            return [softmax_rows(z.reshape(-1, z.shape[-1])).reshape(x.shape)], None
        e = z - z.max(axis=axis, keepdims=True)
        xp.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return [e.reshape(x.shape)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        p, label = outputs[0], inputs[1]
        if not need_grad[0]:
            return [None, None]
        if label.shape == p.shape:  # probability labels
            grad = (p - label.astype(p.dtype, copy=False)) * self.grad_scale
        else:
            grad = self._index_label_grad(xp, p, label)
        if self.out_grad and out_grads[0] is not None:
            grad = grad * out_grads[0]
        return [grad.astype(p.dtype, copy=False), None]

    def _index_label_grad(self, xp, p, label):
        lab = label.astype(xp.int64)
        ignore = int(self.ignore_label)
        n = p.shape[0]
        if self.multi_output:  # class axis 1, positions flattened
            k = p.shape[1]
            probs, lab = p.reshape(n, k, -1), lab.reshape(n, 1, -1)
            onehot = lab == xp.arange(k).reshape(1, k, 1)
            grad = probs - onehot
            keep_shape = (n, 1, -1)
        else:
            k = p.shape[-1] if self.preserve_shape else p.size // n
            probs = p.reshape(-1, k)
            lab = lab.reshape(-1, 1)[:probs.shape[0]]
            if self.smooth_alpha and k > 1:
                onehot = lab == xp.arange(k).reshape(1, k)
                a, dt = self.smooth_alpha, p.dtype.type
                grad = probs - xp.where(onehot, dt(1 - a), dt(a / (k - 1)))
            elif lab.shape[0] != probs.shape[0]:  # fewer labels than rows: they broadcast
                grad = probs - (lab == xp.arange(k).reshape(1, k))
            else:
                # probs - onehot(lab) without the (rows, k) one-hot: a copy, then one
                # subtraction per row (labels out of range match no class, as the one-hot)
                grad = probs.copy()
                flat = lab.reshape(-1)
                hit = xp.nonzero((flat >= 0) & (flat < k))[0]
                grad[hit, flat[hit]] -= 1
            keep_shape = (-1, 1)
        if self.use_ignore:
            grad *= (lab != ignore).reshape(keep_shape)
        if self.normalization == "valid":
            norm = max(int((label.astype(xp.int64) != ignore).sum()), 1)
        elif self.normalization == "batch":
            norm = label.size
        else:
            norm = label.size // n if self.multi_output else 1
        scale = self.grad_scale / norm
        if scale != 1:
            grad *= scale
        return grad.reshape(p.shape)
