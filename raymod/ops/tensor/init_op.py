"""Constant arrays: _zeros and _ones (no inputs), zeros_like and ones_like."""
from __future__ import annotations

import numpy as np

from ...base import ShapeError
from ...sparse import is_sparse, stype_of
from ...sparse import zeros as sparse_zeros
from ..base import ElementwiseOp, Op, Param, known, merge_shape


class _Fill(Op):
    inputs = ()
    # MXNet's order for _zeros/_ones (rm.sym.zeros/ones are functions taking shape, dtype)
    params = {"shape": Param("shape", ()), "ctx": Param("str", ""),
              "dtype": Param("dtype", "float32")}
    # forward needs the shapes the executor inferred: a 0 in `shape` (a batch size) is only
    # known from the graph, and one op instance may serve executors of different shapes
    needs_out_shapes = True

    def check(self) -> None:
        self.dtype = np.dtype(self.dtype)

    def infer_shape(self, in_shapes, out_shapes):
        return [], [merge_shape(self.shape, out_shapes[0])], []

    def infer_type(self, in_types, out_types):
        return [], [self.dtype], []

    def forward(self, xp, inputs, aux, is_train, out_shapes=None, out_dtypes=None):
        shape = out_shapes[0] if out_shapes else self.shape
        if not known(shape) and shape != ():
            raise ShapeError(f"{self.name}: shape {shape} has unknown dims and the executor "
                             "passed no inferred output shape")
        dtype = out_dtypes[0] if out_dtypes else self.dtype
        return [self.fill(xp, tuple(shape), dtype)], None


class Zeros(_Fill):
    """An array of zeros of ``shape`` and ``dtype``; 0 dims are inferred from the graph.

    ``ctx`` is accepted and ignored (the executor's device is used). No inputs, no gradient.
    """

    name = "_zeros"
    aliases = ("zeros",)

    def fill(self, xp, shape, dtype):
        return xp.zeros(shape, dtype)


class Ones(_Fill):
    """An array of ones of ``shape`` and ``dtype``; otherwise as :class:`Zeros`."""

    name = "_ones"
    aliases = ("ones",)

    def fill(self, xp, shape, dtype):
        return xp.ones(shape, dtype)


class ZerosLike(ElementwiseOp):
    """Zeros of the shape, dtype and storage of ``data`` (a csr or row_sparse input gives an
    array of its storage storing nothing, as MXNet). The input gets no gradient; keeps
    nothing."""

    name = "zeros_like"
    params = {}

    def takes_sparse(self, in_stypes):
        return in_stypes[0] != "default"

    def infer_storage(self, in_stypes):
        return [in_stypes[0]], ["default"]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if is_sparse(x):
            return [sparse_zeros(stype_of(x), x.shape, x.dtype, x.xp)], None
        return [xp.zeros_like(x)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class OnesLike(ElementwiseOp):
    """Ones of the shape and dtype of ``data``. The input gets no gradient; keeps nothing."""

    name = "ones_like"
    params = {}

    def forward(self, xp, inputs, aux, is_train):
        return [xp.ones_like(inputs[0])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]
