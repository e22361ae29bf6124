"""_contrib_getnnz and _contrib_quadratic: a csr array's stored-value counts, and the
quadratic ``a * x**2 + b * x + c``."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ...sparse import CSRArray
from ..base import ElementwiseOp, Op, Param
from ._sparse_math import bare, dense, with_values


class GetNNZ(Op):
    """How many values a csr ``data`` stores (explicit zeros included): in all (``axis``
    None, shape (1,)), per column (``axis=0``) or per row (``axis=1``), as int64.

    A dense ``data`` counts its non-zero entries (MXNet takes csr only). No gradient.
    """

    name = "_contrib_getnnz"
    params = {"axis": Param("int", None, optional=True)}
    no_grad_inputs = ("data",)

    def check(self) -> None:
        if self.axis not in (None, 0, 1):
            raise AttributeValueError(f"_contrib_getnnz: axis must be None, 0 or 1, got "
                                      f"{self.axis}")

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [(1,) if self.axis is None else out_shapes[0]], []
        if len(data) != 2:
            raise ShapeError(f"data must be 2-d (a csr matrix), got shape {tuple(data)}")
        out = (1,) if self.axis is None else (data[1 - self.axis],)
        return [data], [out], []

    def infer_type(self, in_types, out_types):
        return [in_types[0]], [np.dtype(np.int64)], []

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "csr"

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if isinstance(x, CSRArray):
            x = bare(x)
            if self.axis is None:
                out = xp.asarray([x.nnz], dtype=np.int64)
            elif self.axis == 1:
                out = xp.diff(x.indptr).astype(np.int64)
            else:
                out = xp.bincount(x.indices, minlength=x.shape[1]).astype(np.int64)
            return [out], None
        stored = x != 0
        if self.axis is None:
            return [stored.sum().reshape(1).astype(np.int64)], None
        return [stored.sum(axis=self.axis).astype(np.int64)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class Quadratic(ElementwiseOp):
    """``a * data**2 + b * data + c``. A csr ``data`` with ``c == 0`` gives a csr result (its
    stored values computed), as MXNet; otherwise dense.

    The gradient is ``head * (2 * a * data + b)``, dense. Backward keeps the input.
    """

    name = "_contrib_quadratic"
    params = {"a": Param("float", 0.0), "b": Param("float", 0.0), "c": Param("float", 0.0)}
    retain_inputs = (0,)

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "csr" and self.c == 0

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return ["csr"], ["default"]

    def _f(self, x):
        return self.a * x * x + self.b * x + self.c

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if isinstance(x, CSRArray):
            x = bare(x)
            return [with_values(x, self._f(x.data).astype(x.dtype, copy=False))], None
        return [self._f(x).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = dense(inputs[0])
        return [dense(out_grads[0]) * (2 * self.a * x + self.b)]
