"""dot and batch_dot: tensor contraction and batched matrix products."""
from __future__ import annotations

from ...base import ShapeError
from ...sparse import CSRArray, RowSparseArray
from ...sparse.kernels import csr_t_times, csr_times
from ..base import Op, Param, merge_shape

_ARGS = {"transpose_a": Param("bool", False), "transpose_b": Param("bool", False),
         "forward_stype": Param("str", None, optional=True)}


class Dot(Op):
    """Contract the last axis of ``lhs`` with the first axis of ``rhs`` (N-d, as MXNet).

    ``transpose_a`` contracts the first axis of ``lhs`` instead, ``transpose_b`` the last axis
    of ``rhs``. Output: the remaining lhs axes then the remaining rhs axes; two 1-d inputs give
    shape (1,). Backward keeps both inputs.

    Sparse operands, as MXNet: ``dot(csr, rhs)`` with a dense or row_sparse ``rhs`` is dense
    and gives ``rhs`` a row_sparse gradient (the rows of the csr's columns: only the features
    a batch holds); ``dot(csr, rhs, transpose_a=True)`` is row_sparse. A csr operand takes no
    gradient. Other sparse combinations compute densely. ``forward_stype`` is accepted; the
    output's storage follows from the operands'.
    """

    name = "dot"
    inputs = ("lhs", "rhs")
    params = _ARGS
    retain_inputs = (0, 1)

    def takes_sparse(self, in_stypes):
        lhs, rhs = in_stypes
        return lhs == "csr" and not self.transpose_b and (
            rhs == "default" or (rhs == "row_sparse" and not self.transpose_a))

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        if self.transpose_a:
            return ["row_sparse"], ["default", "default"]
        return ["default"], ["default", "row_sparse"]

    def _axes(self, lnd: int, rnd: int) -> tuple[int, int]:
        return (0 if self.transpose_a else lnd - 1), (rnd - 1 if self.transpose_b else 0)

    def infer_shape(self, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        out = out_shapes[0]
        if lhs is None or rhs is None:
            return [lhs, rhs], [out], []
        la, ra = self._axes(len(lhs), len(rhs))
        try:
            k = merge_shape((lhs[la],), (rhs[ra],))[0]
        except ShapeError:
            raise ShapeError(f"lhs of shape {lhs} and rhs of shape {rhs} do not match on the "
                             f"contracted axis (transpose_a={self.transpose_a}, "
                             f"transpose_b={self.transpose_b})") from None
        lhs, rhs = lhs[:la] + (k,) + lhs[la + 1:], rhs[:ra] + (k,) + rhs[ra + 1:]
        rest = lhs[:la] + lhs[la + 1:] + rhs[:ra] + rhs[ra + 1:]
        return [lhs, rhs], [rest or (1,)], []

    def forward(self, xp, inputs, aux, is_train):
        a, b = inputs
        if isinstance(a, CSRArray):
            if self.transpose_a:
                return [csr_t_times(a, b, a.shape[1])], None
            return [xp.asarray(csr_times(a, b)).astype(b.dtype, copy=False)], None
        la, ra = self._axes(a.ndim, b.ndim)
        y = xp.tensordot(a, b, axes=([la], [ra]))
        return [y.reshape(1) if y.ndim == 0 else y], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        a, b = inputs
        if isinstance(a, CSRArray):
            g = out_grads[0]
            if isinstance(g, RowSparseArray):
                g = g.todense()
            if self.transpose_a:  # y = a.T @ b: gb = a @ g
                return [None, csr_times(a, g).astype(b.dtype, copy=False) if need_grad[1]
                        else None]
            return [None, csr_t_times(a, g, b.shape[0]) if need_grad[1] else None]
        la, ra = self._axes(a.ndim, b.ndim)
        na, nb = a.ndim - 1, b.ndim - 1  # free axes of each side
        g = out_grads[0].reshape(a.shape[:la] + a.shape[la + 1:] + b.shape[:ra] + b.shape[ra + 1:])
        ga = gb = None
        if need_grad[0]:  # free axes of a, then k
            b_free = [i for i in range(b.ndim) if i != ra]
            ga = xp.moveaxis(xp.tensordot(g, b, axes=(list(range(na, na + nb)), b_free)), -1, la)
        if need_grad[1]:  # k, then free axes of b
            a_free = [i for i in range(a.ndim) if i != la]
            gb = xp.moveaxis(xp.tensordot(a, g, axes=(a_free, list(range(na)))), 0, ra)
        return [ga, gb]


class BatchDot(Op):
    """Matrix products over the leading (batch) axes: ``lhs[..., m, k] @ rhs[..., k, n]``.

    Inputs have the same number of dims, at least 3. ``transpose_a``/``transpose_b`` swap the
    last two axes of ``lhs``/``rhs`` first. Backward keeps both inputs.
    """

    name = "batch_dot"
    inputs = ("lhs", "rhs")
    params = _ARGS
    retain_inputs = (0, 1)

    def infer_shape(self, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        out = out_shapes[0]
        if lhs is None or rhs is None:
            return [lhs, rhs], [out], []
        if len(lhs) < 3 or len(lhs) != len(rhs):
            raise ShapeError(f"lhs and rhs must have the same number (>= 3) of dims, got "
                             f"lhs {lhs} and rhs {rhs}")
        m, k1 = (lhs[-1], lhs[-2]) if self.transpose_a else (lhs[-2], lhs[-1])
        k2, n = (rhs[-1], rhs[-2]) if self.transpose_b else (rhs[-2], rhs[-1])
        try:
            batch = merge_shape(lhs[:-2], rhs[:-2])
            merge_shape((k1,), (k2,))
        except ShapeError:
            raise ShapeError(f"lhs of shape {lhs} and rhs of shape {rhs} do not match "
                             f"(transpose_a={self.transpose_a}, "
                             f"transpose_b={self.transpose_b})") from None
        return [batch + lhs[-2:], batch + rhs[-2:]], [batch + (m, n)], []

    def forward(self, xp, inputs, aux, is_train):
        a, b = self._operands(xp, inputs)
        return [xp.matmul(a, b)], None

    def _operands(self, xp, inputs):
        a, b = inputs
        return (xp.swapaxes(a, -1, -2) if self.transpose_a else a,
                xp.swapaxes(b, -1, -2) if self.transpose_b else b)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        a, b = self._operands(xp, inputs)  # the operands as multiplied
        g = out_grads[0]
        ga = gb = None
        if need_grad[0]:
            ga = (xp.matmul(b, xp.swapaxes(g, -1, -2)) if self.transpose_a
                  else xp.matmul(g, xp.swapaxes(b, -1, -2)))
        if need_grad[1]:
            gb = (xp.matmul(xp.swapaxes(g, -1, -2), a) if self.transpose_b
                  else xp.matmul(xp.swapaxes(a, -1, -2), g))
        return [ga, gb]
