"""take: gather slices of one axis by index."""
from __future__ import annotations

import math

from ...base import MXNetError
from ...sparse import CSRArray
from ..base import Op, Param
from ._checks import as_index, axis_of
from ._sparse_math import bare, dense


class Take(Op):
    """``a`` indexed along ``axis`` by ``indices``: shape ``a.shape[:axis] + indices.shape +
    a.shape[axis + 1:]``.

    Indices may be floats (truncated toward zero). ``mode`` handles those outside
    ``[0, n)``: ``'clip'`` clamps them to the ends (so -1 gives the first slice), ``'wrap'``
    takes them modulo ``n`` (so -1 gives the last), ``'raise'`` raises :class:`MXNetError`.
    ``indices`` gets a zero gradient; ``a``'s gradient adds up the head gradient of every
    slice taken from it (repeated indices add). Backward keeps the resolved indices.

    A csr ``a`` taken along axis 0 with ``mode`` ``'clip'`` or ``'wrap'`` gives a csr result
    (its rows at ``indices``), as MXNet; its gradient is dense.
    """

    name = "take"
    inputs = ("a", "indices")
    params = {"axis": Param("int", 0), "mode": Param("str", "clip", choices=("clip", "raise",
                                                                               "wrap"))}
    no_grad_inputs = ("indices",)

    def infer_shape(self, in_shapes, out_shapes):
        a, idx = in_shapes
        if a is None:
            return [a, idx], [out_shapes[0]], []
        ax = axis_of(self.axis, a)
        if idx is None:
            return [a, idx], [None], []
        return [a, idx], [tuple(a[:ax]) + tuple(idx) + tuple(a[ax + 1:])], []

    def infer_type(self, in_types, out_types):
        dtype = in_types[0] or out_types[0]
        return [dtype, in_types[1]], [dtype], []

    def takes_sparse(self, in_stypes):
        return in_stypes == ["csr", "default"] and self.axis == 0 and self.mode != "raise"

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return ["csr"], ["default", "default"]

    def forward(self, xp, inputs, aux, is_train):
        a, indices = inputs
        ax = axis_of(self.axis, a.shape)
        n = a.shape[ax]
        idx = as_index(xp, indices)
        if self.mode == "clip":
            idx = xp.clip(idx, 0, n - 1)
        elif self.mode == "wrap":
            idx = xp.mod(idx, n)
        elif bool(((idx < 0) | (idx >= n)).any()):
            raise MXNetError(f"take: mode='raise' and indices outside [0, {n}) for axis "
                             f"{self.axis} of a of shape {a.shape} (min {int(idx.min())}, "
                             f"max {int(idx.max())})")
        if isinstance(a, CSRArray):
            if idx.ndim != 1:
                raise MXNetError(f"take: a csr array takes 1-d indices, got indices of shape "
                                 f"{tuple(idx.shape)}")
            return [bare(a).take_rows(idx)], (a.shape, ax, idx)
        return [xp.take(a, idx, axis=ax)], (a.shape, ax, idx)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        shape, ax, idx = saved
        pre, n, post = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:])
        g = dense(out_grads[0]).reshape(pre, idx.size, post)
        # one flat add.at (numpy's fast path, one atomic kernel on CuPy): repeated indices add
        flat = ((xp.arange(pre).reshape(pre, 1, 1) * n + idx.reshape(1, -1, 1)) * post
                + xp.arange(post).reshape(1, 1, post))
        grad = xp.zeros(pre * n * post, g.dtype)
        xp.add.at(grad, flat.reshape(-1), g.reshape(-1))
        return [grad.reshape(shape), None]
