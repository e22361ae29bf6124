"""Embedding: look up rows of a weight matrix by integer index."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError
from ...sparse import RowSparseArray
from ...sparse.kernels import scatter_rows
from ..base import Op, Param, merge_shape


class Embedding(Op):
    """``output[..., :] = weight[data[...], :]``: one ``output_dim`` row per index.

    ``data`` holds indices of any shape, as integers or floats (truncated to integers, then
    clipped to ``[0, input_dim - 1]`` as MXNet does). ``weight`` is (input_dim, output_dim);
    the output has ``data.shape + (output_dim,)`` and the weight's dtype (``dtype`` when the
    weight's is not given). ``data`` takes no gradient. The weight gradient is the output
    gradient rows summed into the rows they were looked up from: with ``sparse_grad=True`` a
    row_sparse array of only the rows looked up, else dense, whatever the weight's storage
    (MXNet's rule). A row_sparse weight holding some rows only (the rows a worker pulled)
    gives zeros for the others. Backward keeps the clipped indices.
    """

    name = "Embedding"
    params = {"input_dim": Param("int"), "output_dim": Param("int"),
              "dtype": Param("dtype", "float32"), "sparse_grad": Param("bool", False)}
    inputs = ("data", "weight")
    no_grad_inputs = ("data",)

    def check(self) -> None:
        if self.input_dim < 1 or self.output_dim < 1:
            raise AttributeValueError(f"Embedding: input_dim and output_dim must be >= 1, got "
                                      f"{self.input_dim} and {self.output_dim}")

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if out is not None:
            data = merge_shape(data, tuple(out[:-1]), "output must be data.shape + (output_dim,)")
        if data is not None:
            out = merge_shape(out, tuple(data) + (self.output_dim,),
                              "output must be data.shape + (output_dim,)")
        return [data, (self.input_dim, self.output_dim)], [out], []

    def infer_type(self, in_types, out_types):
        weight = in_types[1] or out_types[0] or np.dtype(self.dtype)
        return [in_types[0], weight], [weight], []

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "default" and in_stypes[1] == "row_sparse"

    def infer_storage(self, in_stypes):
        return ["default"], ["default", "row_sparse" if self.sparse_grad else "default"]

    def _indices(self, xp, data):
        # in place, not clip(): numpy's clip costs 3x the three calls at a batch's indices
        indices = data.astype(xp.int64)
        xp.maximum(indices, 0, out=indices)
        xp.minimum(indices, self.input_dim - 1, out=indices)
        return indices

    def forward(self, xp, inputs, aux, is_train):
        data, weight = inputs
        indices = self._indices(xp, data)
        if isinstance(weight, RowSparseArray):
            if weight.indices.shape[0] == 0:  # no rows held: every lookup is a zero row
                return [xp.zeros(indices.shape + tuple(weight.shape[1:]), weight.dtype)], \
                    (indices, self.sparse_grad)
            return [weight.take(indices)], (indices, self.sparse_grad)
        return [weight[indices]], (indices, self.sparse_grad)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[1]:
            return [None, None]
        indices, sparse = saved
        d = self.output_dim
        g = out_grads[0]
        if isinstance(g, RowSparseArray):  # a head gradient some reader made sparse
            g = g.todense()
        g = g.reshape(-1, d)
        if sparse:
            return [None, scatter_rows(xp, indices, g, (self.input_dim, d))]
        # flat 1-D add.at: numpy's fast path, and one atomic kernel on CuPy
        flat = (indices.reshape(-1, 1) * d + xp.arange(d)).reshape(-1)
        grad = xp.zeros(self.input_dim * d, g.dtype)
        xp.add.at(grad, flat, g.reshape(-1))
        return [None, grad.reshape(self.input_dim, d)]


class SparseEmbedding(Embedding):
    """``_contrib_SparseEmbedding``: :class:`Embedding` whose weight gradient is always
    row_sparse (MXNet's deprecated spelling of ``Embedding(sparse_grad=True)``).

    ``deterministic`` (MXNet's choice of a sorted, reproducible gradient kernel on GPU) is
    accepted; raymod's gradient is deterministic either way.
    """

    name = "_contrib_SparseEmbedding"
    params = {**Embedding.params, "deterministic": Param("bool", False)}

    def check(self) -> None:
        super().check()
        self.sparse_grad = True
