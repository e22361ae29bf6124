"""Embedding: look up rows of a weight matrix by integer index."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError
from ..base import Op, Param, merge_shape


class Embedding(Op):
    """``output[..., :] = weight[data[...], :]``: one ``output_dim`` row per index.

    ``data`` holds indices of any shape, as integers or floats (truncated to integers, then
    clipped to ``[0, input_dim - 1]`` as MXNet does). ``weight`` is (input_dim, output_dim);
    the output has ``data.shape + (output_dim,)`` and the weight's dtype (``dtype`` when the
    weight's is not given). ``data`` takes no gradient; the weight gradient is a dense
    scatter-add of the output gradient rows (``sparse_grad`` is accepted, the gradient stays
    dense). Backward keeps the clipped indices.
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

    def _indices(self, xp, data):
        # in place, not clip(): numpy's clip costs 3x the three calls at a batch's indices
        indices = data.astype(xp.int64)
        xp.maximum(indices, 0, out=indices)
        xp.minimum(indices, self.input_dim - 1, out=indices)
        return indices

    def forward(self, xp, inputs, aux, is_train):
        data, weight = inputs
        indices = self._indices(xp, data)
        return [weight[indices]], indices

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[1]:
            return [None, None]
        d = self.output_dim
        g = out_grads[0].reshape(-1, d)
        # flat 1-D add.at: numpy's fast path, and one atomic kernel on CuPy
        flat = (saved.reshape(-1, 1) * d + xp.arange(d)).reshape(-1)
        grad = xp.zeros(self.input_dim * d, g.dtype)
        xp.add.at(grad, flat, g.reshape(-1))
        return [None, grad.reshape(self.input_dim, d)]
